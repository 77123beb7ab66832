"""The process's fetch pool and the lanes reads run on it (arrowlog._threads)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import CancelledError, Future
from pathlib import Path

import pytest

from arrowlog import _threads
from arrowlog._threads import Lane

ROOT = Path(__file__).resolve().parents[1]

WAIT = 10  # seconds: a generous bound on what takes milliseconds


@pytest.fixture
def small_pool(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A pool of its own, of two threads, for the test."""
    monkeypatch.setattr(_threads, "POOL_THREADS", 2)
    monkeypatch.setattr(_threads, "_pool", None)
    yield
    pool = _threads._pool
    if pool is not None:
        pool.executor.shutdown(wait=True)


def test_a_lane_runs_no_more_tasks_at_once_than_its_width() -> None:
    lane = Lane(3)
    lock = threading.Lock()
    running = 0
    most = 0
    release = threading.Event()

    def task() -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        release.wait(WAIT)
        with lock:
            running -= 1

    futures = [lane.submit(task) for _ in range(10)]
    deadline = time.monotonic() + WAIT
    while most < 3 and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(0.05)  # time for a fourth to start, if the width let it
    assert most == 3
    release.set()
    for f in futures:
        f.result(WAIT)
    assert most == 3


def test_a_lane_of_width_one_runs_its_tasks_in_the_order_submitted() -> None:
    lane = Lane(1)
    order: list[int] = []
    futures = [lane.submit(order.append, i) for i in range(50)]
    for f in futures:
        f.result(WAIT)
    assert order == list(range(50))


def test_a_task_cancelled_before_it_starts_never_runs() -> None:
    lane = Lane(1)
    started = threading.Event()
    release = threading.Event()
    ran: list[str] = []

    def first() -> None:
        started.set()
        release.wait(WAIT)

    blocker = lane.submit(first)
    assert started.wait(WAIT)
    later = lane.submit(ran.append, "later")
    assert later.cancel()
    release.set()
    blocker.result(WAIT)
    lane.submit(ran.append, "after").result(WAIT)
    assert ran == ["after"]
    with pytest.raises(CancelledError):
        later.result()


def test_an_error_in_a_task_reaches_its_future_and_the_lane_goes_on() -> None:
    lane = Lane(2)

    def fail() -> None:
        raise KeyError("gone")

    failed = lane.submit(fail)
    with pytest.raises(KeyError, match="gone"):
        failed.result(WAIT)
    assert lane.submit(lambda: 7).result(WAIT) == 7


def test_a_task_on_the_pool_that_waits_for_a_lane_runs_it_itself(small_pool: None) -> None:
    """Both threads of the pool wait for tasks of another lane: queued behind
    them, those would never start."""
    inner = Lane(1)
    both = threading.Barrier(2, timeout=WAIT)

    def outer_task() -> str:
        both.wait()  # both pool threads are taken by these
        nested: Future[str] = inner.submit(lambda: threading.current_thread().name)
        return nested.result(WAIT)

    outer = Lane(2)
    futures = [outer.submit(outer_task) for _ in range(2)]
    names = [f.result(WAIT) for f in futures]
    assert all(name.startswith("arrowlog-fetch") for name in names)


def test_a_busy_lane_gives_its_thread_to_a_lane_that_waits(small_pool: None) -> None:
    """Two threads, both taken by lane A, whose read keeps queueing: lane B's
    task starts after A's next task, not after all of A's."""
    a, b = Lane(2), Lane(1)
    gates = [threading.Event() for _ in range(20)]
    started: list[str] = []
    lock = threading.Lock()

    def a_task(i: int) -> None:
        with lock:
            started.append(f"a{i}")
        gates[i].wait(WAIT)

    a_futures = [a.submit(a_task, i) for i in range(20)]
    deadline = time.monotonic() + WAIT
    while len(started) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    b_future = b.submit(lambda: started.append("b"))
    for i in range(20):  # A's tasks end one by one
        gates[i].set()
        a_futures[i].result(WAIT)
        if b_future.done():
            break
    b_future.result(WAIT)
    assert started.index("b") <= 4, started
    for gate in gates:
        gate.set()
    for f in a_futures:
        f.result(WAIT)


