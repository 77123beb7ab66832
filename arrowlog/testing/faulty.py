"""A store that injects faults at random, drawn per request: lost replies,
failures before the store, 503s and latency (the soak's chaos and the
idempotence tests). For faults in a given order, use
:class:`~arrowlog.testing.scripted.ScriptedStore`."""

from __future__ import annotations

import collections
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from arrowlog.errors import InvalidConfigError, TransientStoreError
from arrowlog.storage import Blob, ObjectInfo, Store, read_start


@dataclass(frozen=True, kw_only=True)
class Faults:
    """Probabilities (0..1) of each fault, drawn per request.

    Attributes:
        lose_ack: a write is applied but its reply is lost (the caller sees a
            timeout and cannot tell whether it happened).
        fail_before: a request fails before reaching the store; to the caller it
            looks exactly like a lost reply (a write may or may not have happened).
        slowdown: the store refuses the request (503 SlowDown); nothing happened.
        latency: each request first sleeps a uniform time in ``[0, latency]`` s.
        seed: makes the fault sequence reproducible.
    """

    lose_ack: float = 0.0
    fail_before: float = 0.0
    slowdown: float = 0.0
    latency: float = 0.0
    seed: int | None = None

    def __post_init__(self) -> None:
        for name in ("lose_ack", "fail_before", "slowdown"):
            p = getattr(self, name)
            if not 0.0 <= p <= 1.0:
                raise InvalidConfigError(f"Faults.{name} must be in [0, 1], got {p}")
        if self.latency < 0:
            raise InvalidConfigError("Faults.latency must be >= 0")


class FaultyStore:
    """Injects :class:`Faults` into every request of ``inner``; ``injected``
    counts what it did, by fault name."""

    def __init__(self, inner: Store, faults: Faults) -> None:
        self.inner = inner
        self.faults = faults
        self.injected: collections.Counter[str] = collections.Counter()
        self._random = random.Random(faults.seed)
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def atomic_put_if_absent(self) -> bool:
        return self.inner.atomic_put_if_absent

    def _draw(self) -> float:
        with self._lock:
            return self._random.random()

    def _before(self, op: str, key: str, *, write: bool) -> None:
        f = self.faults
        if f.latency:
            time.sleep(self._draw() * f.latency)
        if self._draw() < f.slowdown:
            self.injected["slowdown"] += 1
            raise TransientStoreError(f"{op} {key}: injected 503 SlowDown", maybe_applied=False)
        if self._draw() < f.fail_before:
            self.injected["fail_before"] += 1
            raise TransientStoreError(f"{op} {key}: injected timeout", maybe_applied=write)

    def get(self, key: str) -> Blob:
        self._before("get", key, write=False)
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self._before("get_range", key, write=False)
        return self.inner.get_range(key, start, end)

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        self._before("get_range", key, write=False)
        return self.inner.get_range_tagged(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        self._before("head", key, write=False)
        return self.inner.head(key)

    def read_start(self, key: str, length: int) -> tuple[bytes, ObjectInfo, str | None]:
        self._before("get_range", key, write=False)  # one request, or the inner store's two
        return read_start(self.inner, key, length)

    def put_if_absent(self, key: str, data: Blob) -> None:
        self._before("put_if_absent", key, write=True)
        lose = self._draw() < self.faults.lose_ack
        try:
            self.inner.put_if_absent(key, data)
        except FileExistsError:
            if not lose:
                raise
        if lose:
            self.injected["lose_ack"] += 1
            raise TransientStoreError(
                f"put_if_absent {key}: injected lost reply", maybe_applied=True
            )

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        self._before("list", prefix, write=False)
        return self.inner.list(prefix, start_after=start_after, limit=limit)

    def delete(self, key: str) -> None:
        self._before("delete", key, write=True)
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()
