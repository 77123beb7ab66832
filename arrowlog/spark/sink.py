"""The write side of the ``arrowlog`` Spark data source: atomic batch writes.

A write is one transaction for the whole job. The driver begins it and registers
every partition of the topic in one coordinator write; each task attempt writes
its rows as a *member* producer of that transaction (its own producer id and
sequences, the job's transactional id and epoch); the driver's commit names the
producer ids of the task attempts that succeeded. Rows written by failed or
retried attempts stay in the log but are never visible: only members commit.
With ``txnAppId`` and ``txnVersion`` (as in Delta), a job whose version was
committed already writes nothing.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.errors import InvalidConfigError
from arrowlog.producer import key_partitions
from arrowlog.producer_ids import allocate_producer_id
from arrowlog.scan import METADATA_COLUMNS
from arrowlog.segment import WriterIdentity, empty_batch
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.source import arrow_schema
from arrowlog.topic import not_null_violations


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
        topic = log.topic(options.topic)
        # A DataFrame whose columns cannot fit the topic fails here, before the
        # transaction begins: nothing at all is written for it.
        _conform(empty_batch(arrow_schema(schema)), topic)
        if options.key_column is not None and options.key_column not in schema.names:
            raise InvalidConfigError(
                f"keyColumn {options.key_column!r} is not a column of the DataFrame"
            )
        self.partitions = topic.partitions
        self.transactional_id = f"spark.{options.app_id or uuid.uuid4().hex}"
        producer = log.producer(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=options.transaction_timeout_ms,
        )
        producer.init_transactions()  # fences (and aborts) an earlier attempt of this job
        done = producer.last_committed_metadata.get("txnVersion")
        self.skip = (
            options.app_version is not None
            and done is not None
            and int(done) >= options.app_version
        )
        self.epoch = producer.epoch
        if not self.skip:
            producer.begin_transaction()
            producer.add_partitions((options.topic, p) for p in range(topic.partitions))

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:  # type: ignore[override]
        o = self.options
        log = arrowlog.connect(o.root, o.storage)
        if self.skip:
            for _ in iterator:  # this version is committed: write nothing
                pass
            return TaskCommit(producer_id=-1)
        topic = log.topic(o.topic)
        pid = allocate_producer_id(log, self.transactional_id)
        from pyspark import TaskContext

        context = TaskContext.get()
        default_partition = (context.partitionId() if context else 0) % topic.partitions
        sequences: dict[int, int] = {}
        pending: dict[int, list[pa.RecordBatch]] = {}
        counts: dict[int, int] = {}
        rows = 0

        def flush(p: int) -> None:
            batches = pending.pop(p, [])
            counts[p] = 0
            if not batches:
                return
            table = pa.Table.from_batches(batches).combine_chunks()
            who = WriterIdentity(
                producer_id=pid,
                producer_epoch=self.epoch,
                base_sequence=sequences.get(p, 0),
                transactional=True,
                transactional_id=self.transactional_id,
            )
            log.partition(o.topic, p).append(table, identity=who)
            sequences[p] = sequences.get(p, 0) + table.num_rows

        for batch in iterator:
            for p, part in split_by_partition(batch, topic, o.key_column, default_partition):
                pending.setdefault(p, []).append(part)
                counts[p] = counts.get(p, 0) + part.num_rows
                rows += part.num_rows
                if counts[p] >= o.rows_per_batch:
                    flush(p)
        for p in list(pending):
            flush(p)
        return TaskCommit(producer_id=pid, rows=rows, partitions=sorted(sequences))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.skip:
            return
        members = [m.producer_id for m in messages if isinstance(m, TaskCommit)]
        producer = self._resume()
        metadata = None
        if self.options.app_version is not None:
            metadata = {"txnVersion": str(self.options.app_version)}
        producer.commit_transaction(members=members, metadata=metadata)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Not a reliable cleanup (a task may still write after it): nothing needs
        # it to be. Aborting only releases the LSO at once instead of at expiry.
        if self.skip:
            return
        with contextlib.suppress(arrowlog.ArrowLogError):
            self._resume().abort_transaction()

    def _resume(self) -> arrowlog.Producer:
        o = self.options
        producer = arrowlog.connect(o.root, o.storage).producer(
            transactional_id=self.transactional_id
        )
        producer.resume_transaction(self.epoch)
        return producer


def split_by_partition(
    batch: pa.RecordBatch, topic: arrowlog.Topic, key_column: str | None, default: int
) -> Iterator[tuple[int, pa.RecordBatch]]:
    """Route rows to partitions: by a ``partition`` column (when the topic has no
    column of that name), by a hash of ``key_column`` (CRC32C of the value's text,
    as ``Producer.send_keyed``), or all to ``default``. Metadata columns that the
    topic does not have (from a DataFrame read from arrowlog) are dropped."""
    names = set(topic.schema.names)
    targets: list[int] | None = None
    if "partition" in batch.schema.names and "partition" not in names:
        # a null partition is out of range like any other bad value
        targets = [-1 if v is None else int(v) for v in batch.column("partition").to_pylist()]
    elif key_column is not None:
        if key_column not in batch.schema.names:
            raise InvalidConfigError(f"keyColumn {key_column!r} is not a column of the DataFrame")
        targets = key_partitions(batch.column(key_column).to_pylist(), topic.partitions)
    data = _conform(batch, topic)
    if targets is None:
        yield default, data
        return
    rows: dict[int, list[int]] = {}
    for i, p in enumerate(targets):
        rows.setdefault(p, []).append(i)
    for p, indices in sorted(rows.items()):
        if not 0 <= p < topic.partitions:
            raise arrowlog.UnknownTopicOrPartitionError(
                f"column partition has value {p}, outside 0..{topic.partitions - 1} "
                f"of topic {topic.name!r}"
            )
        yield p, data.take(pa.array(indices, pa.int64()))


def _conform(batch: pa.RecordBatch, topic: arrowlog.Topic) -> pa.RecordBatch:
    """The topic's columns of ``batch``, cast to the topic's types (Spark's Arrow
    types differ in width and nullability flags, never in values)."""
    schema = topic.schema
    missing = [n for n in schema.names if n not in batch.schema.names]
    if missing:
        raise arrowlog.SchemaMismatchError(
            f"the DataFrame lacks columns {missing} of topic {topic.name!r}"
        )
    extra = [n for n in batch.schema.names if n not in schema.names and n not in METADATA_COLUMNS]
    if extra:
        raise arrowlog.SchemaMismatchError(
            f"the DataFrame has columns {extra} that topic {topic.name!r} does not"
        )
    columns = []
    for f in schema:
        column = batch.column(f.name)
        try:
            columns.append(column.cast(f.type))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise arrowlog.SchemaMismatchError(
                f"column {f.name!r} ({column.type}) cannot become {f.type}: {e}"
            ) from e
    data = pa.RecordBatch.from_arrays(columns, schema=schema)
    # the same check as every append, here too for streaming writes, which stage
    # their rows and append them only in the driver's commit
    problems = not_null_violations(schema, data)
    if problems:
        raise arrowlog.SchemaMismatchError(f"topic {topic.name!r}: " + "; ".join(problems))
    return data


__all__ = ["ArrowLogWriter", "TaskCommit", "split_by_partition"]
