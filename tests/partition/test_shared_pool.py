"""Reads sharing the process's fetch pool (arrowlog/_threads.py): schedules
where the pool is full, reads nested and many at once, interrupts, forks and
interpreter exits, each bounded in time."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import arrowlog
from arrowlog import TopicConfig, _threads
from arrowlog.format.topic import segment_key
from arrowlog.partition import prefetch
from arrowlog.storage import Blob, Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, SCHEMA, Background, rows

WAIT = 10.0


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A pool of its own, of two threads, for the test: as full as 64 are
    with eight reads of eight segments ahead."""
    monkeypatch.setattr(_threads, "POOL_THREADS", 2)
    monkeypatch.setattr(_threads, "_pool", None)
    yield
    pool = _threads._pool
    if pool is not None:
        pool.executor.shutdown(wait=False)  # a deadlocked test leaves its threads


def _wait_for(condition: object, what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.001)


def test_a_listing_under_the_lock_is_not_held_up_by_fetches_waiting_for_that_lock(
    store: Store, small_pool: None
) -> None:
    """A stream (two segments ahead: the whole pool) is held at the GETs of
    segments 0 and 1; vacuum removes them (records deleted below 2); another
    thread of the same client lists the partition, under its lock, and waits
    for the heads of two new segments, queued behind the stream's fetches.
    Released, the fetches find their segments gone and learn the log start:
    under the partition's lock, held by the listing that waits for them."""
    config = TopicConfig(checkpoint_interval=2, delete_delay_ms=100)
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=config)
    for v in range(4):
        log.append("t", rows(v))
    scripted = ScriptedStore(store)
    reader = arrowlog.connect(scripted, config=dataclasses.replace(FAST, read_ahead=2))
    part = reader.partition("t", 0)
    assert part.end_offset() == 4
    # three held: the stream's own thread fetches segment 0 itself when no
    # thread of the pool has taken it by the time it waits for it
    gates = [scripted.hold("get", segment_key("t", 0, b)) for b in (0, 1, 2)]
    stream = Background(lambda: [b["v"].to_pylist() for b in part.iter_batches(0, 4)])
    _wait_for(  # both threads of the pool are the stream's
        lambda: sum(n.startswith("arrowlog-fetch") for g in gates for n in g.threads) == 2,
        "the pool held",
    )
    try:
        log.delete_records("t", 0, 2)
        time.sleep(2.2)  # the delay, and its margin for clock skew
        removed = {r.key for r in log.maintenance.vacuum()}
        assert segment_key("t", 0, 0) in removed
        log.append("t", rows(4))
        log.append("t", rows(5))
        listing = Background(lambda: part.end_offset())
        _wait_for(lambda: _threads._pool is not None and _threads._pool.queued > 0, "queued")
    finally:
        for gate in gates:
            gate.release()
    assert listing.result(WAIT) == 6
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        stream.result(WAIT)


_INTERRUPTED_LISTING = """
import os
import signal
import sys
import threading
import time

import arrowlog
from arrowlog import TopicConfig
from arrowlog.format.topic import segment_key
from arrowlog.partition import prefetch
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, SCHEMA, rows

store = MemoryStore()
log = arrowlog.connect(store, config=FAST)
log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
for v in range(6):
    log.append("t", rows(v))
held = segment_key("t", 0, 0)
reached, release = threading.Event(), threading.Event()


class Holding(ScriptedStore):
    def get(self, key):
        if key == held and not reached.is_set():
            reached.set()
            release.wait(20)
            raise FileNotFoundError(key)  # removed meanwhile
        return super().get(key)


main = threading.get_ident()
ended = threading.Event()


def interrupt():
    reached.wait(20)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:  # until the reader waits for segment 0's head
        frame = sys._current_frames()[main]
        if frame.f_code.co_name == "wait" and frame.f_back.f_code.co_name == "result":
            break
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGINT)
    ended.wait(2)  # the read ends, or waits for what it started
    release.set()


threading.Thread(target=interrupt, daemon=True).start()
try:
    arrowlog.connect(Holding(store), config=FAST).read("t", 0)
except KeyboardInterrupt:
    print("interrupted")
ended.set()
release.wait(20)
time.sleep(0.5)  # the held GET's thread ends
print(prefetch.BUDGET.held)
"""


