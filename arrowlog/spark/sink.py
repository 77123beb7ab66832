"""The write side of the ``arrowlog`` Spark data source: atomic batch writes.

A write is one transaction for the whole job (:mod:`arrowlog.txn.distributed`). The
driver begins it, with no partition yet; each task attempt registers the
partitions it is about to write to, then writes its rows as a *member* producer
of that transaction (its own producer id and sequences, the job's transactional
id and epoch); the driver's commit names the producer ids of the task attempts
that succeeded. Rows written by failed or retried attempts stay in the log but
are never visible: only members commit. Markers go only to partitions some
attempt wrote to.

Idempotence keys (as in Delta): options ``txnAppId`` and ``txnVersion``, or else
the session's ``spark.arrowlog.write.txnAppId`` / ``.txnVersion`` through
:func:`save` (a Python data source cannot read the session's configuration: see
docs/spark.md). A keyed job uses one transactional id per topic and
``txnAppId`` (:func:`~arrowlog.spark.options.app_transactional_id`); a version
committed already makes the job a no-op that writes nothing at all, not even a
coordinator entry, so it never fences a newer version running meanwhile.
A job without keys takes an idle transactional id from a small pool
(``spark-jobs.<n>``) instead of leaving a new one behind per job.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.pandas.types import to_arrow_type
from pyspark.sql.types import ArrayType, DataType, MapType, NullType, StructType

import arrowlog
from arrowlog.errors import (
    ConcurrentTransactionsError,
    InvalidConfigError,
    InvalidTransactionTimeoutError,
    ProducerFencedError,
)
from arrowlog.format.segment import WriterIdentity, empty_batch
from arrowlog.spark.conform import conform
from arrowlog.spark.options import (
    SESSION_APP_ID,
    SESSION_VERSION,
    WriteOptions,
    app_transactional_id,
)
from arrowlog.spark.schema import arrow_schema
from arrowlog.spark.writing import (
    compact_after_commit,
    is_done,
    keyed_transactional_id,
    last_version,
    route,
    segment_budget,
    version_of,
    within_bytes,
)
from arrowlog.txn.coordinator import CoordinatorLog, TxnEntry, TxnState
from arrowlog.txn.distributed import begin_after, begin_pooled, join_partitions
from arrowlog.txn.finish import fence_and_recover, finish
from arrowlog.txn.producer_ids import allocate_producer_id

#: transactional ids of writes without idempotence keys: ``spark-jobs.0``, ...
#: (``spark-`` so that no keyed job's ``spark.write...`` can be one of them)
POOL_PREFIX = "spark-jobs"
#: a commit that lost its coordinator entry to a late member registering a
#: partition resumes and tries again this many times
_COMMIT_ATTEMPTS = 5


def committed_version(log: arrowlog.ArrowLog, topic: str, app_id: str) -> int | None:
    """The last ``txnVersion`` committed by Spark writes to ``topic`` with
    ``txnAppId`` = ``app_id``, or None. Reads only: call it before building a
    DataFrame to skip work a rerun would throw away (:func:`save` does).

    Raises:
        InvalidConfigError: ``app_id`` cannot name a job (see
            :func:`~arrowlog.spark.options.app_transactional_id`).
        UnknownTopicOrPartitionError: no such topic.
    """
    return last_version(log, keyed_transactional_id(log, topic, app_id))


def save(df: Any, path: str, options: Mapping[str, str]) -> bool:
    """``df.write.format("arrowlog").mode("append").options(**options).save(path)``
    with Delta's idempotence keys: options ``txnAppId`` and ``txnVersion``, or
    else the session's ``spark.arrowlog.write.txnAppId`` and
    ``spark.arrowlog.write.txnVersion`` (options win when both are set). If that
    version was committed already, returns False at once: the DataFrame is not
    computed. Returns True after a write.

    Raises:
        InvalidConfigError: only one of a pair of keys is set, or another option
            is malformed (before anything runs).
    """
    merged = dict(options)
    for key in (SESSION_APP_ID, SESSION_VERSION):
        value = df.sparkSession.conf.get(key, None)
        if value is not None:
            merged.setdefault(key, value)
    parsed = WriteOptions.parse({**merged, "path": path})
    if parsed.app_id is not None:
        log = arrowlog.connect(parsed.root, parsed.storage)
        if is_done(committed_version(log, parsed.topic, parsed.app_id), parsed.app_version):
            return False
    df.write.format("arrowlog").mode("append").options(**merged).save(path)
    return True


@dataclass
class TaskCommit(WriterCommitMessage):
    """What one successful task attempt wrote."""

    producer_id: int
    rows: int = 0
    partitions: list[int] = field(default_factory=list)


class ArrowLogWriter(DataSourceArrowWriter):
    """Created on the driver: begins the job's transaction (or sees that its
    version was committed already); pickled to every task and to the commit."""

    def __init__(self, options: WriteOptions, schema: StructType) -> None:
        self.options = options
        log = arrowlog.connect(options.root, options.storage)
        # before the transaction begins: nothing at all is written for a write refused
        topic = checked_topic(log, options, schema)
        self.skip = False
        self.epoch = -1
        if options.app_id is None:
            begun = begin_pooled(log, POOL_PREFIX, timeout_ms=options.transaction_timeout_ms)
            self.transactional_id = begun.transactional_id
            self.epoch = begun.producer_epoch
            return
        self.transactional_id = app_transactional_id(
            options.topic, options.app_id, incarnation=topic.incarnation
        )
        version = options.app_version

        def done(entry: TxnEntry) -> bool:
            return is_done(version_of(entry.metadata), version)

        # Fences (and aborts) an earlier attempt of this version, or rolls it
        # forward if it got past PREPARE_COMMIT: then this one has nothing to do.
        # Nothing is written if the entry it would replace says this version is
        # done: fencing then would abort a newer version running now. The check
        # is on that very entry, not on an earlier read, so a commit of this
        # version and the begin of a newer one between the two cannot slip past.
        coordinator = CoordinatorLog(log.store, self.transactional_id, log.config.retry)
        recovered = fence_and_recover(log, coordinator, reason="init", unless=done)
        if recovered is None:
            # Done already. If the commit that did it died past PREPARE_COMMIT,
            # roll it forward (markers, COMPLETE): nobody else would until a
            # newer version or its expiry. Writing after a prepared entry
            # fences no one: no transaction can run past an undecided one.
            latest = coordinator.latest()
            if latest is not None and latest.state.is_prepared:
                finish(log, coordinator, latest, reason="init")
            self.skip = True
            return
        if done(recovered):  # the fence rolled this very version forward
            self.skip = True
            return
        # Begin right after our own fence, or not at all: another driver may have
        # committed this version (or a newer one) since, and a begin on top of
        # that would write this version twice (or record an older version last).
        started = begin_after(coordinator, recovered, timeout_ms=options.transaction_timeout_ms)
        if started is None:
            latest = coordinator.latest()
            if latest is not None and done(latest):
                self.skip = True
                return
            raise ConcurrentTransactionsError(
                f"another write with txnAppId {options.app_id!r} began at the same moment"
            )
        self.epoch = started.producer_epoch

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:  # type: ignore[override]
        o = self.options
        if self.skip:
            return TaskCommit(producer_id=-1)  # committed already: not a row is read
        _refuse_unseen_session_keys(o)
        log = arrowlog.connect(o.root, o.storage)
        topic = log.topic(o.topic)
        pid = allocate_producer_id(log, self.transactional_id)
        from pyspark import TaskContext

        context = TaskContext.get()
        default_partition = (context.partitionId() if context else 0) % topic.partitions
        sequences: dict[int, int] = {}
        pending: dict[int, list[pa.RecordBatch]] = {}
        counts: dict[int, int] = {}  # rows pending, by partition
        sizes: dict[int, int] = {}  # their bytes
        joined: set[int] = set()
        rows = 0
        budget = segment_budget(topic)

        def flush(partitions: list[int]) -> None:
            # Each segment's rows are conformed to the topic once, as a whole (not
            # batch by batch as Spark hands them over), and all of them before
            # anything is registered or written, so that bad rows fail the task
            # with nothing written for them.
            ready = []
            for p in partitions:
                batches = pending.pop(p, [])
                counts[p] = sizes[p] = 0
                if not batches:
                    continue
                # one batch, unless a string or binary column passes 2 GiB (its
                # offsets are 32-bit): then a segment per batch, none dropped
                combined = pa.Table.from_batches(batches).combine_chunks().to_batches()
                for b in combined:
                    # cut again once cast: a cast can widen the rows (int8 to
                    # int64 is eight times the bytes)
                    if b.num_rows:
                        ready += [(p, piece) for piece in within_bytes(conform(b, topic), budget)]
            # registered before anything is written there, all new ones at once
            new = sorted({p for p, _ in ready if p not in joined})
            if new:
                join_partitions(log, self.transactional_id, self.epoch, [(o.topic, p) for p in new])
                joined.update(new)
            for p, data in ready:
                who = WriterIdentity(
                    producer_id=pid,
                    producer_epoch=self.epoch,
                    base_sequence=sequences.get(p, 0),
                    transactional=True,
                    transactional_id=self.transactional_id,
                )
                log.partition(o.topic, p).append(data, identity=who)
                sequences[p] = sequences.get(p, 0) + data.num_rows

        for batch in iterator:
            for p, routed in route(batch, topic, o.key_column, default_partition):
                for part in within_bytes(routed, budget):
                    if sizes.get(p, 0) + part.nbytes > budget:
                        flush([p])  # the rows pending, before these take it past
                    pending.setdefault(p, []).append(part)
                    counts[p] = counts.get(p, 0) + part.num_rows
                    sizes[p] = sizes.get(p, 0) + part.nbytes
                    rows += part.num_rows
                    if counts[p] >= o.rows_per_batch or sizes[p] >= budget:
                        flush([p])
        flush(sorted(pending))
        return TaskCommit(producer_id=pid, rows=rows, partitions=sorted(sequences))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip:
            return
        members = [m.producer_id for m in messages if isinstance(m, TaskCommit)]
        self.job().commit(members)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if not self.skip:
            self.job().abort()

    def job(self) -> JobTransaction:
        """The job's transaction, as the driver commits or aborts it."""
        return JobTransaction(self.options, self.transactional_id, self.epoch)


