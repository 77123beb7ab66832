"""The entry point: a connection to one arrowlog root in one store."""

from __future__ import annotations

import dataclasses
import functools
import threading
import time
import uuid
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import pyarrow as pa

from arrowlog import _clock
from arrowlog.admin import Admin
from arrowlog.config import LogConfig, TopicConfig
from arrowlog.errors import (
    ArrowLogError,
    InvalidConfigError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedStoreError,
)
from arrowlog.format.stats import Predicate
from arrowlog.format.topic import (
    MAX_PARTITIONS,
    TOPICS_PREFIX,
    Topic,
    TopicEntry,
    TopicTombstone,
    check_topic_name,
    checkpoint_prefix,
    parse_topic_listing,
)
from arrowlog.log.topics import TopicDeletion, TopicVersions
from arrowlog.maintenance import Maintenance
from arrowlog.partition import AppendResult, PartitionLog
from arrowlog.partition.ahead import CheckpointLookAhead
from arrowlog.producer import Producer
from arrowlog.read.consumer import Consumer
from arrowlog.read.filters import Filter
from arrowlog.read.topic_scan import Offsets, Time, TopicScan
from arrowlog.read.visibility import IsolationLevel, last_stable_offset
from arrowlog.storage import Store, at_memory_speed
from arrowlog.storage.doctor import refuse_if_judged_unsafe
from arrowlog.storage.url import open_store
from arrowlog.txn.resolver import TxnResolver


@dataclass(frozen=True, slots=True)
class _Known:
    """The latest version of a topic this client has read, and when (on
    :func:`arrowlog._clock.elapsed`: time suspended counts)."""

    entry: TopicEntry
    checked: float
    #: False if version 0 alone was read (partitions' listings tell of later ones)
    followed: bool


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """What ``describe_topic`` says of one partition."""

    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    #: objects at segment keys from the log start that no compacted object
    #: holds: segments and commit objects
    segments: int
    live_producer_ids: int
    open_transactions: int
    #: record batches from the log start: a segment's, or each staged batch a
    #: commit object names
    batches: int = 0
    #: compacted objects holding the records below the compaction mark (the
    #: segments there are read from them, and vacuum removes them)
    compacted_objects: int = 0
    #: bytes of the objects a read from the log start fetches: the compacted
    #: objects, then the objects at segment keys after them
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class TopicDescription:
    topic: Topic
    partitions: tuple[PartitionInfo, ...]


def connect(
    url: str | Store,
    storage_options: dict[str, Any] | None = None,
    *,
    config: LogConfig | None = None,
    allow_unsafe_store: bool = False,
) -> ArrowLog:
    """Connect to the arrowlog root at ``url``.

    Args:
        url: ``memory://``, ``file:///dir`` or a plain path, ``s3://bucket/prefix``;
            or an already opened :class:`~arrowlog.storage.Store`.
        storage_options: passed to the backend (for S3: ``key``, ``secret``,
            ``endpoint_url``, ``client_kwargs``; for a directory: ``fsync``).
        config: client settings (retries, read-ahead).
        allow_unsafe_store: accept a store whose put-if-absent is not atomic.

    Raises:
        UnsupportedStoreError: the store cannot do atomic put-if-absent and
            ``allow_unsafe_store`` is False, or the URL names no known store.
    """
    if isinstance(url, str):
        store = open_store(url, storage_options, allow_unsafe_store=allow_unsafe_store)
    else:
        store = url
        if not store.atomic_put_if_absent and not allow_unsafe_store:
            raise UnsupportedStoreError(
                f"{store.url} has no atomic put-if-absent; "
                "pass allow_unsafe_store=True to use it anyway"
            )
    return ArrowLog(store, config=config or LogConfig())


