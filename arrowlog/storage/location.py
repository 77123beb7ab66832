"""A store's URL as its backend reads it, what a backend's class offers the
registry, and the refusal of stores without atomic put-if-absent. Below both
:mod:`arrowlog.storage.url` and the backends, which import it."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from arrowlog.errors import UnsupportedStoreError
from arrowlog.storage import Store

__all__ = ["StoreClass", "StoreURL", "refuse_unsafe"]


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
