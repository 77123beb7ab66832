"""A store that ignores put-if-absent's condition: every put overwrites,
whoever was there first, while the store says its put-if-absent is atomic. A
deliberately unsafe store (the servers that did this: docs/storage.md), for
the tests of ``arrowlog doctor``, which must call it unsafe.

It wraps a real store and pickles with it, so racing processes get the same
double; ``unsafe+<scheme>://...`` opens it over ``<scheme>://...`` once a test
registers the scheme (``register_store("unsafe+file", TARGET)``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from arrowlog.errors import InvalidConfigError
from arrowlog.storage import Blob, ObjectInfo, Store
from arrowlog.storage.location import StoreURL

__all__ = ["TARGET", "IgnoresConditionStore"]

#: the registry's target for this class
TARGET = "arrowlog.testing.unconditional:IgnoresConditionStore"


class IgnoresConditionStore:
    """``inner``, with a put-if-absent that never refuses: it removes what is
    there and writes (last writer wins), as a server ignoring ``If-None-Match: *``."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    @classmethod
    def from_url(cls, url: StoreURL, storage_options: Mapping[str, Any] | None) -> Store:
        """``unsafe+file:///dir`` is ``file:///dir`` ignoring the condition.

        Raises:
            InvalidConfigError: a scheme without ``+`` and an inner scheme.
        """
        from arrowlog.storage.url import open_store

        outer, plus, inner = url.url.partition("+")
        if not plus or not inner:
            raise InvalidConfigError(f"{url.url!r}: expected {outer}+<scheme>://...")
        return cls(open_store(inner, dict(storage_options or {})))

    def __reduce__(self) -> tuple[Any, ...]:
        return (IgnoresConditionStore, (self.inner,))

    @property
    def url(self) -> str:
        return f"unsafe+{self.inner.url}"

    @property
    def atomic_put_if_absent(self) -> bool:
        return True  # what it says, not what it does

    def get(self, key: str) -> Blob:
        return self.inner.get(key)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.inner.get_range(key, start, end)

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        return self.inner.get_range_tagged(key, start, end)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def put_if_absent(self, key: str, data: Blob) -> None:
        while True:
            self.inner.delete(key)
            try:
                self.inner.put_if_absent(key, data)
                return
            except FileExistsError:  # another writer's put came in between: overwrite it too
                continue

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix, start_after=start_after, limit=limit)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def close(self) -> None:
        self.inner.close()