@dataclass(frozen=True)
class JobTransaction:
    """A batch write's transaction, begun by :class:`ArrowLogWriter`, as its
    driver ends it once the tasks have run."""

    options: WriteOptions
    transactional_id: str
    epoch: int

    def commit(self, members: list[int]) -> None:
        """Commit the batches of the producers ``members`` (the task attempts
        that succeeded), with the job's ``txnVersion``; then compact if asked."""
        metadata = None
        if self.options.app_version is not None:
            metadata = {"txnVersion": str(self.options.app_version)}
        for attempt in range(_COMMIT_ATTEMPTS):
            try:
                with self._resume() as producer:  # close waits for the markers
                    producer.commit_transaction(members=members, metadata=metadata)
                compact_after_commit(self.options)
                return
            except ProducerFencedError:
                # A late attempt of a failed task may register a partition just
                # as the commit writes its entry; the transaction is still ours
                # then: resume it as it is now and commit again.
                if attempt + 1 == _COMMIT_ATTEMPTS or not self._still_running():
                    raise

    def abort(self) -> None:
        """Abort, if it still runs. Not a reliable cleanup (a task may still
        write after it): nothing needs it to be. Aborting only releases the LSO
        at once instead of at expiry."""
        for attempt in range(_COMMIT_ATTEMPTS):
            try:
                with self._resume() as producer:
                    producer.abort_transaction()
                return
            except ProducerFencedError:
                # as in commit: a late attempt of a task registered a partition
                # just as the abort wrote its entry; the transaction is still ours
                if attempt + 1 == _COMMIT_ATTEMPTS or not self._still_running():
                    return
            except arrowlog.ArrowLogError:
                return

    def _resume(self) -> arrowlog.Producer:
        o = self.options
        producer = arrowlog.connect(o.root, o.storage).producer(
            transactional_id=self.transactional_id
        )
        producer.resume_transaction(self.epoch)
        return producer

    def _still_running(self) -> bool:
        o = self.options
        log = arrowlog.connect(o.root, o.storage)
        latest = CoordinatorLog(log.store, self.transactional_id, log.config.retry).latest()
        return (
            latest is not None
            and latest.state is TxnState.ONGOING
            and latest.txn_epoch == self.epoch
            and latest.producer_epoch == self.epoch
        )


