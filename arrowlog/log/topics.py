"""Changing a topic: its chain of versions, adding partitions, deleting it.

A topic is a chain of versions claimed with put-if-absent: version 0 at the key
topics always had, version n at ``topic_version_key(name, n)``. A change reads
the latest version, *announces* version n+1 in every partition of it, then
claims n+1; of several changers exactly one claims it, the others read it and
decide again. Announcing first means a client that lists any partition after
the claim sees the announcement in the same LIST it makes anyway, and reads the
new version. A delete claims a :class:`TopicTombstone`, then removes the
partitions' objects; that removal is idempotent and a rerun finishes it. See
docs/protocol.md, "Changing a topic".
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from arrowlog._threads import Lane
from arrowlog.config import RetryPolicy
from arrowlog.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    TransientStoreError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.topic import (
    MAX_PARTITIONS,
    Topic,
    TopicEntry,
    TopicTombstone,
    announcement_key,
    load_topic_entry,
    parse_topic_listing,
    topic_version_key,
    topic_versions_prefix,
)
from arrowlog.storage import Store

T = TypeVar("T")

#: Deletes in flight at once while removing a deleted topic's objects.
_PARALLEL_DELETES = 8


#: the settings of a topic that may change after it is created: nothing any
#: client's correctness rests on (delete_delay_ms bounds how long writers trust
#: their view of the log end, so it stays as created)
ALTERABLE = frozenset({"retention_ms", "retention_bytes"})


@dataclass(frozen=True, slots=True)
class TopicDeletion:
    """What ``delete_topic`` did.

    Attributes:
        tombstone: the version that deleted the topic.
        objects_deleted: objects removed by this call (segments, checkpoints,
            older announcements).
        already_deleted: the topic was deleted before this call, which only
            finished removing its objects.
    """

    tombstone: TopicTombstone
    objects_deleted: int
    already_deleted: bool


class TopicVersions:
    """The chain of versions of topics under one root."""

    def __init__(self, store: Store, retry: RetryPolicy) -> None:
        self._store = store
        self._retry = retry

    def read(self, name: str, version: int) -> TopicEntry | None:
        """Version ``version`` of topic ``name``; None if not claimed (yet)."""
        key = topic_version_key(name, version)
        try:
            raw = self._retry.call(lambda: self._store.get(key))
        except FileNotFoundError:
            return None
        return load_topic_entry(raw, key=key)

    def follow(self, entry: TopicEntry) -> TopicEntry:
        """The latest version from ``entry`` on, read by key until one is
        missing: one GET when nothing follows. Versions are claimed one after
        the other, so the chain has no gaps; a listing could miss the newest."""
        while (nxt := self.read(entry.name, entry.version + 1)) is not None:
            entry = nxt
        return entry

    def latest(self, name: str, known: TopicEntry | None = None) -> TopicEntry | None:
        """The latest version of ``name``, from ``known`` (a version read
        before) or version 0 on; None if no topic ever had the name. One GET
        when nothing follows ``known`` (two from version 0). If something
        does, a LIST of the versions after it (one request per 1000 versions)
        says where to go on reading by key: what a chain of many changes (an
        operator altering retention every hour) costs does not grow with it."""
        entry = known if known is not None else self.read(name, 0)
        if entry is None:
            return None
        nxt = self.read(name, entry.version + 1)
        if nxt is None:
            return entry
        return self.follow(self._newest_listed(nxt))

    def first_look(self, name: str) -> TopicEntry | None:
        """:meth:`latest` for a client that has read no version of ``name``
        yet: versions 0 and 1 read at once, so that its first look waits for
        one round trip, not two (a GET more for a name no topic has)."""
        second = Lane(1).submit(self.read, name, 1)
        first = self.read(name, 0)
        if first is None:
            return None  # whatever version 1 said: no topic has the name
        nxt = second.result()
        if nxt is None:
            return first
        return self.follow(self._newest_listed(nxt))

    def _newest_listed(self, entry: TopicEntry) -> TopicEntry:
        """The newest version a LIST of the versions after ``entry`` shows, or
        ``entry``. A listing is not a snapshot: it may miss the newest, but a
        version it shows was claimed (versions are never removed), and the
        caller reads on by key from it."""
        after = topic_version_key(entry.name, entry.version)
        prefix = topic_versions_prefix(entry.name)
        listed = self._retry.call(lambda: list(self._store.list(prefix, start_after=after)))
        versions = [
            parsed[1]
            for info in listed
            if (parsed := parse_topic_listing(info.key)) is not None and parsed[0] == entry.name
        ]
        newest = max(versions, default=entry.version)
        if newest <= entry.version:
            return entry
        return self.read(entry.name, newest) or entry

    def announced(
        self, name: str, version: int, known: TopicEntry | None = None
    ) -> TopicEntry | None:
        """The latest version of ``name``, once a partition showed version
        ``version`` announced (or a client that holds ``known`` has reason to
        ask for ``version``, its next). Its changer had read ``version - 1`` as
        the latest, so that one was claimed; ``version`` may not be (its
        changer died in between). Two GETs when it was claimed and nothing
        followed, one when the caller holds the version before it; never a
        walk from version 0."""
        entry = self.read(name, version)
        if entry is not None:
            return self.follow(entry)
        if known is not None and known.version >= version - 1:
            return known
        before = self.read(name, version - 1)
        return before if before is not None else self.latest(name, known)

    def latest_topic(self, name: str, known: TopicEntry | None = None) -> Topic:
        """The latest version of ``name``, from ``known`` on (see :meth:`latest`).

        Raises:
            UnknownTopicOrPartitionError: no such topic, or it was deleted."""
        entry = self.latest(name, known)
        if entry is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        if isinstance(entry, TopicTombstone):
            raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted")
        return entry

    def claim(self, entry: TopicEntry) -> bool:
        """Put ``entry`` at its version with put-if-absent: True if it is there
        now as ours (also after a lost reply: decided by ``change_id``), False if
        another change claimed that version first.

        Raises:
            TransientStoreError: the store failed until the deadline; the
                outcome may be unknown (``maybe_applied``): read the version.
        """
        key = topic_version_key(entry.name, entry.version)
        try:
            self._put_retrying(key, entry.to_json())
            return True
        except FileExistsError:
            found = self.read(entry.name, entry.version)
            return found is not None and found.change_id == entry.change_id

    def announce(self, topic: Topic, version: int) -> None:
        """Announce ``version`` in every partition of ``topic``, before it is
        claimed (an announcement of a version that is never claimed costs the
        partition's readers one GET per sync until the next change claims it)."""

        def put(partition: int) -> None:
            key = announcement_key(topic.prefix, partition, version)
            with contextlib.suppress(FileExistsError):  # another changer announced it
                self._put_retrying(key, b'{"announces": "a new version of the topic"}')

        _each(put, range(topic.partitions))

    def _put_retrying(self, key: str, data: bytes) -> None:
        """Put-if-absent, retried while the store fails transiently: the same
        bytes at the same key land at most once, and "exists" is the caller's
        to judge."""
        sleeps = self._retry.sleeps()
        while True:
            try:
                return self._store.put_if_absent(key, data)
            except TransientStoreError:
                pause = next(sleeps, None)
                if pause is None:
                    raise
                time.sleep(pause)

    # --- the changes ----------------------------------------------------------------

    def create_partitions(self, name: str, total: int, known: TopicEntry | None = None) -> Topic:
        """Raise the partition count of ``name`` to ``total``; see
        :meth:`arrowlog.ArrowLog.create_partitions`. ``known``: a version read
        before, to read the chain from."""
        if isinstance(total, bool) or not isinstance(total, int):
            raise InvalidPartitionsError(f"the partition count must be an int, got {total!r}")
        while True:
            latest = self.latest_topic(name, known)
            if total <= latest.partitions:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {latest.partitions} partition(s); the new total "
                    f"must be more, not {total}"
                )
            if total > MAX_PARTITIONS:
                raise InvalidPartitionsError(f"a topic has at most {MAX_PARTITIONS} partitions")
            wider = dataclasses.replace(
                latest,
                partitions=total,
                version=latest.version + 1,
                change_id=uuid.uuid4().hex,
                new=False,  # InitVar: the rules of new topics are not rechecked
            )
            self.announce(latest, wider.version)
            if self.claim(wider):
                return wider
            known = latest

    def alter_config(
        self, name: str, changes: dict[str, object], known: TopicEntry | None = None
    ) -> Topic:
        """A new version of ``name`` whose config has ``changes``; see
        :meth:`arrowlog.ArrowLog.alter_topic_config`. ``known``: a version
        read before, to read the chain from."""
        unknown = sorted(set(changes) - ALTERABLE)
        if unknown or not changes:
            raise InvalidConfigError(
                f"a topic's {', '.join(sorted(ALTERABLE))} can change, not "
                f"{', '.join(unknown) or 'nothing'}"
            )
        while True:
            latest = self.latest_topic(name, known)
            config = dataclasses.replace(latest.config, **changes)  # type: ignore[arg-type]
            if config == latest.config:
                return latest
            altered = dataclasses.replace(
                latest,
                config=config,
                version=latest.version + 1,
                change_id=uuid.uuid4().hex,
                new=False,
            )
            self.announce(latest, altered.version)
            if self.claim(altered):
                return altered
            known = latest

    def delete(self, name: str) -> TopicDeletion:
        """Delete ``name``; see :meth:`arrowlog.ArrowLog.delete_topic`."""
        while True:
            entry = self.latest(name)
            if entry is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            if isinstance(entry, TopicTombstone):
                return TopicDeletion(entry, self.purge(entry), already_deleted=True)
            tombstone = TopicTombstone(
                name=name,
                version=entry.version + 1,
                incarnation=entry.incarnation,
                partitions=entry.partitions,
                change_id=uuid.uuid4().hex,
            )
            self.announce(entry, tombstone.version)
            if self.claim(tombstone):
                return TopicDeletion(tombstone, self.purge(tombstone), already_deleted=False)

    def purge(self, tombstone: TopicTombstone) -> int:
        """Remove the objects of the partitions ``tombstone`` deleted, except
        each partition's announcement of the tombstone: it tells a client that
        still holds the topic, whenever it lists the partition, that the topic
        is gone. Segments go first, checkpoints after, so that a client racing
        the removal finds a segment it knew of missing (and asks the topic)
        rather than a shorter log. Idempotent: a rerun lists again and removes
        what is left, including segments a client wrote before it learnt of
        the delete. Returns how many objects this call removed."""

        def doomed(partition: int) -> list[str]:
            prefix = f"{tombstone.prefix}/{partition}/"
            keys = [o.key for o in self._retry.call(lambda: list(self._store.list(prefix)))]
            grave = announcement_key(tombstone.prefix, partition, tombstone.version)
            return [k for k in keys if k != grave]

        removed = 0
        for partition in range(tombstone.partitions):
            keys = doomed(partition)
            _each(self._delete, [k for k in keys if "/checkpoints/" not in k])
            _each(self._delete, [k for k in keys if "/checkpoints/" in k])
            removed += len(keys)
        return removed

    def _delete(self, key: str) -> None:
        self._retry.call(lambda: self._store.delete(key))


def _each(work: Callable[[T], None], items: Sequence[T]) -> None:
    """``work`` on every item, a few at a time in parallel; the first error raises."""
    if len(items) <= 1:
        for item in items:
            work(item)
        return
    with ThreadPoolExecutor(min(_PARALLEL_DELETES, len(items))) as pool:
        for future in [pool.submit(work, item) for item in items]:
            future.result()
