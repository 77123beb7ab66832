"""What the servers the suite starts share: a free port on 127.0.0.1,
waiting until a server listens there, servers that die with the process
that started them, and stopping one with what it started."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

#: prctl's option: the signal a process gets when its parent dies (Linux)
_PR_SET_PDEATHSIG = 1


def dies_with_this_process() -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child is killed when
    this process dies, also by SIGKILL (a test run killed must leave no
    emulator behind). None where Linux's ``prctl`` is missing.

    The signal comes when the thread that started the child ends: start
    servers from a thread that outlives them (pytest's main thread does)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def arm() -> None:  # in the child, between fork and exec: nothing that locks
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before the signal was armed
            os._exit(1)

    return arm


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


def stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """Stop a server started in a process group of its own
    (``start_new_session``), with whatever it started: SIGTERM to the group,
    then SIGKILL if it has not exited within ``grace_s`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