def checked_topic(
    log: arrowlog.ArrowLog, options: WriteOptions, schema: StructType
) -> arrowlog.Topic:
    """The topic a write of a DataFrame of Spark's ``schema`` with ``options``
    appends to, checked on the driver: a DataFrame whose columns cannot fit
    the topic, or that lacks the key column, is refused before any task runs.

    Raises:
        UnknownTopicOrPartitionError: no such topic.
        SchemaMismatchError: the DataFrame's columns do not fit the topic's.
        InvalidConfigError: keyColumn is not a column of the DataFrame.
        InvalidTransactionTimeoutError: transactionTimeoutMs is above the topic's limit.
    """
    topic = log.topic(options.topic)
    conform(_empty_spark_batch(schema), topic)
    if options.key_column is not None and options.key_column not in schema.names:
        raise InvalidConfigError(
            f"keyColumn {options.key_column!r} is not a column of the DataFrame"
        )
    limit = topic.config.max_transaction_timeout_ms
    if options.transaction_timeout_ms > limit:
        raise InvalidTransactionTimeoutError(
            f"transactionTimeoutMs {options.transaction_timeout_ms} is above topic "
            f"{topic.name!r}'s max_transaction_timeout_ms {limit}"
        )
    return topic


def _empty_spark_batch(schema: StructType) -> pa.RecordBatch:
    """A batch of no rows of Spark's ``schema`` as Spark hands it to a writer
    (timestamps in UTC). pyspark's own conversion refuses a NullType where
    nulls are not allowed, and Spark's empty ``array()`` and ``map()`` literals
    have one there (``array<void>``: an empty list has no element to be null):
    such parts are built of their children instead (their nullability flags
    do not matter to the casts they are checked with)."""
    if not any(_has_void(f.dataType) for f in schema.fields):
        return empty_batch(arrow_schema(schema))
    columns = [_empty_column(f.dataType) for f in schema.fields]
    return pa.RecordBatch.from_arrays(columns, names=schema.names)