def test_a_thread_queued_on_a_pool_since_replaced_counts_off_its_own_pool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lane's thread queued on a full pool starts after the process has a
    new pool (a forked child's, a test's own): the new pool's count of
    waiting threads is not its to lower (a count below zero tells lanes
    nobody waits, and a busy lane keeps its thread)."""
    monkeypatch.setattr(_threads, "POOL_THREADS", 1)
    monkeypatch.setattr(_threads, "_pool", None)
    release = threading.Event()
    held = Lane(1).submit(release.wait, WAIT)  # the one thread
    queued = Lane(1).submit(lambda: None)  # its thread waits to start
    old = _threads._pool
    assert old is not None and old.queued == 1
    monkeypatch.setattr(_threads, "_pool", None)
    started_new, release_new = threading.Event(), threading.Event()

    def new_task() -> None:
        started_new.set()
        release_new.wait(WAIT)

    new_held = Lane(1).submit(new_task)
    new = _threads._pool
    assert new is not None and new is not old
    assert started_new.wait(WAIT)  # the new pool's thread took it: none waits there
    release.set()
    held.result(WAIT)
    queued.result(WAIT)  # run by this thread, if the old pool's had not taken it yet
    old.executor.shutdown(wait=True)  # the queued thread has started by then
    assert old.queued == 0
    assert new.queued == 0
    release_new.set()
    new_held.result(WAIT)
    new.executor.shutdown(wait=True)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_runs_lanes_on_threads_of_its_own() -> None:
    """The parent's pool has threads; the child's copy of it has none, and its
    reads must not wait on them."""
    Lane(2).submit(lambda: None).result(WAIT)  # the parent's pool has started
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if a lane's task ran
        code = 1
        try:
            code = 0 if Lane(2).submit(lambda: 5).result(WAIT) == 5 else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_lane_is_at_least_one_wide() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Lane(0)


def test_a_thread_waiting_for_its_task_is_not_held_up_by_a_full_pool_waiting_for_it(
    small_pool: None,
) -> None:
    """A reader holds a lock (a partition's, while it lists) and waits for a
    task of its lane; every thread of the pool runs a task of another lane
    that waits for that lock (a fetch that found its segment gone learns the
    log start under it). Queued behind them, the reader's task would never
    start: the reader runs it itself."""
    held = threading.Lock()
    both = threading.Barrier(3, timeout=WAIT)

    def blocked() -> None:
        both.wait()
        with held:  # taken by the reader until its task is done
            pass

    with held:
        others = [Lane(2).submit(blocked) for _ in range(2)]
        both.wait()  # both threads of the pool are taken
        mine = Lane(1).submit(lambda: "mine")
        assert mine.result(WAIT) == "mine"
    for f in others:
        f.result(WAIT)


_EXIT_WITH_A_READER = """
import concurrent.futures.thread as cft
import threading
import time

from arrowlog import _threads
from arrowlog._threads import Lane

_threads.POOL_THREADS = 2
first, other = threading.Event(), threading.Event()
a = Lane(1)


def reader():  # a thread the interpreter waits for, reading as it exits
    a.submit(first.wait, 20)
    print(a.submit(lambda: "second").result(), flush=True)


threading.Thread(target=reader).start()
Lane(1).submit(other.wait, 20)  # the pool's other thread
while _threads._pool.queued:
    time.sleep(0.001)
Lane(1).submit(lambda: None)  # a lane waits for a thread: a's thread will give its place


def at_exit():
    while not cft._shutdown:  # the pool takes no more work
        time.sleep(0.001)
    first.set()  # a's thread ends its task, and would queue behind the waiting lane
    while a._threads and not a._queued:
        time.sleep(0.001)
    other.set()


threading.Thread(target=at_exit, daemon=True).start()
"""


def test_an_interpreter_exiting_while_a_thread_reads_does_not_hang() -> None:
    """The interpreter stops the pool before it waits for the threads still
    running; a lane's thread that gives its place to a waiting lane then
    cannot queue again: the reader must not wait forever for its next task."""
    run = _python(_EXIT_WITH_A_READER, timeout=30)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "second"


_EXIT_WITH_A_DAEMON_STREAM = """
import atexit
import dataclasses
import sys
import threading
import time

import arrowlog
from arrowlog import TopicConfig
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, SCHEMA, rows

store = MemoryStore()
log = arrowlog.connect(store, config=FAST)
log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=900))
for v in range(300):
    log.append("t", rows(v))


class Slow(ScriptedStore):
    def get(self, key):
        time.sleep(0.02)
        return super().get(key)


ahead = dataclasses.replace(FAST, read_ahead=2)
part = arrowlog.connect(Slow(store), config=ahead).partition("t", 0)
part.end_offset()
read = [0]
begun = threading.Event()


def stream():
    for _ in part.iter_batches(0, 300):
        read[0] += 1
        begun.set()


threading.Thread(target=stream, daemon=True).start()
begun.wait(20)
at = [0]
atexit.register(lambda: print(read[0] - at[0]))  # after the interpreter waited for threads
at[0] = read[0]
"""


def test_an_interpreter_exiting_does_not_wait_for_a_daemon_threads_stream() -> None:
    """A daemon thread streams 300 segments (20 ms each, two at once) when the
    main thread returns: the exit waits for the fetches under way, not for
    the rest of the stream (before the shared pool: the stream's next fetch
    raised; with it, a lane's thread went on with the stream's tasks)."""
    run = _python(_EXIT_WITH_A_DAEMON_STREAM, timeout=60)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout.split()[-1]) < 50, "batches read while the interpreter exited"


def _python(script: str, *, timeout: float) -> subprocess.CompletedProcess[str]:
    """``script`` run by a new interpreter that imports this checkout."""
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