def test_an_interrupt_while_the_listing_waits_for_a_head_gives_the_budget_back() -> None:
    """A new client's read lists six segments; its listing fetches them whole
    (the budget reserved for each) and waits for segment 0, held at its GET;
    a KeyboardInterrupt reaches the reader there. The read must end holding
    nothing, whatever the held GET does afterwards (here: finds it gone)."""
    run = subprocess.run(
        [sys.executable, "-c", _INTERRUPTED_LISTING],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["interrupted", "0"]


class NestingStore(ScriptedStore):
    """Whole GETs of segment 3 of partition 0 run a read of partition 1 (a read
    started inside a fetch task, on a thread of the pool or the reader's)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.nested: arrowlog.ArrowLog | None = None
        self.seen: list[list[Any]] = []

    def get(self, key: str) -> Blob:
        if key == segment_key("t", 0, 3) and self.nested is not None:
            self.seen.append(self.nested.read("t", 1)["v"].to_pylist())
        return super().get(key)


def test_reads_wanting_more_threads_than_the_pool_has_nested_and_streams_are_each_right() -> None:
    """80 threads at once, each 8 segments ahead (640 threads wanted of 64):
    table reads of new clients and of one shared client, streams that read
    another partition inside their loop, and fetches that read another
    partition inside their task. Every read returns its partition whole, in
    order; the budget comes back; the pool never grows past its threads."""
    memory_store = MemoryStore()
    log = arrowlog.connect(memory_store, config=FAST)
    log.create_topic("t", SCHEMA, 2, config=TopicConfig(checkpoint_interval=900))
    for v in range(12):
        log.append("t", rows(v), partition=0)
        log.append("t", rows(100 + v), partition=1)
    every = {0: list(range(12)), 1: [100 + v for v in range(12)]}
    ahead = dataclasses.replace(FAST, read_ahead=8)
    nesting = NestingStore(memory_store)
    nesting.nested = arrowlog.connect(memory_store, config=ahead)
    shared = arrowlog.connect(nesting, config=ahead)
    barrier = threading.Barrier(80, timeout=WAIT)

    def run(i: int) -> object:
        barrier.wait()
        kind, p = i % 4, i // 4 % 2
        if kind == 0:  # a new client's table read: its listing fetches whole
            return arrowlog.connect(memory_store, config=ahead).read("t", p)["v"].to_pylist()
        if kind == 1:  # one client shared: partition 0's fetches nest reads
            return shared.read("t", p)["v"].to_pylist()
        consumer = arrowlog.connect(memory_store, config=ahead).consumer(
            isolation_level="read_uncommitted" if kind == 2 else "read_committed"
        )
        got: list[Any] = []
        for batch in consumer.iter_batches("t", 0):
            got += batch["v"].to_pylist()
            if len(got) == 6:  # a read inside the stream's loop
                assert consumer.read("t", 1)["v"].to_pylist() == every[1]
        return got

    runs = [Background(functools.partial(run, i)) for i in range(80)]
    for i, r in enumerate(runs):
        expected = every[i // 4 % 2] if i % 4 < 2 else every[0]
        assert r.result(60) == expected, i
    assert nesting.seen and all(s == every[1] for s in nesting.seen)
    assert prefetch.BUDGET.held == 0
    fetchers = [t for t in threading.enumerate() if t.name.startswith("arrowlog-fetch")]
    assert len(fetchers) <= _threads.POOL_THREADS


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_a_read_is_under_way_has_the_whole_budget_and_reads_right() -> None:
    """A thread's read is held at a whole GET of its listing (segments kept,
    bytes reserved) when the process forks. In the child that thread is not
    there to give them back: the child's reads must not go without them."""
    store = MemoryStore()
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
    for v in range(6):
        log.append("t", rows(v))
    scripted = ScriptedStore(store)
    gate = scripted.hold("get", segment_key("t", 0, 3))
    run = Background(lambda: arrowlog.connect(scripted, config=FAST).read("t", 0))
    try:
        gate.wait_reached()
        _wait_for(lambda: prefetch.BUDGET.held >= 5 * 1000, "the other segments kept")
        pid = os.fork()
        if pid == 0:  # the child: exit 0 only if it holds nothing and reads right
            code = 1
            try:
                before = prefetch.BUDGET.held
                ahead = dataclasses.replace(FAST, read_ahead=4)
                got = arrowlog.connect(store, config=ahead).read("t", 0)["v"].to_pylist()
                after = prefetch.BUDGET.held
                code = 0 if (before, got, after) == (0, list(range(6)), 0) else 2
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    finally:
        gate.release()
    assert os.waitstatus_to_exitcode(status) == 0
    assert isinstance(run.result(), object)
    assert prefetch.BUDGET.held == 0