def _empty_column(kind: DataType) -> Any:
    """(Typed Any: pyarrow's stubs know no nested array built of untyped parts.)"""
    if not _has_void(kind):
        return pa.array([], to_arrow_type(kind, timezone="UTC"))
    start = pa.array([0], pa.int32())
    nested: Any = pa
    if isinstance(kind, ArrayType):
        return nested.ListArray.from_arrays(start, _empty_column(kind.elementType))
    if isinstance(kind, MapType):
        keys, values = _empty_column(kind.keyType), _empty_column(kind.valueType)
        return nested.MapArray.from_arrays(start, keys, values)
    if isinstance(kind, StructType):
        children = [_empty_column(f.dataType) for f in kind.fields]
        return nested.StructArray.from_arrays(children, names=kind.names)
    return pa.nulls(0)


def _has_void(kind: DataType) -> bool:
    if isinstance(kind, ArrayType):
        return _has_void(kind.elementType)
    if isinstance(kind, MapType):
        return _has_void(kind.keyType) or _has_void(kind.valueType)
    if isinstance(kind, StructType):
        return any(_has_void(f.dataType) for f in kind.fields)
    return isinstance(kind, NullType)


def _refuse_unseen_session_keys(options: WriteOptions) -> None:
    """Session configuration reaches the tasks (Spark hands them the session's
    settings) but not ``DataSource.writer()``, where the keys decide the job's
    transaction. A session key the writer never saw would silently make a rerun
    write twice: refuse the job instead, before a row is written."""
    if options.app_id is not None:
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is None:
        return
    seen = [k for k in (SESSION_APP_ID, SESSION_VERSION) if context.getLocalProperty(k)]
    if seen:
        raise InvalidConfigError(
            f"session configuration {', '.join(seen)} is set, but df.write.format('arrowlog') "
            "cannot read it (Spark passes a Python data source only its options): write with "
            "arrowlog.spark.sink.save(df, path, options), or pass options txnAppId and txnVersion"
        )


__all__ = [
    "POOL_PREFIX",
    "ArrowLogWriter",
    "JobTransaction",
    "TaskCommit",
    "committed_version",
    "save",
]
