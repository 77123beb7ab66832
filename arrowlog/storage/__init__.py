"""The object-store protocol that every other part of arrowlog stands on.

A store is deliberately narrow: get, ranged get (with the object's entity tag
or without), head, put-if-absent, list (by prefix, after a key, with a limit)
and delete. Every authoritative object arrowlog
writes is written exactly once with put-if-absent, so compare-and-swap is never
needed. Backends (memory, local directory, S3, GCS and Azure through obstore, S3
through s3fs, and opt-in unsafe fsspec filesystems) all pass one shared test
suite (``tests/storage``). :mod:`arrowlog.storage.registry` names the backend of
each URL scheme; :func:`arrowlog.storage.url.open_store` opens a URL.

Error contract, the same for every backend:

- a missing object raises :class:`FileNotFoundError`;
- put-if-absent on an existing key raises :class:`FileExistsError`;
- a failure that may pass on retry raises
  :class:`arrowlog.errors.TransientStoreError`, whose ``maybe_applied`` says
  whether a write may have happened anyway (its reply lost);
- anything else raises :class:`arrowlog.errors.StoreError`.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from arrowlog.errors import InvalidNameError

__all__ = [
    "Blob",
    "ObjectInfo",
    "Store",
    "at_memory_speed",
    "check_key",
    "epoch_ms",
    "get_range_tagged",
]

#: What ``get`` returns: bytes, or a read-only view of memory the backend owns.
#: The local store reads into Arrow's memory pool: allocating fresh Python bytes
#: for every segment made reads about 4x slower (page faults). ``bytes(blob)``
#: copies when bytes are really needed.
Blob = bytes | memoryview


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One stored object: its key (relative to the store's root) and size.

    ``modified_ms`` is when the object was written, in ms since the epoch, on the
    *store's* clock (S3 ``LastModified``, a file's mtime, the memory store's put
    time): timeouts measured with it never depend on another client's clock.
    None where a backend cannot tell.
    """

    key: str
    size: int
    modified_ms: int | None = None


@runtime_checkable
class Store(Protocol):
    """What arrowlog needs from an object store. Keys are ``/``-separated paths
    relative to the store's root; :func:`check_key` says which are allowed.

    A store must pickle, and the unpickled copy must work: Spark's executors and
    Python workers, and process pools, receive stores (and the objects holding
    them) pickled. A copy reconnects to the same objects (pickle the settings,
    never a live client: rebuild it on the other side), except a
    ``memory://`` store, whose copy holds the objects of the original at the time
    it was pickled and is a store of its own from then on
    (:mod:`arrowlog.storage.memory`). The shared suite checks this for every
    backend.
    """

    @property
    def url(self) -> str:
        """Where the store lives, without credentials."""
        ...

    @property
    def atomic_put_if_absent(self) -> bool:
        """True if two concurrent put-if-absent calls on one key can never both
        succeed. arrowlog refuses stores where this is False unless opted in."""
        ...

    def get(self, key: str) -> Blob:
        """The whole object. Raises FileNotFoundError."""
        ...

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of the object, cut short at its end."""
        ...

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        """:meth:`get_range`, with the entity tag of the object the bytes came
        from (S3's ETag; None where a backend cannot tell): two ranges with one
        tag come from objects of the very same bytes. A reader that kept part
        of an object can so fetch another part without fetching the first
        again. (Two objects of the same bytes may share a tag, as S3's MD5
        ETags do, or not, as a local file's identity does.)"""
        ...

    def head(self, key: str) -> ObjectInfo:
        """The object's size and modification time. Raises FileNotFoundError."""
        ...

    def put_if_absent(self, key: str, data: Blob) -> None:
        """Store ``data`` at ``key`` unless an object is there already, atomically:
        readers see either nothing or the whole object. Raises FileExistsError."""
        ...

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        """Objects whose key starts with ``prefix``, in ascending key order,
        strictly after ``start_after``, at most ``limit`` of them, with their
        sizes and modification times. Not a snapshot: a listing that races
        writes may show a key written later without one written earlier."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object; removing a missing object is not an error."""
        ...

    def close(self) -> None:
        """Release connections and threads."""
        ...


def at_memory_speed(store: Store) -> bool:
    """Whether ``store`` answers at memory speed (a local directory, memory):
    there, requests in parallel or started early only add threads' overhead."""
    return store.url.startswith(("file:", "memory:"))


def get_range_tagged(store: Store, key: str, start: int, end: int) -> tuple[bytes, str | None]:
    """``store.get_range_tagged``; for a store written to this protocol before
    ranged reads had tags, its ``get_range`` and no tag (its readers then check
    which object they read as they do on any store without tags)."""
    tagged = getattr(store, "get_range_tagged", None)
    if tagged is None:
        return store.get_range(key, start, end), None
    found: tuple[bytes, str | None] = tagged(key, start, end)
    return found


def read_start(store: Store, key: str, length: int) -> tuple[bytes, ObjectInfo, str | None]:
    """The first ``length`` bytes of the object at ``key`` (fewer if it is
    shorter), its info and its tag (as :meth:`Store.get_range_tagged`'s), in
    one request where the store can (a ranged GET answers with the object's
    size, time and tag; ``store.read_start``), else a HEAD and a ranged read.
    A writer following the log end looks at the next key this way: one
    request whether or not an object is there.

    Raises:
        FileNotFoundError: no object at ``key``.
    """
    own = getattr(store, "read_start", None)
    if own is not None:
        found: tuple[bytes, ObjectInfo, str | None] = own(key, length)
        return found
    info = store.head(key)
    data, tag = get_range_tagged(store, key, 0, length)
    return data, info, tag


def epoch_ms(modified: datetime.datetime | None) -> int | None:
    """A store's modification time (its own clock) as ms since the epoch."""
    return None if modified is None else int(modified.timestamp() * 1000)


# A component is 1-255 characters of a conservative alphabet, never starting with a
# dot: that rules out "." and "..", hidden temp files and anything a filesystem or
# an S3 console would treat specially.
_COMPONENT = re.compile(r"[A-Za-z0-9_=+-][A-Za-z0-9._=+-]{0,254}")
MAX_KEY_LENGTH = 1024


def check_key(key: str) -> str:
    """Return ``key`` if it is a safe relative key, else raise InvalidNameError.

    Raises:
        InvalidNameError: the key is empty, absolute, too long, or has a component
            that could escape the root (``..``) or is otherwise unsafe.
    """
    if not isinstance(key, str) or not key:
        raise InvalidNameError(f"invalid object key {key!r}: must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidNameError(f"invalid object key: longer than {MAX_KEY_LENGTH} characters")
    for part in key.split("/"):
        if not _COMPONENT.fullmatch(part):
            raise InvalidNameError(
                f"invalid object key {key!r}: component {part!r} is empty, starts with "
                "a dot, or has characters outside [A-Za-z0-9._=+-]"
            )
    return key


def check_prefix(prefix: str) -> str:
    """Like :func:`check_key`, but allow the empty prefix and a trailing slash."""
    if prefix == "":
        return prefix
    stripped = prefix[:-1] if prefix.endswith("/") else prefix
    check_key(stripped)
    return prefix