class ArrowLog:
    """Topics and partitions under one root, and the producers and consumers
    that use them. Thread-safe.

    Keeping the log small and operating it are objects of their own, over the
    same client: :attr:`maintenance` (compact, vacuum) and :attr:`admin`
    (transactions, producers, metrics, consumer groups' lag).
    """

    def __init__(self, store: Store, *, config: LogConfig) -> None:
        self._store = store
        self._config = config
        self._topics: dict[str, _Known] = {}
        #: (name, tombstone version) -> when (_clock.elapsed) this client first read it
        self._graves: dict[tuple[str, int], float] = {}
        self._versions = TopicVersions(store, config.retry)
        self._partitions: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.Lock()
        self.resolver = TxnResolver(store, config.retry)

    @property
    def store(self) -> Store:
        return self._store

    @property
    def config(self) -> LogConfig:
        return self._config

    @property
    def maintenance(self) -> Maintenance:
        """Compaction and vacuum of this log (:class:`arrowlog.maintenance.Maintenance`)."""
        return Maintenance(self)

    @property
    def admin(self) -> Admin:
        """Transactions, producers, metrics and groups' lag, as an operator
        sees them (:class:`arrowlog.admin.Admin`)."""
        return Admin(self)

    def __enter__(self) -> ArrowLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._store.close()

    # --- topics -------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        schema: pa.Schema,
        partitions: int = 1,
        *,
        config: TopicConfig | None = None,
        allow_unsafe_store: bool = False,
    ) -> Topic:
        """Create a topic. Exactly one of several concurrent creators succeeds.
        A name whose topic was deleted can be used again: the new topic is a new
        incarnation, whose objects never mix with the old one's. Creating it
        first waits until ``metadata_max_age_ms`` has passed since this client
        learnt of the delete (every client that held the old topic has read its
        chain again by then; :meth:`reuse_wait` says how long), and removes what
        is left of the old topic's objects. Clients sharing a bucket must not
        trust a topic longer than the one that re-creates its name: keep
        ``metadata_max_age_ms`` the same everywhere (the default is).

        A store that ``arrowlog doctor --record`` judged unsafe is refused
        (one GET of its verdict) unless ``allow_unsafe_store``.

        Raises:
            InvalidNameError: the name is not allowed.
            InvalidConfigError: bad schema, partition count or config.
            TopicExistsError: the topic exists already.
            UnsafeStoreError: the doctor's recorded verdict on the store is unsafe.
        """
        if config is not None and not isinstance(config, TopicConfig):
            raise InvalidConfigError("config must be a TopicConfig")
        if not allow_unsafe_store:
            refuse_if_judged_unsafe(self._store)
        topic = Topic(
            name=name,
            schema=schema,
            partitions=partitions,
            config=config or TopicConfig(),
            change_id=uuid.uuid4().hex,
        )
        while not self._versions.claim(topic):
            latest = self._versions.latest(name)
            if not isinstance(latest, TopicTombstone):
                raise TopicExistsError(f"topic {name!r} already exists")
            self._outlive(latest)
            after = latest.version + 1
            topic = dataclasses.replace(
                topic,
                version=after,
                incarnation=after,
                new=False,  # InitVar: checked above already
            )
        self._remember(topic)
        return topic

    def reuse_wait(self, name: str) -> float:
        """Seconds ``create_topic(name)`` would wait before it creates the name
        again (0 unless the name's topic was deleted and this client learnt of
        it less than ``metadata_max_age_ms`` ago). Reads the topic's chain."""
        latest = self._versions.latest(name)
        if not isinstance(latest, TopicTombstone):
            return 0.0
        return self._remaining_grace(latest)

    def _remaining_grace(self, tombstone: TopicTombstone) -> float:
        with self._lock:
            seen = self._graves.setdefault((tombstone.name, tombstone.version), _clock.elapsed())
        age = _clock.elapsed() - seen
        return max(0.0, self._config.metadata_max_age_ms / 1000 - age)

    def _outlive(self, tombstone: TopicTombstone) -> None:
        """Before a deleted name is created again: wait until every client
        that held the deleted topic has read its chain again (it trusts what it
        knows for ``metadata_max_age_ms``; this client saw the tombstone after
        it was claimed, so waiting that long from then outlives them all), then
        remove what is left under the old incarnation: a killed deleter's
        objects, segments acknowledged to writers that had not learnt of the
        delete. After this, no write that starts can land in the old
        incarnation, so none is acknowledged there once the name lives again."""
        time.sleep(self._remaining_grace(tombstone))
        self._versions.purge(tombstone)

    def topic(self, name: str, *, refresh: bool = False) -> Topic:
        """The definition of a topic, as this client knows it: the latest
        version when first looked up (one GET, and one more per version after
        the first), then cached.

        What a client caches can go stale, as a Kafka client's metadata does:
        it learns of more partitions or a delete when it lists one of the
        topic's partitions (opening, syncing: the change was announced there
        before it was made), when asked for a partition beyond the count it
        knows, when an object it knew of is gone, and on the first lookup
        after ``metadata_max_age_ms``. ``refresh`` reads the latest version now.

        Raises:
            UnknownTopicOrPartitionError: no such topic, or it was deleted.
        """
        return self._lookup(name, refresh=refresh, follow=True)

    def _partition_topic(self, name: str) -> Topic:
        """The topic, for using its partitions: on first lookup version 0 alone
        (one GET, as before topics had versions), because using a partition
        lists it, and the listing shows any later version."""
        return self._lookup(name, refresh=False, follow=False)

    def _lookup(self, name: str, *, refresh: bool, follow: bool) -> Topic:
        check_topic_name(name)
        with self._lock:
            known = self._topics.get(name)
        max_age = self._config.metadata_max_age_ms / 1000
        if (
            known is not None
            and not refresh
            and isinstance(known.entry, Topic)
            and (known.followed or not follow)
            and _clock.elapsed() - known.checked < max_age
        ):
            return known.entry
        # trusted from when the reads began, not ended: a client paused after
        # them must not stretch metadata_max_age_ms (re-creating a name relies on it)
        began = _clock.elapsed()
        if known is None and not refresh and not follow:
            entry, followed = self._versions.read(name, 0), False
        else:
            if known is None:
                entry = self._versions.first_look(name)
            else:
                entry = self._versions.latest(name, known.entry)
            followed = True
        return self._learnt(name, entry, followed=followed, began=began)

    def _unknown(self, name: str) -> str:
        """Why ``name`` is not found, naming the root: a wrong root (a typo in a
        path, another prefix) shows no topic at all."""
        where = f"unknown topic {name!r} at {self.store.url}"
        try:
            others = self.list_topics()
        except ArrowLogError:
            return where
        if not others:
            return f"{where}, which holds no topic: is the root right?"
        return f"{where} (it holds {', '.join(others[:5])}{', ...' if len(others) > 5 else ''})"

    def _learnt(
        self, name: str, entry: TopicEntry | None, *, followed: bool, began: float
    ) -> Topic:
        """Keep what reads that began at ``began`` found of ``name``, and
        return it as a topic.

        Raises:
            UnknownTopicOrPartitionError: no such topic, or it was deleted.
        """
        if entry is None:
            raise UnknownTopicOrPartitionError(self._unknown(name))
        entry = self._remember(entry, followed=followed, checked=began)
        if isinstance(entry, TopicTombstone):
            raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted")
        return entry

    def _remember(
        self, entry: TopicEntry, *, followed: bool = True, checked: float | None = None
    ) -> TopicEntry:
        """Keep ``entry`` unless a later version is known; return the latest."""
        with self._lock:
            known = self._topics.get(entry.name)
            if known is not None and known.entry.version > entry.version:
                return known.entry
            now = _clock.elapsed()
            self._topics[entry.name] = _Known(entry, now if checked is None else checked, followed)
            if isinstance(entry, TopicTombstone):
                self._graves.setdefault((entry.name, entry.version), now)
            return entry

    def _topic_at_least(self, name: str, version: int) -> Topic:
        """The topic, read anew unless a version at least ``version`` is known
        (a partition saw it announced, or lost an object it knew of). Read
        from ``version`` on: two GETs however long the chain before it."""
        with self._lock:
            known = self._topics.get(name)
        if known is not None and known.entry.version >= version:
            if isinstance(known.entry, TopicTombstone):
                raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted")
            return known.entry
        began = _clock.elapsed()
        entry = self._versions.announced(name, version, None if known is None else known.entry)
        return self._learnt(name, entry, followed=True, began=began)

    def _known_entry(self, name: str) -> TopicEntry | None:
        """The latest version of ``name`` this client has read, if any: a
        change reads the chain on from it."""
        check_topic_name(name)
        with self._lock:
            known = self._topics.get(name)
        return None if known is None else known.entry

    def list_topics(self) -> list[str]:
        """The topics that exist (deleted ones left out). A topic never changed
        costs nothing beyond the LIST; a changed one one GET per version after
        the newest listed (a listing is not a snapshot)."""
        newest: dict[str, int] = {}
        for info in self._config.retry.call(lambda: list(self._store.list(TOPICS_PREFIX))):
            parsed = parse_topic_listing(info.key)
            if parsed is not None:
                newest[parsed[0]] = max(newest.get(parsed[0], 0), parsed[1])
        names = []
        for name, version in newest.items():
            entry = self._versions.read(name, version) if version else None
            if entry is not None:
                entry = self._versions.follow(entry)
            if entry is None or isinstance(entry, Topic):
                names.append(name)
        return names

    def create_partitions(self, topic: str, total: int) -> Topic:
        """Raise the number of partitions of ``topic`` to ``total`` (Kafka's
        createPartitions: the new total, not the number to add). Existing
        partitions keep their records; keyed sends (``send_keyed``, Spark
        writes by key) route many keys to other partitions from then on, as in
        Kafka. Of concurrent changes, one claims each version; a call whose
        total another change reached first raises InvalidPartitionsError.

        Raises:
            InvalidPartitionsError: ``total`` is not above the current count,
                or above the limit; nothing was written.
            UnknownTopicOrPartitionError: no such topic, or it was deleted.
        """
        wider = self._versions.create_partitions(topic, total, self._known_entry(topic))
        self._remember(wider)
        return wider

    def delete_topic(self, topic: str) -> TopicDeletion:
        """Delete ``topic``: first one durable step (a tombstone version of the
        topic: from then on every client that looks sees no topic), then its
        objects. Removing them is idempotent: if this call dies, calling it
        again finishes it. Records appended by a client that had not yet learnt
        of the delete go with the topic.

        Raises:
            UnknownTopicOrPartitionError: no topic of that name ever existed.
        """
        deletion = self._versions.delete(topic)
        self._remember(deletion.tombstone)
        return deletion

    def alter_topic_config(self, topic: str, **changes: int | None) -> Topic:
        """Change ``topic``'s ``retention_ms`` and ``retention_bytes`` (None:
        no limit); the next ``maintenance.vacuum()`` applies them. A new version
        of the topic, announced in every partition as any change is.

        Raises:
            InvalidConfigError: another setting, or a bad value; nothing written.
            UnknownTopicOrPartitionError: no such topic.
        """
        altered = self._versions.alter_config(topic, dict(changes), self._known_entry(topic))
        self._remember(altered)
        return altered

    def delete_records(self, topic: str, partition: int, before_offset: int) -> int:
        """Delete the records of one partition below ``before_offset`` (Kafka's
        DeleteRecords): the log start moves there for every client at once, and
        ``maintenance.vacuum()`` removes the segments once the topic's
        ``delete_delay_ms`` has passed. Returns the new log start (it never
        moves back).

        Raises:
            OffsetOutOfRangeError: ``before_offset`` is not in ``[0, high
                watermark]``; nothing was written.
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        return self.partition(topic, partition).delete_records(before_offset)

    def describe_topic(self, name: str) -> TopicDescription:
        topic = self.topic(name, refresh=True)
        decide = self.resolver.snapshot()
        infos = []
        for log in self.iter_partitions(name):
            end, state = log.state()
            start = log.start_offset()
            mark = min(max(log.compacted_through, start), end)
            compacted = log.compacted_objects(start, mark) if mark > start else []
            objects = [o for o in log.objects(end=end) if o.end > mark]
            infos.append(
                PartitionInfo(
                    partition=log.partition,
                    log_start_offset=start,
                    high_watermark=end,
                    last_stable_offset=last_stable_offset(end, state, decide, log_start=start),
                    segments=len(objects),
                    live_producer_ids=len(state.producers),
                    open_transactions=len(state.open_txns),
                    batches=len(log.segments(end=end)),
                    compacted_objects=len(compacted),
                    bytes=sum(c.size for c in compacted) + sum(o.size for o in objects),
                )
            )
        return TopicDescription(self.topic(topic.name), tuple(infos))

    # --- partitions ---------------------------------------------------------------

    def partition(self, topic: str, partition: int) -> PartitionLog:
        """The (cached) log of one partition.

        Raises:
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        ahead = self._look_ahead(topic, partition)
        try:
            # with a look-ahead under way, the whole chain of versions too (a
            # read asks for it next): at once, as the first look at a topic does
            t = self._lookup(topic, refresh=False, follow=ahead is not None)
            if isinstance(partition, int) and partition >= t.partitions:
                t = self.topic(topic, refresh=True)  # added since we looked?
            t.check_partition(partition)
            with self._lock:
                log = self._partitions.get((topic, partition))
                if log is None or log.topic.incarnation != t.incarnation:
                    log = PartitionLog(
                        self._store,
                        t,
                        partition,
                        self._config,
                        decide=self.resolver.decide,
                        refresh_topic=functools.partial(self._topic_at_least, topic),
                        ahead=ahead,
                    )
                    self._partitions[(topic, partition)] = log
                    ahead = None
                return log
        finally:
            if ahead is not None:
                ahead.discard()

    def _look_ahead(self, topic: str, partition: int) -> CheckpointLookAhead | None:
        """The LIST of the partition's newest checkpoint, started now, when
        this client has yet to read the topic and the store is remote: it runs
        while the topic is read (see :mod:`arrowlog.partition.ahead`)."""
        if at_memory_speed(self._store):
            return None
        if isinstance(partition, bool) or not isinstance(partition, int):
            return None  # (a bool is no partition: check_partition refuses it)
        if not 0 <= partition < MAX_PARTITIONS:
            return None  # no topic has it: nothing to list
        check_topic_name(topic)  # no request for a name no topic can have
        with self._lock:
            if topic in self._topics or (topic, partition) in self._partitions:
                return None
        return CheckpointLookAhead(self._store, checkpoint_prefix(topic, partition))

    def iter_partitions(self, topic: str) -> Iterator[PartitionLog]:
        """Every partition of ``topic``, in order, including those added since
        the version this client knew: using a partition lists it, which shows
        any newer version of the topic, and the count is read again before each
        next partition."""
        p = 0
        while p < self._partition_topic(topic).partitions:
            yield self.partition(topic, p)
            p += 1

    def append(
        self,
        topic: str,
        batch: pa.RecordBatch | pa.Table,
        *,
        partition: int = 0,
        expected_offset: int | None = None,
    ) -> AppendResult:
        """Append one batch as one segment; see :meth:`PartitionLog.append`."""
        return self.partition(topic, partition).append(batch, expected_offset=expected_offset)

    def append_batches(
        self,
        topic: str,
        batches: Iterable[pa.RecordBatch | pa.Table],
        *,
        partition: int = 0,
        expected_offset: int | None = None,
    ) -> Generator[AppendResult, None, None]:
        """Append a stream of batches, one segment each, the next encoded while
        the one before is written; see :meth:`PartitionLog.append_batches`."""
        part = self.partition(topic, partition)
        return part.append_batches(batches, expected_offset=expected_offset)

    def read(
        self,
        topic: str,
        partition: int | None = None,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
        isolation_level: IsolationLevel = "read_committed",
    ) -> pa.Table:
        """The committed records of ``partition``'s offsets ``[start, end)``,
        or (None) of every partition, in partition order, as one snapshot; one
        table. With ``columns``, only those (large segments are then read
        column by column); with ``where``, only the matching rows (segments
        that cannot match are not read; see :mod:`arrowlog.format.stats`).
        ``isolation_level="read_uncommitted"`` reads the records of open and
        aborted transactions too. :meth:`scan` gives every row's partition,
        offset and time, and any Arrow engine its rows.

        Raises:
            InvalidConfigError: ``start`` or ``end`` without a partition.
            OffsetOutOfRangeError: a range outside the log, or past the last
                stable offset under read_committed.
        """
        reader = self.consumer(isolation_level=isolation_level)
        return reader.read(topic, partition, start, end, columns=columns, where=where)

    def iter_batches(
        self,
        topic: str,
        partition: int | None = None,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
        isolation_level: IsolationLevel = "read_committed",
    ) -> Generator[pa.RecordBatch, None, None]:
        """The records of :meth:`read` as a stream of record batches; ``close()``
        it to stop early."""
        reader = self.consumer(isolation_level=isolation_level)
        return reader.iter_batches(topic, partition, start, end, columns=columns, where=where)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """High watermark of every partition."""
        return {log.partition: log.end_offset() for log in self.iter_partitions(topic)}

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Log start offset of every partition."""
        return {
            log.partition: log.start_offset(refresh=True) for log in self.iter_partitions(topic)
        }

    def stable_offsets(self, topic: str) -> dict[int, int]:
        """Last stable offset (LSO) of every partition: read_committed reads end
        there."""
        consumer = self.consumer()
        decide = self.resolver.snapshot()
        return {
            log.partition: consumer.stable_offset(topic, log.partition, decide=decide)
            for log in self.iter_partitions(topic)
        }

    # --- producers and consumers --------------------------------------------------

    def producer(
        self, *, transactional_id: str | None = None, transaction_timeout_ms: int = 60_000
    ) -> Producer:
        """An idempotent producer, or a transactional one with ``transactional_id``
        (call ``init_transactions`` first)."""
        return Producer(
            self, transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms
        )

    def scan(
        self,
        topic: str,
        *,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
        metadata: bool = False,
        partitions: Iterable[int] | None = None,
        start: Offsets | None = None,
        end: Offsets | None = None,
        start_time: Time | None = None,
        end_time: Time | None = None,
        isolation_level: IsolationLevel = "read_committed",
    ) -> TopicScan:
        """The committed rows of every partition of ``topic``, as one snapshot
        taken now, for any Arrow engine: the scan exports the Arrow C stream
        (``duckdb.sql("select ... from scan")``, ``polars.from_arrow(scan)``,
        ``pa.table(scan)``) and has ``to_table()``, ``to_reader()``,
        ``to_pandas()``, ``to_polars()`` (a LazyFrame with projection and
        predicate pushdown).

        Args:
            columns: the columns of the rows, in order (the topic's, and
                ``partition``, ``offset``, ``timestamp``); None: the topic's.
            filter: a pyarrow compute expression (``pc.field("kind") ==
                "click"``) or filter tuples (``[("kind", "==", "click")]``); only
                the rows it keeps are returned. Its conjuncts on the metadata
                columns bound what is read; on the topic's columns, segments
                whose statistics prove no row matches are not fetched.
            metadata: add ``partition``, ``offset`` and ``timestamp`` (the
                append time, UTC) to the rows (``_offset`` etc. where the topic
                has a column of that name).
            partitions: only these partitions (None: every one).
            start, end: the offsets ``[start, end)`` read: one for every
                partition, or a mapping of partition to offset; by default from
                the log start to the last stable offset (read_committed) or the
                high watermark.
            start_time, end_time: start (end) at the first record appended at
                or after this time (a timezone-aware datetime, or milliseconds
                since the epoch), as Kafka's offsetsForTimes.
            isolation_level: ``read_committed``, or ``read_uncommitted`` by name
                (records of open and aborted transactions too).

        Raises:
            UnknownTopicOrPartitionError: no such topic or partition.
            UnknownColumnError: ``columns`` or a filter tuple names no column.
            InvalidConfigError: a bad filter, offset or time.
            OffsetOutOfRangeError: a range outside the log, or past the last
                stable offset under read_committed.
        """
        return TopicScan(
            self,
            topic,
            columns=columns,
            filter=filter,
            metadata=metadata,
            partitions=partitions,
            start=start,
            end=end,
            start_time=start_time,
            end_time=end_time,
            isolation_level=isolation_level,
        )

    def consumer(
        self, *, group_id: str | None = None, isolation_level: IsolationLevel = "read_committed"
    ) -> Consumer:
        """A reader at one isolation level, optionally for a consumer group."""
        return Consumer(self, group_id=group_id, isolation_level=isolation_level)
