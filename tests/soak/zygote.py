"""A fork server for soak clients: ``python -m tests.soak.zygote``.

Importing pyarrow, arrowlog and s3fs takes a client 0.5 s on an idle machine
and several seconds on a busy one; a soak that kills a client every few
seconds would spend its time importing. The zygote imports everything once,
single-threaded, then forks a client per request. Each client is a real OS
process with its own pid: the parent SIGKILLs it directly.

Protocol (lines on stdin / stdout):

    -> {"argv": [...], "log": PATH}      fork a client running clients.main(argv),
                                         its stderr appended to PATH
    <- PID <pid>                          the client's pid, in request order
    <- READY <pid>                        written by the client once it is set up
    <- EXIT <pid> <code>                  the client ended (-9: SIGKILLed)

Each client leads a process group of its own (its pid), which holds whatever it
starts: the parent SIGKILLs the group.

EOF on stdin: the zygote waits for its clients and exits.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import sys
import threading
import traceback

import deltalake  # noqa: F401 - the exporters' table libraries, imported once here
import pyarrow as pa
import pyiceberg.catalog.sql  # noqa: F401

import arrowlog
import arrowlog.storage.objectstore  # imported once here, not in every client
import arrowlog.storage.s3
from tests.soak import clients
from tests.soak.model import IN_SCHEMA, OUT_SCHEMA


def _warm_up() -> None:
    """One transaction on a memory store, so that whatever pyarrow and arrowlog
    import lazily (pandas, compute kernels, IPC) is imported before the forks."""
    log = arrowlog.connect("memory://zygote")
    log.create_topic("in", IN_SCHEMA)
    log.create_topic("out", OUT_SCHEMA, partitions=2)
    log.producer().send("in", pa.record_batch({"rid": ["x"]}, schema=IN_SCHEMA))
    p = log.producer(transactional_id="warm")
    p.init_transactions()
    p.begin_transaction()
    for q in range(2):
        p.send("out", pa.record_batch({"rid": ["y"], "src": ["x"]}, schema=OUT_SCHEMA), partition=q)
    p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
    p.commit_transaction()
    p.close()  # its background end of the commit, and its thread
    consumer = log.consumer(group_id="g")
    consumer.read_many({("out", 0): (0, None), ("out", 1): (0, None)})
    consumer.read("in", 0).column("rid").to_pylist()
    consumer.committed("in", 0)
    log.close()
    # forking a process with other threads alive is how children inherit held locks
    assert threading.active_count() == 1, threading.enumerate()


def _child(argv: list[str], log: str) -> None:
    code = 1
    try:
        # A process group of its own: the parent kills a client with all it
        # started (the Spark writer's JVM and that JVM's planner) in one signal.
        os.setpgid(0, 0)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        clients.main(argv)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported on stderr, then the exit code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _say(line: str) -> None:
    os.write(1, (line + "\n").encode())


def _reap() -> int:
    """Report every client that ended; how many did."""
    reaped = 0
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        _say(f"EXIT {pid} {os.waitstatus_to_exitcode(status)}")
        reaped += 1


def main() -> None:
    _warm_up()
    live = 0
    stdin = sys.stdin.buffer
    buffered = b""
    while True:
        readable, _, _ = select.select([stdin], [], [], 0.02)
        live -= _reap()
        if not readable:
            continue
        chunk = os.read(stdin.fileno(), 65536)
        if not chunk:
            break
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            if not line.strip():
                continue
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                _child(request["argv"], request["log"])
            with contextlib.suppress(OSError):  # the child may have done it already
                os.setpgid(pid, pid)
            live += 1
            _say(f"PID {pid}")
    while live > 0:
        pid, status = os.waitpid(-1, 0)
        _say(f"EXIT {pid} {os.waitstatus_to_exitcode(status)}")
        live -= 1


if __name__ == "__main__":
    main()
