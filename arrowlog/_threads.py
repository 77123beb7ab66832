"""The threads that fetch for reads, kept for the life of the process.

A read used to start its own threads and stop them at its end. Starting eight
threads costs more than it looks: on SeaweedFS, reads of 64 x 1 MiB and
400 x 64 KiB segments took about 9% longer with threads of their own than
with threads already running. So every read's fetches run on one pool, each
read in a :class:`Lane` of its own width: it never has more fetches running
at once than it asks for, however many reads share the pool.

A task that runs on the pool and waits for a task of a lane would deadlock
once every thread of the pool did so; :meth:`Lane.submit` runs the task in
the calling thread instead when that thread is one of the pool's.
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


def _queue(work: Callable[[], None]) -> None:
    """``work`` to start on a thread of the pool."""
    global _pool
    with _lock:
        if _pool is None:
            _pool = _Pool()
        _pool.queued += 1
        executor = _pool.executor
    executor.submit(work)


def _started() -> None:
    with _lock:
        if _pool is not None:
            _pool.queued -= 1


class Lane:
    """Tasks of one read on the pool, at most ``width`` running at once,
    started in the order submitted. Its futures can be cancelled until they
    start."""

    def __init__(self, width: int) -> None:
        if width < 1:
            raise ValueError(f"a lane is at least 1 wide, not {width}")
        self._width = width
        self._lock = threading.Lock()
        self._waiting: collections.deque[tuple[Future[object], Callable[[], object]]] = (
            collections.deque()
        )
        self._threads = 0  # of the pool, working through ``_waiting`` or about to
        self._queued = 0  # of those, not yet started

    def submit(self, fn: Callable[..., _T], *args: object) -> Future[_T]:
        future: Future[_T] = Future()
        call = functools.partial(fn, *args)
        if getattr(_local, "in_pool", False):
            _run(future, call)  # see the module's docstring
            return future
        with self._lock:
            self._waiting.append((future, call))  # type: ignore[arg-type]
            start = self._threads < self._width
            if start:
                self._threads += 1
        if start:
            self._start()
        return future

    def _start(self) -> None:
        with self._lock:
            self._queued += 1
        _queue(self._work)

    def _work(self) -> None:
        """One of the lane's threads: its tasks in order, until none waits;
        after each, if another lane waits for a thread, it queues behind it (a
        lane whose read keeps it busy never keeps the others waiting)."""
        _started()
        with self._lock:
            self._queued -= 1
        while True:
            with self._lock:
                if not self._waiting:
                    self._threads -= 1
                    return
                future, call = self._waiting.popleft()
            _run(future, call)
            if self._others_wait():
                self._start()
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
