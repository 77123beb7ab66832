"""Injected time for tests: a store whose objects get their modification
times from a fake store clock, and :class:`Clocks`, which moves that clock and
this process's clocks together ("a day passes" in no time)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from arrowlog import _clock
from arrowlog.storage import Blob, ObjectInfo, Store


class ClockStore:
    """Wraps a store; every object written through it gets its modification time
    from ``now_ms`` (the fake store clock), reported by ``list`` and ``head``."""

    def __init__(self, inner: Store, start_ms: int = 1_800_000_000_000) -> None:
        self.inner = inner
        self.now_ms = start_ms
        self._times: dict[str, int] = {}
        self._lock = threading.Lock()
        self.writes: list[tuple[str, str]] = []  # (op, key) of every PUT and DELETE

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def atomic_put_if_absent(self) -> bool:
        return self.inner.atomic_put_if_absent

    def advance(self, ms: int) -> None:
        self.now_ms += ms

    def _info(self, info: ObjectInfo) -> ObjectInfo:
        with self._lock:
            t = self._times.get(info.key, info.modified_ms)
        return ObjectInfo(info.key, info.size, t)

    def get(self, key: str) -> Blob:
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner.get_range(key, start, end)

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        return self.inner.get_range_tagged(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        return self._info(self.inner.head(key))

    def put_if_absent(self, key: str, data: Blob) -> None:
        self.writes.append(("put", key))
        now = self.now_ms
        self.inner.put_if_absent(key, data)
        with self._lock:
            self._times[key] = now

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        return iter(
            [self._info(i) for i in self.inner.list(prefix, start_after=start_after, limit=limit)]
        )

    def delete(self, key: str) -> None:
        self.writes.append(("delete", key))
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()


class Clocks:
    """Moves the fake store clock and this process's clocks (``time.time``,
    ``time.monotonic``) forward together: "this much time passes" for every
    client, writer rules (elapsed time) and vacuum (store time) alike."""

    def __init__(self, store: ClockStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.store = store
        self.offset = 0.0
        self.skew = 0.0  # this process's wall clock only (a writer's skewed clock)
        real_time, real_mono, real_elapsed = time.time, time.monotonic, _clock.elapsed
        monkeypatch.setattr(time, "time", lambda: real_time() + self.offset + self.skew)
        monkeypatch.setattr(time, "monotonic", lambda: real_mono() + self.offset)
        monkeypatch.setattr(_clock, "elapsed", lambda: real_elapsed() + self.offset)

    def advance(self, ms: int) -> None:
        self.offset += ms / 1000
        self.store.advance(ms)
