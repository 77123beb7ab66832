"""Stores that wrap another store: request counting (``--debug`` on the command
line, and tests that pin down the cost of each operation). The fault-injecting
wrappers are test tools and live in :mod:`arrowlog.testing`."""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator

from arrowlog.storage import Blob, ObjectInfo, Store, read_start


class CountingStore:
    """Counts requests to ``inner`` by operation. A ``list`` call counts once per
    call: every listing arrowlog makes on its hot paths fits in one page."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.counts: collections.Counter[str] = collections.Counter()
        #: the requests the thread that last called :meth:`reset` made itself
        #: (a caller's critical path, without work handed to other threads)
        self.caller_counts: collections.Counter[str] = collections.Counter()
        #: bytes received, by operation (``get`` and ``get_range``)
        self.bytes_read: collections.Counter[str] = collections.Counter()
        #: the keys read (``get`` and ``get_range``), with how often
        self.keys_read: collections.Counter[str] = collections.Counter()
        #: objects the listings returned (S3 returns at most 1,000 a request)
        self.objects_listed = 0
        self._caller = threading.get_ident()
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.inner.url

    @property
    def atomic_put_if_absent(self) -> bool:
        return self.inner.atomic_put_if_absent

    @property
    def requests(self) -> int:
        return sum(self.counts.values())

    def reset(self) -> None:
        with self._lock:
            self.counts.clear()
            self.caller_counts.clear()
            self.bytes_read.clear()
            self.keys_read.clear()
            self.objects_listed = 0
            self._caller = threading.get_ident()

    def _count(self, op: str) -> None:
        with self._lock:
            self.counts[op] += 1
            if threading.get_ident() == self._caller:
                self.caller_counts[op] += 1

    def get(self, key: str) -> Blob:
        self._count("get")
        data = self.inner.get(key)
        with self._lock:
            self.bytes_read["get"] += memoryview(data).nbytes
            self.keys_read[key] += 1
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        self._count("get_range")
        data = self.inner.get_range(key, start, end)
        with self._lock:
            self.bytes_read["get_range"] += len(data)
            self.keys_read[key] += 1
        return data

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        self._count("get_range")  # one request, as S3 bills it
        data, tag = self.inner.get_range_tagged(key, start, end)
        with self._lock:
            self.bytes_read["get_range"] += len(data)
            self.keys_read[key] += 1
        return data, tag

    def head(self, key: str) -> ObjectInfo:
        self._count("head")
        return self.inner.head(key)

    def read_start(self, key: str, length: int) -> tuple[bytes, ObjectInfo, str | None]:
        if getattr(self.inner, "read_start", None) is None:
            info = self.head(key)  # the inner store's two requests, each counted
            data, tag = self.get_range_tagged(key, 0, length)
            return data, info, tag
        self._count("get_range")  # one ranged GET, as S3 bills it
        data, info, tag = read_start(self.inner, key, length)
        with self._lock:
            self.bytes_read["get_range"] += len(data)
            self.keys_read[key] += 1
        return data, info, tag

    def put_if_absent(self, key: str, data: Blob) -> None:
        self._count("put_if_absent")
        self.inner.put_if_absent(key, data)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        self._count("list")
        return self._listed(self.inner.list(prefix, start_after=start_after, limit=limit))

    def _listed(self, infos: Iterator[ObjectInfo]) -> Iterator[ObjectInfo]:
        for info in infos:
            with self._lock:
                self.objects_listed += 1
            yield info

    def delete(self, key: str) -> None:
        self._count("delete")
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()
