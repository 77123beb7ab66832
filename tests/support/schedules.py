"""What scheduled tests share: a one-column topic, short deadlines (a schedule
decides every outcome, never the clock), a call run in a background thread, what
a partition holds read committed or not, a wait for a write made in the
background, and a process SIGKILLed after its n-th write."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog import LogConfig, RetryPolicy
from arrowlog.storage import Store

SCHEMA = pa.schema([("v", pa.int64())])
# Short deadlines: a schedule decides every outcome, never the clock.
FAST = LogConfig(retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.01, deadline=0.3))
# A writer that never stages: its appends only move the end (or lose the race).
PLAIN = dataclasses.replace(FAST, staged_appends=False)
FOREVER = 10**9


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values)}, schema=SCHEMA)


class Background:
    """Runs a call in a thread; ``result()`` joins it and re-raises its error."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._out: list[object] = []
        self._err: list[BaseException] = []

        def run() -> None:
            try:
                self._out.append(call())
            except BaseException as e:  # noqa: BLE001 - re-raised by result()
                self._err.append(e)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def result(self, timeout: float = 30.0) -> object:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the scheduled call never finished"
        if self._err:
            raise self._err[0]
        return self._out[0]


def visible(
    reader: arrowlog.Consumer, topic: str = "t", partition: int = 0, start: int | None = None
) -> list[int]:
    """The records a read_committed reader sees in a partition."""
    column = reader.read(topic, partition, start=start).column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


def everything(log: arrowlog.ArrowLog, topic: str = "t", partition: int = 0) -> list[int]:
    """Every data record in the partition (read_uncommitted)."""
    column = log.partition(topic, partition).read().column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


def wait_until(condition: Callable[[], bool], what: str = "the awaited state",
               timeout: float = 10.0) -> None:  # fmt: skip
    """Wait for a state another thread reaches (a background write landed)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.002)


def landed(store: Store, key: str, timeout: float = 10.0) -> None:
    """Wait until ``key`` exists: a write a producer makes in the background
    (a transaction's markers follow its commit point) has landed."""

    def exists() -> bool:
        try:
            store.head(key)
        except FileNotFoundError:
            return False
        return True

    wait_until(exists, f"{key} landing", timeout)


def die_after_writes(store: Store, writes: int) -> None:
    """SIGKILL this process right after ``store``'s ``writes``-th PUT or DELETE
    has completed: a crash at a chosen step of whatever runs next."""
    done = [0]

    def counted(call: Callable[..., object]) -> Callable[..., object]:
        def run(*a: object, **k: object) -> object:
            out = call(*a, **k)
            done[0] += 1
            if done[0] >= writes:
                os.kill(os.getpid(), signal.SIGKILL)
            return out

        return run

    store.put_if_absent = counted(store.put_if_absent)  # type: ignore[method-assign,assignment]
    store.delete = counted(store.delete)  # type: ignore[method-assign,assignment]
