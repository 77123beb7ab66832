"""An in-process store: a real backend (it passes the shared suite), not a mock.
Each ``memory://`` connection gets a fresh, empty store; share one by passing the
store object itself to :func:`arrowlog.connect`.

A memory store pickles as a copy: the unpickled store holds the objects the
original held when it was pickled (same keys, bytes and write times, entity tags
new in the receiving process) and is a store of its own from then on, since
another process cannot share this one's memory: writes to either are not seen by
the other. Use a local directory or S3 where processes must share a log."""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any

from arrowlog.storage import Blob, ObjectInfo, check_key, check_prefix
from arrowlog.storage.location import StoreURL
from arrowlog.storage.options import Kind, coerce_options

#: numbers the puts of every memory store of the process: a tag stands for one
#: object however many stores there are (frames are kept per process)
_PUTS = itertools.count()

#: ``memory://`` takes no storage options.
MEMORY_OPTIONS: Mapping[str, Kind] = {}


class MemoryStore:
    """Objects in a dict, keys kept sorted for listing; thread-safe."""

    def __init__(self, name: str = "") -> None:
        self._name = name
        self._objects: dict[str, bytes] = {}
        self._modified: dict[str, int] = {}  # put time, ms since the epoch
        self._tags: dict[str, str] = {}  # entity tags: the put's number in this process
        self._keys: list[str] = []
        self._lock = threading.Lock()

    @classmethod
    def from_url(cls, url: StoreURL, storage_options: Mapping[str, Any] | None) -> MemoryStore:
        """A fresh, empty store for ``memory://name``.

        Raises:
            InvalidConfigError: any storage option.
        """
        coerce_options("memory://", storage_options, MEMORY_OPTIONS)
        return cls(url.netloc + url.path)

    def __reduce__(self) -> tuple[Any, ...]:
        # a copy (see the module's docstring): the lock and the tags stay here
        with self._lock:
            objects = {key: (self._objects[key], self._modified[key]) for key in self._keys}
        return (_copy, (self._name, objects))

    @property
    def url(self) -> str:
        return f"memory://{self._name}"

    @property
    def atomic_put_if_absent(self) -> bool:
        return True

    def get(self, key: str) -> Blob:
        check_key(key)
        try:
            return self._objects[key]
        except KeyError:
            raise FileNotFoundError(key) from None

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get_range_tagged(key, start, end)[0]

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        check_key(key)
        with self._lock:  # the bytes and the tag of one object
            try:
                return self._objects[key][start:end], self._tags[key]
            except KeyError:
                raise FileNotFoundError(key) from None

    def read_start(self, key: str, length: int) -> tuple[bytes, ObjectInfo, str | None]:
        check_key(key)
        with self._lock:
            if key not in self._objects:
                raise FileNotFoundError(key)
            data = self._objects[key]
            info = ObjectInfo(key, len(data), self._modified[key])
            return data[: max(0, length)], info, self._tags[key]

    def head(self, key: str) -> ObjectInfo:
        check_key(key)
        with self._lock:
            if key not in self._objects:
                raise FileNotFoundError(key)
            return ObjectInfo(key, len(self._objects[key]), self._modified[key])

    def put_if_absent(self, key: str, data: Blob) -> None:
        check_key(key)
        value = bytes(data)
        with self._lock:
            if key in self._objects:
                raise FileExistsError(key)
            self._objects[key] = value
            self._modified[key] = time.time_ns() // 1_000_000
            self._tags[key] = str(next(_PUTS))
            bisect.insort(self._keys, key)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        with self._lock:
            lo = bisect.bisect_left(self._keys, prefix)
            if start_after is not None:
                lo = max(lo, bisect.bisect_right(self._keys, start_after))
            found: list[ObjectInfo] = []
            for key in self._keys[lo:]:
                if not key.startswith(prefix) or (limit is not None and len(found) >= limit):
                    break
                found.append(ObjectInfo(key, len(self._objects[key]), self._modified[key]))
        return iter(found)

    def delete(self, key: str) -> None:
        check_key(key)
        with self._lock:
            if self._objects.pop(key, None) is not None:
                del self._modified[key]
                del self._tags[key]
                self._keys.pop(bisect.bisect_left(self._keys, key))

    def close(self) -> None:
        pass


def _copy(name: str, objects: dict[str, tuple[bytes, int]]) -> MemoryStore:
    """A memory store holding ``objects`` (key -> bytes, write time), each with a
    tag new in this process: tags count puts per process, so one carried over
    from another could name a different object here."""
    store = MemoryStore(name)
    for key, (data, modified) in objects.items():
        store.put_if_absent(key, data)
        store._modified[key] = modified
    return store
