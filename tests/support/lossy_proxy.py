"""An HTTP proxy in front of an S3 server that loses one reply, as a child
process (delta-rs holds the GIL in some calls, so a proxy thread in the
test's process could not answer them):

    python -m tests.support.lossy_proxy UPSTREAM {commit|data}

It prints ``port N`` once listening. Each request is forwarded as it came
(Host header and signature intact) and its answer returned, except, once a
line ``arm`` arrived on stdin, the first request that is the Delta table's
commit (a PUT of ``_delta_log/<20 digits>.json``) or a data file (a PUT of a
``.parquet``): forwarded and applied by the server, its answer dropped and
the connection closed, as a network that fails after the server acted. Then
it prints ``lost METHOD PATH STATUS``.
"""

from __future__ import annotations

import http.client
import http.server
import re
import socketserver
import sys
import threading
from typing import Any
from urllib.parse import urlsplit


def picks(kind: str, method: str, path: str) -> bool:
    if method != "PUT":
        return False
    if kind == "commit":
        return re.search(r"/_delta_log/\d{20}\.json$", path) is not None
    return path.split("?")[0].endswith(".parquet")


def main() -> None:
    upstream, kind = sys.argv[1], sys.argv[2]
    target = urlsplit(upstream)
    armed = threading.Event()
    lost: list[str] = []
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port)
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                conn.putheader(name, value)
            conn.endheaders(body)
            answer = conn.getresponse()
            data = answer.read()
            conn.close()
            with lock:
                lose = armed.is_set() and not lost and picks(kind, self.command, self.path)
                if lose:
                    lost.append(self.path)
            if lose:
                print(f"lost {self.command} {self.path} {answer.status}", flush=True)
                self.close_connection = True
                return
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that went away (the lost reply's) is no news

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"port {server.server_address[1]}", flush=True)
    for line in sys.stdin:
        if line.strip() == "arm":
            armed.set()
    server.shutdown()


if __name__ == "__main__":
    main()
