"""Any other fsspec filesystem, for users who opt in knowingly.

arrowlog's guarantees rest on atomic put-if-absent. A generic fsspec filesystem
offers at best ``pipe_file(mode="create")``, which several implementations (the
local one among them) carry out as check-then-write: two writers can both win.
:func:`arrowlog.connect` therefore refuses these filesystems unless the caller
passes ``allow_unsafe_store=True``, and warns when it does.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator
from typing import Any

import fsspec

from arrowlog.errors import StoreError
from arrowlog.storage import Blob, ObjectInfo, check_key, check_prefix


class FsspecStore:
    """A store over any fsspec filesystem; put-if-absent is NOT atomic."""

    def __init__(self, protocol: str, root: str, storage_options: dict[str, Any]) -> None:
        self._protocol = protocol
        self._root = root.rstrip("/")
        self._options = dict(storage_options)
        self._fs = fsspec.filesystem(protocol, skip_instance_cache=True, **self._options)

    def __reduce__(self) -> tuple[Any, ...]:
        return (FsspecStore, (self._protocol, self._root, self._options))

    @property
    def url(self) -> str:
        return f"{self._protocol}://{self._root}"

    @property
    def atomic_put_if_absent(self) -> bool:
        return False

    def _path(self, key: str) -> str:
        check_key(key)
        return f"{self._root}/{key}"

    def get(self, key: str) -> Blob:
        try:
            data: bytes = self._fs.cat_file(self._path(key))
        except FileNotFoundError:
            raise FileNotFoundError(key) from None
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        try:
            data: bytes = self._fs.cat_file(self._path(key), start=start, end=end)
        except FileNotFoundError:
            raise FileNotFoundError(key) from None
        return data

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        # fsspec reports no tag with the bytes it reads: never vouch for them
        return self.get_range(key, start, end), None

    def head(self, key: str) -> ObjectInfo:
        try:
            info = self._fs.info(self._path(key))
        except FileNotFoundError:
            raise FileNotFoundError(key) from None
        if info.get("type") != "file":
            raise FileNotFoundError(key)
        return ObjectInfo(key, int(info["size"]), _modified_ms(info))

    def put_if_absent(self, key: str, data: Blob) -> None:
        path = self._path(key)
        parent = path.rsplit("/", 1)[0]
        try:
            self._fs.makedirs(parent, exist_ok=True)
            if self._fs.exists(path):
                raise FileExistsError(key)
            self._fs.pipe_file(path, bytes(data), mode="create")
        except FileExistsError:
            raise FileExistsError(key) from None
        except OSError as e:
            raise StoreError(f"{key}: {e}") from e

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = f"{self._root}/{base}" if base else self._root
        try:
            found = self._fs.find(top, detail=True)
        except FileNotFoundError:
            found = {}
        root = self._fs._strip_protocol(self._root).rstrip("/") + "/"
        items = []
        for path, info in found.items():
            key = self._fs._strip_protocol(path)[len(root) :]
            if info.get("type") != "file" or not key.startswith(prefix):
                continue
            if any(part.startswith(".") for part in key.split("/")):
                continue
            if start_after is not None and key <= start_after:
                continue
            items.append(ObjectInfo(key, int(info["size"]), _modified_ms(info)))
        items.sort(key=lambda o: o.key)
        return iter(items[:limit] if limit is not None else items)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(self._path(key))

    def close(self) -> None:
        pass


def _modified_ms(info: dict[str, Any]) -> int | None:
    """The write time in an fsspec info dict, in ms: filesystems name and type it
    differently (seconds as a float, a datetime, an ISO string)."""
    for name in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(name)
        if isinstance(value, str):
            try:
                value = datetime.datetime.fromisoformat(value)
            except ValueError:
                continue
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:  # naive times in fsspec's implementations are UTC
                value = value.replace(tzinfo=datetime.UTC)
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value * 1000)
    return None
