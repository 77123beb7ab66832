"""The GCS shim (arrowlog/testing/gcs_shim.py) in front of fake-gcs-server:
what it makes of requests obstore never sends but a client may (a body cut
short, a chunked body)."""

from __future__ import annotations

import http.client
import socket
import uuid
from pathlib import Path

import pytest

from arrowlog.testing import fakegcs, loopback

pytestmark = pytest.mark.gcs


def _address(server: fakegcs.GcsServer) -> tuple[str, int]:
    host, port = server.endpoint.removeprefix("http://").split(":")
    return host, int(port)


def _get(server: fakegcs.GcsServer, key: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(*_address(server), timeout=10)
    try:
        conn.request("GET", f"/{server.bucket}/{key}")
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def _exchange(server: fakegcs.GcsServer, request: bytes) -> bytes:
    """Send ``request``, stop sending, and read the answer to its end."""
    with socket.create_connection(_address(server), timeout=10) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    return answer


def test_an_upload_cut_short_by_its_client_creates_no_object(
    gcs_server: fakegcs.GcsServer,
) -> None:
    key = f"torn-{uuid.uuid4().hex}"
    head = (
        f"PUT /{gcs_server.bucket}/{key} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n"
        "x-goog-if-generation-match: 0\r\n\r\n"
    ).encode()
    answer = _exchange(gcs_server, head + b"a" * 1000)  # then the client goes away
    assert not answer.startswith(b"HTTP/1.1 200"), answer[:200]
    status, body = _get(gcs_server, key)
    assert status == 404, f"a torn upload left a {len(body)}-byte object"
    # the key is still free: a whole upload claims it
    whole = head.replace(b"100000", b"3") + b"abc"
    assert _exchange(gcs_server, whole).startswith(b"HTTP/1.1 200")
    assert _get(gcs_server, key) == (200, b"abc")


def test_a_chunked_upload_stores_its_bytes_not_an_empty_object(
    gcs_server: fakegcs.GcsServer,
) -> None:
    key = f"chunked-{uuid.uuid4().hex}"
    data = b"\r\n--boundary\r\n" + bytes(range(256))
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in (data[:7], data[7:100], data[100:])
    )
    request = (
        (
            f"PUT /{gcs_server.bucket}/{key} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            "x-goog-if-generation-match: 0\r\nConnection: close\r\n\r\n"
        ).encode()
        + chunks
        + b"0\r\n\r\n"
    )
    answer = _exchange(gcs_server, request)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert _get(gcs_server, key) == (200, data)


def test_a_chunked_upload_cut_short_creates_no_object(gcs_server: fakegcs.GcsServer) -> None:
    key = f"chunked-torn-{uuid.uuid4().hex}"
    request = (
        f"PUT /{gcs_server.bucket}/{key} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        "10\r\nonly six"
    ).encode()
    answer = _exchange(gcs_server, request)
    assert not answer.startswith(b"HTTP/1.1 200"), answer[:200]
    assert _get(gcs_server, key)[0] == 404


def test_a_shim_port_taken_before_the_shim_binds_it_is_not_mistaken_for_the_shim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # another session's server took the port between free_port() and the shim's bind
    with socket.create_server(("127.0.0.1", 0)) as taken:
        occupied = taken.getsockname()[1]
        ports = iter([loopback.free_port(), occupied, occupied])
        monkeypatch.setattr(fakegcs, "free_port", lambda: next(ports))
        try:
            server = fakegcs.start(tmp_path)
        except RuntimeError:
            return  # refused to start: also right
        try:
            assert server.endpoint != f"http://127.0.0.1:{occupied}"
            assert all(proc.poll() is None for proc in server.processes)
        finally:
            server.stop()


def test_an_upload_whose_answer_is_lost_is_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An emulator that takes an upload and goes away before answering: the
    shim must not send it again (a conditional create that landed would then
    be answered "exists", and its writer told it lost)."""
    import threading
    from http.server import ThreadingHTTPServer

    from arrowlog.testing import gcs_shim

    received: list[bytes] = []
    upstream = socket.create_server(("127.0.0.1", 0))

    def swallow() -> None:  # reads each request line, answers nothing, hangs up
        while True:
            try:
                conn, _ = upstream.accept()
            except OSError:
                return
            with conn:
                received.append(conn.recv(65536).split(b"\r\n", 1)[0])

    threading.Thread(target=swallow, daemon=True).start()
    monkeypatch.setattr(gcs_shim.Handler, "upstream", upstream.getsockname())
    shim = ThreadingHTTPServer(("127.0.0.1", 0), gcs_shim.Handler)
    threading.Thread(target=shim.serve_forever, daemon=True).start()
    try:
        request = (
            b"PUT /bucket/key HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
            b"x-goog-if-generation-match: 0\r\n\r\nabc"
        )
        with socket.create_connection(("127.0.0.1", shim.server_port), timeout=10) as s:
            s.sendall(request)
            s.shutdown(socket.SHUT_WR)
            answer = s.recv(65536)
        assert not answer.startswith((b"HTTP/1.1 200", b"HTTP/1.1 412")), answer[:100]
        assert [line.split(b" ")[0] for line in received] == [b"POST"]
    finally:
        shim.shutdown()
        shim.server_close()
        upstream.close()
