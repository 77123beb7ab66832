"""Choosing a backend from a URL."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from arrowlog.errors import UnsupportedStoreError
from arrowlog.storage import Store


def open_store(
    url: str, storage_options: dict[str, Any] | None = None, *, allow_unsafe_store: bool = False
) -> Store:
    """Open the store named by ``url``.

    ``memory://name`` (a fresh in-process store), ``file:///dir`` or a plain path
    (a local directory), ``s3://bucket/prefix`` (S3, MinIO, SeaweedFS, ...). Any
    other fsspec protocol is refused unless ``allow_unsafe_store`` is True, because
    its put-if-absent is not known to be atomic.

    Raises:
        UnsupportedStoreError: unknown protocol, or one without atomic
            put-if-absent and no opt-in.
    """
    options = dict(storage_options or {})
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        from arrowlog.storage.memory import MemoryStore

        return MemoryStore(parts.netloc + parts.path)
    if scheme in ("", "file") or (len(scheme) == 1 and url[1:3] in (":\\", ":/")):
        from arrowlog.storage.local import LocalStore

        path = parts.path if scheme == "file" else url
        if scheme == "file" and parts.netloc not in ("", "localhost"):
            raise UnsupportedStoreError(f"file:// URLs must name a local path, got {url!r}")
        fsync = _as_bool(options.pop("fsync", True), "fsync")
        if options:
            raise UnsupportedStoreError(
                f"unknown storage options for a local directory: {sorted(options)}"
            )
        return LocalStore(Path(path), fsync=fsync)
    if scheme in ("s3", "s3a"):
        from arrowlog.storage.s3 import S3Store

        return S3Store(parts.netloc, parts.path, options)

    import fsspec

    if scheme not in fsspec.available_protocols():
        raise UnsupportedStoreError(f"unknown store protocol {scheme!r} in {url!r}")
    if not allow_unsafe_store:
        raise UnsupportedStoreError(
            f"the {scheme!r} filesystem has no atomic put-if-absent that arrowlog can "
            "rely on, so two writers could claim the same offset. Use memory://, a "
            "local directory or s3://; or pass allow_unsafe_store=True if you are "
            "certain only one process writes at a time."
        )
    warnings.warn(
        f"arrowlog on {scheme}:// without atomic put-if-absent: concurrent writers "
        "can corrupt the log (allow_unsafe_store=True)",
        stacklevel=3,
    )
    from arrowlog.storage.fsspec_store import FsspecStore

    return FsspecStore(scheme, parts.netloc + parts.path, options)


def _as_bool(value: object, name: str) -> bool:
    # Options may come from a command line or Spark as strings.
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise UnsupportedStoreError(f"storage option {name} must be true or false, got {value!r}")
