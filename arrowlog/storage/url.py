"""Opening a store from a URL: the registry (:mod:`arrowlog.storage.registry`)
names the backend of each scheme, and the backend opens the store."""

from __future__ import annotations

from typing import Any, cast

from arrowlog.storage import Store
from arrowlog.storage.fsspec_store import FsspecStore
from arrowlog.storage.location import StoreClass, StoreURL, refuse_unsafe
from arrowlog.storage.registry import backend_class

__all__ = ["StoreClass", "StoreURL", "open_store"]


def open_store(
    url: str, storage_options: dict[str, Any] | None = None, *, allow_unsafe_store: bool = False
) -> Store:
    """Open the store named by ``url``.

    ``memory://name`` (a fresh in-process store), ``file:///dir`` or a plain path
    (a local directory), ``s3://bucket/prefix`` (S3, MinIO, SeaweedFS, ...),
    ``gs://`` and ``az://``: the schemes of :mod:`arrowlog.storage.registry`. Any
    other fsspec protocol is refused unless ``allow_unsafe_store`` is True, because
    its put-if-absent is not known to be atomic; so is a registered backend whose
    store says its put-if-absent is not atomic.

    ``storage_options`` are checked against the backend's known keys and coerced
    (see :mod:`arrowlog.storage.options`) before anything is opened or created.

    Raises:
        UnsupportedStoreError: unknown protocol, or one without atomic
            put-if-absent and no opt-in.
        InvalidConfigError: an unknown storage option or a value of the wrong kind.
        MissingDependencyError: the backend's package is not installed (for
            ``s3://``: the ``s3`` extra).
    """
    where = StoreURL.parse(url)
    found = backend_class(where.scheme)
    if found is None:
        return FsspecStore.from_url(where, storage_options, allow_unsafe_store=allow_unsafe_store)
    store = cast(StoreClass, found).from_url(where, storage_options)
    if not store.atomic_put_if_absent:
        refuse_unsafe(
            store.url, f"{where.scheme}://", allow_unsafe_store=allow_unsafe_store, stacklevel=3
        )
    return store
