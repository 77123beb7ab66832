"""The threads that fetch for reads, kept for the life of the process.

A read used to start its own threads and stop them at its end. Starting eight
threads costs more than it looks: on SeaweedFS, reads of 64 x 1 MiB and
400 x 64 KiB segments took about 9% longer with threads of their own than
with threads already running. So every read's fetches run on one pool, each
read in a :class:`Lane` of its own width: it never has more fetches running
at once than it asks for, however many reads share the pool.

A task that runs on the pool and waits for a task of a lane would deadlock
once every thread of the pool did so; :meth:`Lane.submit` runs the task in
the calling thread instead when that thread is one of the pool's. A thread
that is not the pool's and waits for a task not started yet (its result)
runs it itself: the pool may be full of tasks that wait for it (for a lock
it holds, a partition's while it lists), or gone (the interpreter exiting).
"""

from __future__ import annotations

import collections
import functools
import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

_T = TypeVar("_T")

#: threads at most: past that, lanes wait for one to be free (a lane's
#: thread gives its place to a waiting lane after each task)
POOL_THREADS = 64


class _Pool:
    """The process's pool, and how many lanes' threads wait to start in it."""

    def __init__(self) -> None:
        self.executor = ThreadPoolExecutor(
            POOL_THREADS, thread_name_prefix="arrowlog-fetch", initializer=_mark
        )
        self.queued = 0


_pool: _Pool | None = None
_lock = threading.Lock()  # guards _pool and its ``queued``
_local = threading.local()


def _mark() -> None:
    _local.in_pool = True


def _forget() -> None:
    """In a forked child: the parent's threads are not there (and the lock
    may have been held by one of them)."""
    global _pool, _lock
    _pool = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget)

_exiting = False  # the interpreter is exiting: the pool's threads take no more tasks


def _at_exit() -> None:
    """Before the interpreter waits for the pool's threads: a lane's thread
    would otherwise go on with the tasks a daemon thread's read keeps
    submitting (a stream), and the exit wait for the whole read; the read's
    own thread runs them now (see :meth:`_Task.result`)."""
    global _exiting
    _exiting = True


threading._register_atexit(_at_exit)  # type: ignore[attr-defined]  # as concurrent.futures


def _queue(work: Callable[[], None]) -> None:
    """``work`` to start on a thread of the pool.

    Raises:
        RuntimeError: the interpreter is exiting (the pool takes no more work).
    """
    global _pool
    with _lock:
        if _pool is None:
            _pool = _Pool()
        _pool.queued += 1
        pool = _pool
    try:
        pool.executor.submit(_started, pool, work)
    except BaseException:
        with _lock:
            pool.queued -= 1
        raise


def _started(pool: _Pool, work: Callable[[], None]) -> None:
    # counted off the pool it was queued on: after a fork, or a test's own
    # pool, the process's pool may be another by the time a thread takes it
    with _lock:
        pool.queued -= 1
    work()


class _Task(Future[_T]):
    """A lane's future: waiting for its result runs the task in the waiting
    thread if no thread of the pool has started it (see the module's docstring)."""

    def __init__(self, lane: Lane, call: Callable[[], _T]) -> None:
        super().__init__()
        self._lane = lane
        self.call: Callable[[], _T] | None = call  # None once a thread took it

    def result(self, timeout: float | None = None) -> _T:
        self._lane._run_here(self)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        self._lane._run_here(self)
        return super().exception(timeout)


class Lane:
    """Tasks of one read on the pool, at most ``width`` running at once,
    started in the order submitted. Its futures can be cancelled until they
    start."""

    def __init__(self, width: int) -> None:
        if width < 1:
            raise ValueError(f"a lane is at least 1 wide, not {width}")
        self._width = width
        self._lock = threading.Lock()
        self._waiting: collections.deque[_Task[object]] = collections.deque()
        self._threads = 0  # of the pool, working through ``_waiting`` or about to
        self._queued = 0  # of those, not yet started

    def submit(self, fn: Callable[..., _T], *args: object) -> Future[_T]:
        future: _Task[_T] = _Task(self, functools.partial(fn, *args))
        if getattr(_local, "in_pool", False):
            self._run_here(future)  # see the module's docstring
            return future
        with self._lock:
            self._waiting.append(future)  # type: ignore[arg-type]
            start = self._threads < self._width
            if start:
                self._threads += 1
        if start:
            try:
                self._start()
            except RuntimeError:
                with self._lock:
                    self._threads -= 1
                # no thread will start (the interpreter exits): the waiter runs it
        return future

    def _take(self, future: _Task[_T]) -> Callable[[], _T] | None:
        with self._lock:
            call, future.call = future.call, None
        return call

    def _run_here(self, future: _Task[_T]) -> None:
        """``future``'s task, in this thread, unless a thread has taken it."""
        call = self._take(future)
        if call is not None:
            _run(future, call)

    def _start(self) -> None:
        with self._lock:
            self._queued += 1
        try:
            _queue(self._work)
        except BaseException:
            with self._lock:
                self._queued -= 1
            raise

    def _work(self) -> None:
        """One of the lane's threads: its tasks in order, until none waits;
        after each, if another lane waits for a thread, it queues behind it (a
        lane whose read keeps it busy never keeps the others waiting)."""
        with self._lock:
            self._queued -= 1
        while True:
            with self._lock:
                call = None
                while self._waiting and call is None and not _exiting:
                    future = self._waiting.popleft()
                    call, future.call = future.call, None  # None: run by its waiter
                if call is None:
                    self._threads -= 1
                    return
            _run(future, call)
            if self._others_wait():
                try:
                    self._start()
                except RuntimeError:
                    continue  # the pool takes no more work: this thread goes on
                return

    def _others_wait(self) -> bool:
        pool = _pool
        with self._lock:
            return pool is not None and pool.queued > self._queued


def _run(future: Future[_T], call: Callable[[], _T]) -> None:
    if not future.set_running_or_notify_cancel():
        return  # cancelled before it started
    try:
        result = call()
    except BaseException as e:  # noqa: BLE001 (as concurrent.futures, every error is handed over)
        future.set_exception(e)
    else:
        future.set_result(result)
