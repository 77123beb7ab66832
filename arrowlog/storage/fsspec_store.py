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
import inspect
from collections.abc import Iterator, Mapping
from typing import Any

import fsspec

from arrowlog.errors import MissingDependencyError, StoreError, UnsupportedStoreError
from arrowlog.storage import Blob, ObjectInfo, check_key, check_prefix
from arrowlog.storage.location import StoreURL, refuse_unsafe
from arrowlog.storage.options import Kind, coerce_options
from arrowlog.storage.registry import registered_schemes

# Arguments of an fsspec filesystem that arrowlog sets itself or that cannot be
# given as an option.
_FSSPEC_RESERVED = frozenset({"self", "skip_instance_cache", "asynchronous", "loop"})


class FsspecStore:
    """A store over any fsspec filesystem; put-if-absent is NOT atomic."""

    def __init__(self, protocol: str, root: str, storage_options: dict[str, Any]) -> None:
        self._protocol = protocol
        self._root = root.rstrip("/")
        self._options = dict(storage_options)
        self._fs = fsspec.filesystem(protocol, skip_instance_cache=True, **self._options)

    @classmethod
    def from_url(
        cls,
        url: StoreURL,
        storage_options: Mapping[str, Any] | None,
        *,
        allow_unsafe_store: bool,
    ) -> FsspecStore:
        """The store for a URL whose scheme no registered backend serves, if
        fsspec knows the protocol and the caller opted in; refused before the
        filesystem is made (making it may connect).

        Raises:
            UnsupportedStoreError: fsspec does not know the protocol (the message
                lists the registered schemes), or ``allow_unsafe_store`` is False.
            MissingDependencyError: the protocol's package is not installed.
            InvalidConfigError: an option the filesystem does not take, or a
                value of the wrong kind.
        """
        scheme = url.scheme
        if scheme not in fsspec.available_protocols():
            raise UnsupportedStoreError(
                f"unknown store protocol {scheme!r} in {url.url!r}; known: "
                f"{', '.join(f'{s}://' for s in registered_schemes())} and plain paths, "
                "or any other fsspec protocol with allow_unsafe_store=True"
            )
        try:
            filesystem = fsspec.get_filesystem_class(scheme)
        except ImportError as e:
            raise MissingDependencyError(f"{scheme}:// needs a package: {e}") from e
        options = coerce_options(f"{scheme}://", storage_options, fsspec_options(filesystem))
        refuse_unsafe(
            f"the {scheme!r} filesystem",
            f"{scheme}://",
            allow_unsafe_store=allow_unsafe_store,
            stacklevel=4,
        )
        return cls(scheme, url.netloc + url.path, options)

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


def fsspec_options(filesystem: type[Any]) -> dict[str, Kind]:
    """The keys an fsspec filesystem class takes: the named arguments of every
    ``__init__`` along its MRO, each of the kind its default value has."""
    known: dict[str, Kind] = {}
    for cls in filesystem.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        for param in inspect.signature(init).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.name not in _FSSPEC_RESERVED:
                known.setdefault(param.name, _kind_of_default(param.name, param.default))
    return known


def _kind_of_default(name: str, default: object) -> Kind:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, dict) or name.endswith("_kwargs"):
        return "object"
    return "text"


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
