"""An HTTP front for the suite's S3 server whose answers a test scripts: it passes each
request on, or answers it itself (a 503, a 500, a 403), or forwards a PUT and then
drops the connection before the reply, as a network does when a reply is lost but
the write landed."""

from __future__ import annotations

import http.client
import http.server
import queue
import threading
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Answer:
    """What the front does with one request: ``status`` None forwards it; with
    ``drop`` the upstream reply is read and then the connection is cut."""

    status: int | None = None
    body: bytes = b""
    drop: bool = False
    method: str = ""  # only requests of this method take the answer ("": any)


class Front:
    """An HTTP front for SeaweedFS whose answers a test scripts."""

    def __init__(self, upstream: str) -> None:
        self.script: queue.Queue[Answer] = queue.Queue()
        self.seen: list[tuple[str, str, int | str]] = []
        target = urlsplit(upstream)
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                answer = front._next(self.command)
                if answer.status is not None:
                    front.seen.append((self.command, self.path, answer.status))
                    self.send_response(answer.status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(answer.body)))
                    self.end_headers()
                    self.wfile.write(answer.body)
                    return
                conn = http.client.HTTPConnection(target.netloc, timeout=30)
                # the client signed the Host it sent: pass it on unchanged
                conn.putrequest(self.command, self.path, skip_host=True,
                                skip_accept_encoding=True)  # fmt: skip
                for name, value in self.headers.items():
                    conn.putheader(name, value)
                conn.endheaders(body)
                reply = conn.getresponse()
                data = reply.read()
                conn.close()
                if answer.drop:
                    front.seen.append((self.command, self.path, f"{reply.status}, dropped"))
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                front.seen.append((self.command, self.path, reply.status))
                self.send_response(reply.status)
                for name, value in reply.getheaders():
                    if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_HEAD = do_DELETE = do_POST = _handle

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._pending: list[Answer] = []
        self._lock = threading.Lock()

    def _next(self, method: str) -> Answer:
        with self._lock:
            while True:
                try:
                    self._pending.append(self.script.get_nowait())
                except queue.Empty:
                    break
            for i, answer in enumerate(self._pending):
                if not answer.method or answer.method == method:
                    return self._pending.pop(i)
        return Answer()

    def reset(self) -> None:
        """Forward everything from now on."""
        with self._lock:
            self._pending.clear()
            while not self.script.empty():
                self.script.get_nowait()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def xml(code: str) -> bytes:
    return f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>m</Message></Error>".encode()
