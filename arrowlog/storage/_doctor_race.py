"""The doctor's race: several OS processes put-if-absent the same keys at once
(:func:`race`), each process this module run as ``python -m
arrowlog.storage._doctor_race``.

A child receives the store pickled on its stdin (every store pickles and
reconnects on the other side: :class:`arrowlog.storage.Store`), says it is
ready, waits for ``go`` and puts each key in turn, so that all of them contend
for each key at about the same moment; it prints the keys it won. The parent
starts nobody racing before every child has its client open: the race is
between requests, not between interpreters starting.

A store that lives in one process (``memory://``: an unpickled copy is a store
of its own) cannot be raced by processes: a copy unpickled here that does not
see an object written after pickling tells, and the race then runs in threads,
the only concurrency such a store has; so does a store that does not pickle
(the protocol asks every store to).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from arrowlog.errors import ArrowLogError
from arrowlog.storage import Store

__all__ = ["RaceOutcome", "contended", "race", "writer_of"]

_GO = "go"


@dataclass
class RaceOutcome:
    """What the racers said: who was told it won each key, the puts that
    failed (key -> messages) and when each put was in flight (key -> spans of
    ``time.monotonic_ns()``, one clock for every process of this machine).
    ``not_started`` says why the race could not run."""

    mode: str  # "processes" or "threads"
    writers: int
    winners: dict[str, list[int]] = field(default_factory=dict)
    errors: dict[str, list[str]] = field(default_factory=dict)
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    not_started: str | None = None
    #: why threads raced, not processes
    why_threads: str = ""


def payload(writer: int) -> bytes:
    """What writer ``writer`` puts: its name, so the parent can tell whose
    object stayed."""
    return f"writer-{writer}".encode()


def writer_of(data: bytes) -> int | None:
    """The writer whose :func:`payload` ``data`` is (None: nobody's)."""
    text = data.decode("ascii", "replace")
    number = text.removeprefix("writer-")
    return int(number) if number != text and number.isdigit() else None


def race(
    store: Store, keys: Sequence[str], *, writers: int, shared_probe: str, timeout_s: float
) -> RaceOutcome:
    """Race ``writers`` OS processes for each of ``keys`` (threads, for a store
    other processes cannot open). ``shared_probe`` is a key this writes to learn
    whether the children share the store; the caller removes it (and the keys).
    """
    try:
        copy: Store = pickle.loads(pickle.dumps(store))
    except (TypeError, AttributeError, pickle.PicklingError) as e:
        return _race_in_threads(store, keys, writers, f"the store does not pickle: {e}")
    store.put_if_absent(shared_probe, b"")  # after pickling: a store of its own misses it
    try:
        copy.head(shared_probe)
    except FileNotFoundError:
        return _race_in_threads(store, keys, writers, "the store lives in this process")
    children = _Children(writers)
    try:
        not_started = children.start([_encode(store, keys, w) for w in range(writers)], timeout_s)
        if not_started is not None:
            return RaceOutcome("processes", writers, not_started=not_started)
        children.tell(_GO)
        return children.results(timeout_s)
    finally:
        children.close()


def _encode(store: Store, keys: Sequence[str], writer: int) -> bytes:
    return base64.b64encode(pickle.dumps((store, list(keys), writer))) + b"\n"


def _race_in_threads(store: Store, keys: Sequence[str], writers: int, why: str) -> RaceOutcome:
    outcome = RaceOutcome("threads", writers, why_threads=why)
    barrier = threading.Barrier(writers)
    lock = threading.Lock()

    def run(writer: int) -> None:
        barrier.wait()
        won, errors, spans = _put_all(store, keys, writer)
        with lock:
            _merge(outcome, writer, won, errors, spans)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcome


Spans = dict[str, tuple[int, int]]


def _put_all(
    store: Store, keys: Sequence[str], writer: int
) -> tuple[list[str], dict[str, str], Spans]:
    won: list[str] = []
    errors: dict[str, str] = {}
    spans: Spans = {}
    for key in keys:
        start = time.monotonic_ns()
        try:
            store.put_if_absent(key, payload(writer))
            won.append(key)
        except FileExistsError:
            pass
        except (ArrowLogError, OSError) as e:
            errors[key] = " ".join(f"{type(e).__name__}: {e}".split())
        spans[key] = (start, time.monotonic_ns())
    return won, errors, spans


def _merge(
    outcome: RaceOutcome, writer: int, won: list[str], errors: dict[str, str], spans: Spans
) -> None:
    for key in won:
        outcome.winners.setdefault(key, []).append(writer)
    for key, message in errors.items():
        outcome.errors.setdefault(key, []).append(f"writer {writer}: {message}")
    for key, (start, end) in spans.items():
        outcome.spans.setdefault(key, []).append((int(start), int(end)))


def contended(outcome: RaceOutcome) -> int:
    """How many keys had two racers' puts in flight at the same time: only
    those tested the store's condition (racers that took turns did not)."""
    count = 0
    for spans in outcome.spans.values():
        ends = -1
        for start, end in sorted(spans):
            if start < ends:
                count += 1
                break
            ends = max(ends, end)
    return count


class _Children:
    """The racing processes, each read by a thread of its own (a child that
    hangs must not hang the doctor: every wait has a deadline)."""

    def __init__(self, count: int) -> None:
        self._count = count
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lines: queue.Queue[tuple[int, str | None]] = queue.Queue()

    def start(self, messages: list[bytes], timeout_s: float) -> str | None:
        """Start the children and hand each its message; wait until each has
        its client open. Why they could not start, if they could not."""
        env = dict(os.environ)
        # the children import this very arrowlog, wherever it was imported from
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        for writer, message in enumerate(messages):
            proc = subprocess.Popen(
                [sys.executable, "-m", "arrowlog.storage._doctor_race"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
            self._procs.append(proc)
            threading.Thread(target=self._read, args=(writer, proc), daemon=True).start()
            assert proc.stdin is not None
            proc.stdin.write(message)
            proc.stdin.flush()
        for _ in range(self._count):
            got = self._next(timeout_s, done=set())
            if isinstance(got, str):
                return f"the racing processes did not start: {got}"
        return None

    def tell(self, word: str) -> None:
        for proc in self._procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{word}\n".encode())
            proc.stdin.flush()

    def results(self, timeout_s: float) -> RaceOutcome:
        outcome = RaceOutcome("processes", self._count)
        reported: set[int] = set()
        while len(reported) < self._count:
            got = self._next(timeout_s, done=reported)
            if isinstance(got, str):
                return RaceOutcome("processes", self._count, not_started=f"a racer failed: {got}")
            writer, line = got
            told = json.loads(line)
            spans = {key: (span[0], span[1]) for key, span in dict(told["spans"]).items()}
            _merge(outcome, writer, list(told["won"]), dict(told["errors"]), spans)
            reported.add(writer)
        return outcome

    def _read(self, writer: int, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            self._lines.put((writer, raw.decode().strip()))
        self._lines.put((writer, None))

    def _next(self, timeout_s: float, *, done: set[int]) -> tuple[int, str] | str:
        """The next line a child printed (the end of a child in ``done``, which
        said all it had to, skipped), or why there is none."""
        while True:
            try:
                writer, line = self._lines.get(timeout=timeout_s)
            except queue.Empty:
                return f"no answer within {timeout_s:g} s"
            if line is not None:
                return writer, line
            if writer in done:
                continue
            proc = self._procs[writer]
            proc.wait()
            assert proc.stderr is not None
            lines = proc.stderr.read().decode(errors="replace").strip().splitlines()
            return f"exit code {proc.returncode}: {lines[-1] if lines else 'no message'}"

    def close(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()


def _child() -> None:
    store, keys, writer = pickle.loads(base64.b64decode(sys.stdin.buffer.readline()))
    next(iter(store.list(keys[0], limit=1)), None)  # the client open, connected
    print("ready", flush=True)
    if sys.stdin.readline().strip() != _GO:
        return
    won, errors, spans = _put_all(store, keys, writer)
    print(json.dumps({"won": won, "errors": errors, "spans": spans}), flush=True)


if __name__ == "__main__":
    _child()
