"""The ``arrowlog`` Spark data source: batch reads and atomic batch writes.

Reads plan on the driver (:func:`arrowlog.scan.plan_scan`: a consistent snapshot
of every partition, each transaction decided once) and read on the executors,
which fetch the planned segments by key and yield Arrow record batches.

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
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.errors import InvalidConfigError
from arrowlog.producer import key_partitions
from arrowlog.producer_ids import allocate_producer_id
from arrowlog.scan import (
    METADATA_COLUMNS,
    ScanTask,
    metadata_names,
    output_schema,
    plan_scan,
    read_task,
)
from arrowlog.segment import WriterIdentity, empty_batch
from arrowlog.spark.options import ReadOptions, WriteOptions
from arrowlog.spark.planning import (
    ending_offsets,
    split_tasks,
    starting_offsets,
    subscribed_partitions,
    subscribed_topics,
)
from arrowlog.storage.url import open_store
from arrowlog.topic import not_null_violations


class ArrowLogDataSource(DataSource):
    """``spark.read.format("arrowlog")`` / ``df.write.format("arrowlog")``."""

    @classmethod
    def name(cls) -> str:
        return "arrowlog"

    def schema(self) -> StructType:
        # Spark asks for the schema of batch and streaming reads alike.
        opts = ReadOptions.parse(self.options, streaming=None)
        log = arrowlog.connect(opts.root, opts.storage)
        topics = subscribed_topics(log, opts)
        arrow = output_schema(log.topic(topics[0]).schema)
        spark_schema: StructType = from_arrow_schema(arrow)
        return spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        options = ReadOptions.parse(self.options)
        if planning_with_pushdown():
            return ArrowLogFilteringReader(options, schema)
        return ArrowLogReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> ArrowLogWriter:
        if overwrite:
            raise InvalidConfigError("arrowlog is a log: only mode('append') is supported")
        return ArrowLogWriter(WriteOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        from arrowlog.spark.streaming import ArrowLogStreamReader

        return ArrowLogStreamReader(ReadOptions.parse(self.options, streaming=True), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        from arrowlog.spark.streaming import ArrowLogStreamWriter

        if overwrite:
            raise InvalidConfigError("arrowlog is a log: only append output is supported")
        return ArrowLogStreamWriter(WriteOptions.parse(self.options, streaming=True), schema)


# --- reading -----------------------------------------------------------------------


class _Partition(InputPartition):
    def __init__(self, task: ScanTask | None) -> None:
        super().__init__(task)
        self.task = task


# Spark plans a read in one of two Python workers: this one when
# spark.sql.python.filterPushdown.enabled is true (it calls pushFilters), the
# plain planner otherwise, which refuses every reader that overrides pushFilters
# (DATA_SOURCE_PUSHDOWN_DISABLED). The flag itself never reaches Python, but the
# worker module does: the daemon imports it by name, or it runs as __main__.
PUSHDOWN_PLANNER = "pyspark.sql.worker.data_source_pushdown_filters"


def planning_with_pushdown() -> bool:
    """Whether this process is Spark's filter-pushdown planner. Were Spark to move
    the module, pushdown would silently stop (reads stay correct: Spark applies
    every filter itself), and the test that counts planned tasks would fail."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    return PUSHDOWN_PLANNER in sys.modules or name == PUSHDOWN_PLANNER


class ArrowLogReader(DataSourceReader):
    """A batch read: planned on the driver, read by the executors. This class does
    not push filters, so that reads work in a default session."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self.partition_numbers: set[int] | None = None
        self.min_offset: int | None = None
        self.max_offset: int | None = None
        self.min_timestamp_us: int | None = None
        self.max_timestamp_us: int | None = None

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        log = arrowlog.connect(o.root, o.storage)
        topics = subscribed_topics(log, o)
        every = subscribed_partitions(log, o, topics)
        numbers = self.partition_numbers
        chosen = {tp for tp in every if numbers is None or tp[1] in numbers}
        plan = plan_scan(
            log,
            topics,
            starting=starting_offsets(log, o, every),
            ending=ending_offsets(log, o, every),
            isolation_level=o.isolation_level,
            fail_on_data_loss=o.fail_on_data_loss,
            partitions=chosen,
            min_offset=self.min_offset,
            max_offset=self.max_offset,
            min_timestamp_us=self.min_timestamp_us,
            max_timestamp_us=self.max_timestamp_us,
            target_bytes=o.target_bytes,
        )
        tasks = split_tasks(plan.tasks, o.min_partitions)
        return [_Partition(task) for task in tasks] or [_Partition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, self.schema, partition)


class ArrowLogFilteringReader(ArrowLogReader):
    """The reader Spark's pushdown planner gets: filters on ``partition``,
    ``offset`` and ``timestamp`` become part of the plan."""

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        """Take filters on ``partition``, ``offset`` and ``timestamp`` into the plan
        (exactly), so whole segments are never fetched; hand every other filter
        back."""
        names = metadata_names(_topic_columns(self.schema))
        for f in filters:
            path: tuple[str, ...] = getattr(f, "attribute", ())
            column = path[0] if len(path) == 1 else None
            if column == names["partition"] and isinstance(f, EqualTo | In):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                wanted = {int(v) for v in values}
                numbers = self.partition_numbers
                self.partition_numbers = wanted if numbers is None else numbers & wanted
            elif column == names["offset"] and isinstance(
                f, EqualTo | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual
            ):
                low, high = _bounds(f)
                if low is not None:
                    self.min_offset = low if self.min_offset is None else max(self.min_offset, low)
                if high is not None:
                    self.max_offset = (
                        high if self.max_offset is None else min(self.max_offset, high)
                    )
            elif column == names["timestamp"] and isinstance(
                f, EqualTo | GreaterThan | GreaterThanOrEqual | LessThan | LessThanOrEqual
            ):
                low, high = _bounds(f, to_int=_micros)
                if low is not None:
                    self.min_timestamp_us = max(low, self.min_timestamp_us or low)
                if high is not None:
                    self.max_timestamp_us = min(high, self.max_timestamp_us or high)
            else:
                yield f


def read_partition(
    options: ReadOptions, schema: StructType, partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    """Executor side of a batch or streaming read: the store is opened here."""
    assert isinstance(partition, _Partition)
    if partition.task is None:
        return
    store = open_store(options.root, options.storage)
    try:
        yield from read_task(store, partition.task, arrow_schema(schema))
    finally:
        store.close()


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects for ``schema``."""
    result: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    return result


def _topic_columns(schema: StructType) -> pa.Schema:
    arrow = arrow_schema(schema)
    return pa.schema(list(arrow)[: len(arrow) - len(METADATA_COLUMNS)])


def _micros(value: Any) -> int:
    """A Spark timestamp filter value (a datetime) as microseconds since the epoch."""
    import datetime

    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return int((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    return int(value)


def _bounds(f: Filter, to_int: Callable[[Any], int] = int) -> tuple[int | None, int | None]:
    """Inclusive integer bounds of a comparison filter."""
    value = to_int(f.value)  # type: ignore[attr-defined]
    if isinstance(f, EqualTo):
        return value, value
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value - 1
    return None, value


# --- writing -----------------------------------------------------------------------


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


__all__ = [
    "ArrowLogDataSource",
    "ArrowLogFilteringReader",
    "ArrowLogReader",
    "ArrowLogWriter",
    "TaskCommit",
]
