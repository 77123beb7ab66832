"""A loopback shim in front of fake-gcs-server that gives it the XML API's
object PUT, which object_store (obstore's ``GCSStore``) sends and the emulator
lacks.

fake-gcs-server (1.54.0, and its main branch as of 2026-07) routes ``PUT
/bucket/object`` without ``uploadType`` to its JSON upload, which answers ``400
invalid uploadType``. Its JSON ``uploadType=multipart`` upload honours
``ifGenerationMatch`` (checked under the memory backend's lock); its
``uploadType=media`` ignores it. So::

    PUT /b/o  [x-goog-if-generation-match: N]
 -> POST /upload/storage/v1/b/b/o?uploadType=multipart[&ifGenerationMatch=N]

and the JSON answer becomes the XML API's: 200 with ``ETag`` and
``x-goog-generation``, or 412 ``PreconditionFailed``. Every other request (GET
with a range, HEAD, DELETE, listing, signed GETs) goes through unchanged. Not
translated: XML multipart uploads and copies, which fake-gcs-server lacks.

Run: ``python -m arrowlog.testing.gcs_shim LISTEN_PORT UPSTREAM_PORT`` (loopback
only; LISTEN_PORT 0 picks a free port, printed once bound);
:mod:`arrowlog.testing.fakegcs` starts it.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import sys
import threading
import urllib.parse
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: headers of one hop, never forwarded
HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "proxy-authenticate",
        "host",
        "content-length",
    }
)
PRECONDITION_FAILED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>PreconditionFailed</Code>"
    b"<Message>At least one of the pre-conditions you specified did not hold.</Message></Error>"
)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body go out in two writes: without this each answer waits
    # about 40 ms for the client's delayed ACK
    disable_nagle_algorithm = True
    upstream: tuple[str, int] = ("127.0.0.1", 0)
    _local = threading.local()

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _upstream(
        self, method: str, path: str, body: bytes, headers: dict[str, str]
    ) -> tuple[http.client.HTTPResponse, bytes]:
        """The emulator's answer. A kept-alive connection the emulator closed
        fails before it answers: an idempotent request is sent again on a new
        one. An upload (POST) is sent once, on a connection of its own: sent
        again after a lost answer, a conditional create that landed would be
        answered "exists" and its writer told it lost."""
        if method == "POST":
            once = http.client.HTTPConnection(*self.upstream, timeout=60)
            try:
                once.request(method, path, body=body, headers=headers)
                answer = once.getresponse()
                return answer, answer.read()
            finally:
                once.close()
        for attempt in range(2):
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self._local.conn = http.client.HTTPConnection(*self.upstream, timeout=60)
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                return response, response.read()
            except (http.client.HTTPException, OSError):
                conn.close()
                self._local.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def _host(self) -> str:
        host, port = self.upstream
        return f"{host}:{port}"

    def _body(self) -> bytes | None:
        """The request's body, by its length or its chunks; None when the
        client went away before sending all of it (or sent garbage): nothing
        is then forwarded, as a server stores no object from a torn upload."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._chunks()
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            return None
        data = self.rfile.read(n) if n > 0 else b""
        return data if len(data) == max(n, 0) else None

    def _chunks(self) -> bytes | None:
        parts: list[bytes] = []
        while True:
            line = self.rfile.readline(1 << 16)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                return None
            if size == 0:
                while True:  # trailers, up to the empty line
                    trailer = self.rfile.readline(1 << 16)
                    if trailer in (b"\r\n", b"\n"):
                        return b"".join(parts)
                    if not trailer.endswith(b"\n"):
                        return None
            chunk = self.rfile.read(size)
            if len(chunk) != size or self.rfile.readline(3) not in (b"\r\n", b"\n"):
                return None
            parts.append(chunk)

    def _torn(self) -> None:
        """A body that did not arrive whole: 400, and the connection closed."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.send_error(400, "the request's body did not arrive whole")

    def _send(self, status: int, headers: Sequence[tuple[str, str]], body: bytes) -> None:
        self.send_response(status)
        for k, v in headers:
            if k.lower() not in HOP:
                self.send_header(k, v)
        length = str(len(body))
        if self.command == "HEAD":  # no body, but the object's length
            length = {k.lower(): v for k, v in headers}.get("content-length", length)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self) -> None:
        body = self._body()
        if body is None:
            self._torn()
            return
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        headers["Host"] = self._host()
        response, data = self._upstream(self.command, self.path, body, headers)
        self._send(response.status, response.getheaders(), data)

    do_GET = do_HEAD = do_DELETE = do_POST = _forward

    def do_PUT(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = url.path.split("/", 2)
        if (
            len(parts) < 3
            or not parts[2]
            or {"uploadType", "X-Goog-Algorithm", "uploadId"} & query.keys()
            or self.headers.get("x-goog-copy-source")
        ):
            self._forward()
            return
        bucket, name = parts[1], urllib.parse.unquote(parts[2])
        data = self._body()
        if data is None:
            self._torn()
            return
        kind = self.headers.get("Content-Type") or "application/octet-stream"
        meta: dict[str, object] = {"name": name, "contentType": kind}
        user = {
            k[len("x-goog-meta-") :]: v
            for k, v in self.headers.items()
            if k.lower().startswith("x-goog-meta-")
        }
        if user:
            meta["metadata"] = user
        boundary = uuid.uuid4().hex
        body = (
            (
                f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
                f"{json.dumps(meta)}\r\n--{boundary}\r\nContent-Type: {kind}\r\n\r\n"
            ).encode()
            + data
            + f"\r\n--{boundary}--\r\n".encode()
        )
        upload = {"uploadType": "multipart"}
        generation = self.headers.get("x-goog-if-generation-match")
        if generation is not None:
            upload["ifGenerationMatch"] = generation
        response, out = self._upstream(
            "POST",
            f"/upload/storage/v1/b/{bucket}/o?{urllib.parse.urlencode(upload)}",
            body,
            {
                "Host": self._host(),
                "Content-Type": f"multipart/related; boundary={boundary}",
            },
        )
        if response.status == 200:
            written = json.loads(out)
            answer = [
                ("ETag", f'"{written["etag"]}"'),
                ("x-goog-generation", str(written["generation"])),
            ]
            self._send(200, answer, b"")
        elif response.status == 412:
            self._send(412, [("Content-Type", "application/xml")], PRECONDITION_FAILED)
        else:
            self._send(response.status, response.getheaders(), out)


def serve(port: int, upstream_port: int) -> None:
    """Serve on 127.0.0.1:``port`` (0: a free port) and print the port once
    bound: whoever started the shim waits for that line, not for a port that
    anyone could be listening on."""
    Handler.upstream = ("127.0.0.1", upstream_port)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
