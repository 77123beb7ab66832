"""Choosing a backend from a URL."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from arrowlog._extras import require_extra
from arrowlog.errors import MissingDependencyError, UnsupportedStoreError
from arrowlog.storage import Store
from arrowlog.storage.options import (
    LOCAL_OPTIONS,
    MEMORY_OPTIONS,
    coerce_options,
    fsspec_options,
    obstore_cloud_options,
    obstore_s3_options,
    s3_client,
    s3_options,
)


def open_store(
    url: str, storage_options: dict[str, Any] | None = None, *, allow_unsafe_store: bool = False
) -> Store:
    """Open the store named by ``url``.

    ``memory://name`` (a fresh in-process store), ``file:///dir`` or a plain path
    (a local directory), ``s3://bucket/prefix`` (S3, MinIO, SeaweedFS, ...). Any
    other fsspec protocol is refused unless ``allow_unsafe_store`` is True, because
    its put-if-absent is not known to be atomic.

    ``storage_options`` are checked against the backend's known keys and coerced
    (see :mod:`arrowlog.storage.options`) before anything is opened or created.

    Raises:
        UnsupportedStoreError: unknown protocol, or one without atomic
            put-if-absent and no opt-in.
        InvalidConfigError: an unknown storage option or a value of the wrong kind.
        MissingDependencyError: the backend's package is not installed (for
            ``s3://``: the ``s3`` extra).
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "memory":
        from arrowlog.storage.memory import MemoryStore

        coerce_options("memory://", storage_options, MEMORY_OPTIONS)
        return MemoryStore(parts.netloc + parts.path)
    if scheme in ("", "file") or (len(scheme) == 1 and url[1:3] in (":\\", ":/")):
        from arrowlog.storage.local import LocalStore

        # a file:// URL is percent-encoded (as LocalStore.url writes it); a path is not
        path = unquote(parts.path) if scheme == "file" else url
        if scheme == "file" and parts.netloc not in ("", "localhost"):
            raise UnsupportedStoreError(f"file:// URLs must name a local path, got {url!r}")
        local = coerce_options("a local directory", storage_options, LOCAL_OPTIONS)
        return LocalStore(Path(path), **local)
    if scheme in ("s3", "s3a") and s3_client(storage_options) == "s3fs":
        s3 = s3_options(storage_options)
        require_extra("s3")
        from arrowlog.storage.s3 import S3Store

        return S3Store(parts.netloc, parts.path, s3)
    if scheme in ("s3", "s3a", "gs", "az"):
        kind = "s3" if scheme == "s3a" else scheme
        if not parts.netloc:
            raise UnsupportedStoreError(
                f"a {scheme}:// URL needs a bucket: {scheme}://bucket/prefix, got {url!r}"
            )
        if kind == "s3":
            config, client = obstore_s3_options(storage_options, os.environ)
        else:
            config, client = obstore_cloud_options(kind, storage_options)
        require_extra({"s3": "s3", "gs": "gcs", "az": "azure"}[kind])
        from arrowlog.storage.objectstore import ObjectStore

        return ObjectStore(kind, parts.netloc, parts.path, config, client)

    import fsspec

    if scheme not in fsspec.available_protocols():
        raise UnsupportedStoreError(f"unknown store protocol {scheme!r} in {url!r}")
    try:
        filesystem = fsspec.get_filesystem_class(scheme)
    except ImportError as e:
        raise MissingDependencyError(f"{scheme}:// needs a package: {e}") from e
    options = coerce_options(f"{scheme}://", storage_options, fsspec_options(filesystem))
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
