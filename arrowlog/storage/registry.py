"""Which backend serves a URL scheme: a table of scheme -> ``"module:Class"``.

Backends are named by import path, as fsspec's registry names its filesystems:
a backend's module is imported only when a URL names its scheme, so opening
``memory://`` imports no cloud client. The class opens the store itself from the
URL (its ``from_url``, see :class:`arrowlog.storage.url.StoreClass`), with the
storage options it declares beside it.

A scheme's entry may name the extra that brings its packages
(``pip install 'arrowlog[s3]'``): they are checked before the module is imported,
so a missing one is a :class:`~arrowlog.errors.MissingDependencyError` naming the
extra rather than a bare ImportError from inside the backend.

Adding a store is one module plus one line in :data:`_STORES` (docs/storage.md);
a program can add its own with :func:`register_store`. A scheme not in the table
falls through to fsspec, refused unless ``allow_unsafe_store`` (see
:func:`arrowlog.storage.url.open_store`).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass

from arrowlog._extras import EXTRAS, require_extra
from arrowlog.errors import InvalidConfigError

__all__ = ["Backend", "backend_class", "register_store", "registered_schemes", "unregister_store"]


@dataclass(frozen=True)
class Backend:
    """Where a scheme's store class lives (``"package.module:Class"``) and the
    extra, if any, whose packages its module needs."""

    target: str
    extra: str | None = None


#: scheme -> its backend. A plain path (no scheme) is ``file``. ``s3://`` opens
#: obstore's client unless the storage option ``client`` says ``s3fs``: the class
#: hands that one to :class:`arrowlog.storage.s3.S3Store` (the s3 extra brings both).
_STORES: dict[str, Backend] = {
    "memory": Backend("arrowlog.storage.memory:MemoryStore"),
    "file": Backend("arrowlog.storage.local:LocalStore"),
    "s3": Backend("arrowlog.storage.objectstore:ObjectStore", extra="s3"),
    "s3a": Backend("arrowlog.storage.objectstore:ObjectStore", extra="s3"),
    "gs": Backend("arrowlog.storage.objectstore:ObjectStore", extra="gcs"),
    "az": Backend("arrowlog.storage.objectstore:ObjectStore", extra="azure"),
}

# RFC 3986's scheme, lower case only: URLs are matched after lowering theirs
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


def register_store(scheme: str, target: str, *, extra: str | None = None) -> None:
    """Let URLs of ``scheme`` open the store class ``target`` (``"module:Class"``,
    imported when a URL first names the scheme). The class must have
    ``from_url(url, storage_options)`` (:class:`arrowlog.storage.url.StoreClass`).

    Raises:
        InvalidConfigError: the scheme is registered already (two backends for
            one scheme would make a URL's meaning depend on import order), or the
            scheme, the target or the extra is malformed.
    """
    if not isinstance(scheme, str) or not _SCHEME.fullmatch(scheme):
        raise InvalidConfigError(
            f"a store scheme is lower-case letters, digits and +.- (starting with a letter), "
            f"got {scheme!r}"
        )
    if scheme in _STORES:
        raise InvalidConfigError(
            f"store scheme {scheme!r} is registered already, to {_STORES[scheme].target}"
        )
    if not isinstance(target, str) or not _TARGET.fullmatch(target):
        raise InvalidConfigError(f"a store target is 'package.module:Class', got {target!r}")
    if extra is not None and extra not in EXTRAS:
        raise InvalidConfigError(
            f"unknown extra {extra!r} for {scheme}://; known: {', '.join(sorted(EXTRAS))}"
        )
    _STORES[scheme] = Backend(target, extra)


def unregister_store(scheme: str) -> None:
    """Forget ``scheme`` (a program's own backend, or a test's); a scheme that is
    not registered is not an error."""
    _STORES.pop(scheme, None)


def registered_schemes() -> list[str]:
    """Every scheme a URL may name, sorted."""
    return sorted(_STORES)


def backend_class(scheme: str) -> object | None:
    """The store class registered for ``scheme`` (its module imported now), or
    None if the scheme is not registered.

    Raises:
        MissingDependencyError: the packages of the backend's extra are missing.
    """
    backend = _STORES.get(scheme)
    if backend is None:
        return None
    if backend.extra is not None:
        require_extra(backend.extra)
    module, _, name = backend.target.partition(":")
    found: object = getattr(importlib.import_module(module), name)
    return found
