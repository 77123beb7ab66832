"""What the emulators the suite starts share: a free port on 127.0.0.1, and
waiting until a server listens there."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float) -> None:
    """Return once ``proc`` listens on ``port``.

    Raises:
        RuntimeError: ``proc`` exited, or ``timeout`` seconds passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start on 127.0.0.1:{port}") from None
            time.sleep(0.05)
