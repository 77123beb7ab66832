"""Opening a store from a URL: the registry (:mod:`arrowlog.storage.registry`)
names the backend of each scheme, and the backend opens the store."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from arrowlog.errors import UnsupportedStoreError
from arrowlog.storage import Store
from arrowlog.storage.registry import backend_class

__all__ = ["StoreClass", "StoreURL", "open_store"]


@dataclass(frozen=True)
class StoreURL:
    """A store's URL, split for its backend.

    Attributes:
        url: as the user wrote it (for messages).
        scheme: lower case; ``file`` for a plain path.
        netloc: the bucket, container or memory store's name; empty for a path.
        path: as written: percent-encoded in a ``file://`` URL, not in a plain path.
        is_path: a plain path (``/dir``, ``dir``, ``C:\\dir``), not a URL.
    """

    url: str
    scheme: str
    netloc: str
    path: str
    is_path: bool = False

    @classmethod
    def parse(cls, url: str) -> StoreURL:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        # a Windows drive letter parses as a one-letter scheme
        if not scheme or (len(scheme) == 1 and url[1:3] in (":\\", ":/")):
            return cls(url, "file", "", url, is_path=True)
        return cls(url, scheme, parts.netloc, parts.path)


class StoreClass(Protocol):
    """What the registry needs of a backend's class: a way to open a store from
    its URL. ``from_url`` checks and coerces ``storage_options`` by the keys the
    backend declares (:func:`arrowlog.storage.options.coerce_options`) before it
    opens or creates anything."""

    def from_url(self, url: StoreURL, storage_options: Mapping[str, Any] | None) -> Store: ...


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
        from arrowlog.storage.fsspec_store import FsspecStore

        return FsspecStore.from_url(where, storage_options, allow_unsafe_store=allow_unsafe_store)
    store = cast(StoreClass, found).from_url(where, storage_options)
    if not store.atomic_put_if_absent:
        refuse_unsafe(
            store.url, f"{where.scheme}://", allow_unsafe_store=allow_unsafe_store, stacklevel=3
        )
    return store


def refuse_unsafe(what: str, where: str, *, allow_unsafe_store: bool, stacklevel: int) -> None:
    """Refuse a store without atomic put-if-absent (``what`` in the message), or
    warn about it (``where``) if the caller opted in; ``stacklevel`` as the
    caller would pass to :func:`warnings.warn` itself.

    Raises:
        UnsupportedStoreError: ``allow_unsafe_store`` is False.
    """
    if not allow_unsafe_store:
        raise UnsupportedStoreError(
            f"{what} has no atomic put-if-absent that arrowlog can "
            "rely on, so two writers could claim the same offset. Use memory://, a "
            "local directory or s3://; or pass allow_unsafe_store=True if you are "
            "certain only one process writes at a time."
        )
    warnings.warn(
        f"arrowlog on {where} without atomic put-if-absent: concurrent writers "
        "can corrupt the log (allow_unsafe_store=True)",
        stacklevel=stacklevel + 1,
    )
