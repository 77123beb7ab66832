"""The ``arrowlog`` Spark data source: batch reads and atomic batch writes.

Reads plan on the driver (:func:`arrowlog.read.scan.plan_scan`: a consistent snapshot
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

import sys
from collections.abc import Callable, Iterator, Sequence
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
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.errors import ArrowLogError, InvalidConfigError, SchemaMismatchError
from arrowlog.format.stats import Predicate, check_predicates
from arrowlog.partition import projected
from arrowlog.read.scan import (
    METADATA_COLUMNS,
    ScanTask,
    metadata_names,
    output_schema,
    plan_scan,
    read_task,
)
from arrowlog.spark.options import ReadOptions, WriteOptions
from arrowlog.spark.planning import (
    ending_offsets,
    split_tasks,
    starting_offsets,
    subscribed_partitions,
    subscribed_topics,
)
from arrowlog.storage.url import open_store


class ArrowLogDataSource(DataSource):
    """``spark.read.format("arrowlog")`` / ``df.write.format("arrowlog")``."""

    @classmethod
    def name(cls) -> str:
        return "arrowlog"

    def schema(self) -> StructType:
        # Spark asks for the schema of batch and streaming reads alike.
        opts = ReadOptions.parse(self.options, streaming=None)
        return read_schema(arrowlog.connect(opts.root, opts.storage), opts)

    def reader(self, schema: StructType) -> DataSourceReader:
        options = ReadOptions.parse(self.options)
        if planning_with_pushdown():
            return ArrowLogFilteringReader(options, schema)
        return ArrowLogReader(options, schema)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceArrowWriter:
        from arrowlog.spark.sink import ArrowLogWriter

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


def read_schema(log: arrowlog.ArrowLog, options: ReadOptions) -> StructType:
    """The schema Spark reads ``options``' topics with (the first topic's columns
    as ``columns`` picks them, widened where Spark has no type, and the metadata
    columns).

    Raises:
        UnknownTopicOrPartitionError: no such topic.
        SchemaMismatchError: a column type Spark cannot read in any form.
    """
    topics = subscribed_topics(log, options)
    return spark_read_schema(projected(log.topic(topics[0]).schema, options.columns))


def spark_read_schema(columns: pa.Schema) -> StructType:
    """The schema Spark reads a topic's ``columns`` with: widened where Spark
    has no type, followed by the metadata columns.

    Raises:
        SchemaMismatchError: a column type Spark cannot read in any form.
    """
    arrow = output_schema(columns)
    readable = pa.schema([f.with_type(spark_arrow_type(f.name, f.type)) for f in arrow])
    spark_schema: StructType = from_arrow_schema(readable)
    return spark_schema


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
        # filters on data columns: segments their statistics rule out are not
        # planned (Spark still applies the filters to the rows)
        self.where: list[Predicate] = []

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        return self.partitions_of(arrowlog.connect(o.root, o.storage))

    def partitions_of(self, log: arrowlog.ArrowLog) -> list[InputPartition]:
        """The read's tasks, planned through ``log`` (a client of the read's root)."""
        o = self.options
        topics = subscribed_topics(log, o)
        every = subscribed_partitions(log, o, topics)
        numbers = self.partition_numbers
        # the filters pick rows of the read's snapshot, never where it ends
        kept = None if numbers is None else {tp for tp in every if tp[1] in numbers}
        schema = log.topic(topics[0]).schema
        target = o.target_bytes
        if o.columns is not None:  # a task reads about its columns' share of the bytes
            target = max(1, target * len(schema) // len(o.columns))
        plan = plan_scan(
            log,
            topics,
            starting=starting_offsets(log, o, every),
            ending=ending_offsets(log, o, every),
            isolation_level=o.isolation_level,
            fail_on_data_loss=o.fail_on_data_loss,
            partitions=set(every),
            keep_partitions=kept,
            min_offset=self.min_offset,
            max_offset=self.max_offset,
            min_timestamp_us=self.min_timestamp_us,
            max_timestamp_us=self.max_timestamp_us,
            target_bytes=target,
            where=_usable(schema, self.where),
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
        back. Comparisons, IN and null tests on a data column also leave out the
        segments whose column statistics rule them out, and go back to Spark
        too (the statistics decide segments, not rows)."""
        data = _topic_columns(self.schema)
        names = metadata_names(data)
        for f in filters:
            predicate = _predicate(f, data.names)
            if predicate is not None:
                self.where.append(predicate)
            path: tuple[str, ...] = getattr(f, "attribute", ())
            column = path[0] if len(path) == 1 else None
            if column == names["partition"] and isinstance(f, EqualTo | In):
                values = {f.value} if isinstance(f, EqualTo) else set(f.value)
                # a null is equal to nothing: `partition IN (0, NULL)` keeps 0 only
                wanted = {int(v) for v in values if v is not None}
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
                if low is not None:  # 0 (the epoch) is a bound like any other
                    low_us = self.min_timestamp_us
                    self.min_timestamp_us = low if low_us is None else max(low_us, low)
                if high is not None:
                    high_us = self.max_timestamp_us
                    self.max_timestamp_us = high if high_us is None else min(high_us, high)
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
        yield from read_task(store, partition.task, arrow_schema(schema), options.columns)
    finally:
        store.close()


#: Arrow types Spark has no type for, read as the narrowest that holds every
#: value (the reader casts each batch to the schema Spark was given)
_SPARK_WIDER: dict[pa.DataType, pa.DataType] = {
    pa.uint8(): pa.int16(),
    pa.uint16(): pa.int32(),
    pa.uint32(): pa.int64(),
    pa.uint64(): pa.decimal128(20, 0),
    pa.float16(): pa.float32(),
    pa.date64(): pa.date32(),
}


def spark_arrow_type(name: str, t: pa.DataType) -> pa.DataType:
    """``t`` as a type Spark reads (unsigned integers, half floats and
    date64 widened, inside lists, maps and structs too).

    Raises:
        SchemaMismatchError: a type Spark cannot read in any form.
    """
    if t in _SPARK_WIDER:
        return _SPARK_WIDER[t]
    if isinstance(t, pa.StructType):
        return pa.struct(
            [
                t.field(i).with_type(spark_arrow_type(name, t.field(i).type))
                for i in range(t.num_fields)
            ]
        )
    if isinstance(t, pa.MapType):
        key: pa.DataType = spark_arrow_type(name, t.key_type)
        item: pa.DataType = spark_arrow_type(name, t.item_type)
        mapped: pa.DataType = pa.map_(key, item)
        return mapped
    if isinstance(t, pa.ListType | pa.LargeListType | pa.FixedSizeListType):
        value = t.value_field.with_type(spark_arrow_type(name, t.value_type))
        if isinstance(t, pa.ListType):
            return pa.list_(value)
        if isinstance(t, pa.LargeListType):
            return pa.large_list(value)
        return pa.list_(value, t.list_size)
    try:
        from_arrow_schema(pa.schema([pa.field(name, t)]))
    except Exception as e:  # pyspark raises several kinds
        raise SchemaMismatchError(
            f"column {name!r} of type {t} has no Spark type: Spark cannot read this topic"
        ) from e
    return t


def arrow_schema(schema: StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects for ``schema``."""
    result: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    return result


def _topic_columns(schema: StructType) -> pa.Schema:
    arrow = arrow_schema(schema)
    return pa.schema(list(arrow)[: len(arrow) - len(METADATA_COLUMNS)])


_OPS: dict[type[Filter], str] = {
    EqualTo: "==",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
    IsNull: "is null",
    IsNotNull: "is not null",
}


def _usable(schema: pa.Schema, where: list[Predicate]) -> list[Predicate]:
    """The predicates pyarrow can apply to the topic's columns: the others (a
    value Spark typed otherwise) only cost the plan its pruning, as Spark
    filters the rows anyway."""
    usable = []
    for predicate in where:
        try:
            check_predicates(schema, [predicate])
        except ArrowLogError:
            continue
        usable.append(predicate)
    return usable


def _predicate(f: Filter, columns: list[str]) -> Predicate | None:
    """A filter on a top-level data column as an arrowlog predicate, or None."""
    path: tuple[str, ...] = getattr(f, "attribute", ())
    op = _OPS.get(type(f))
    if op is None or len(path) != 1 or path[0] not in columns:
        return None
    value: Any = getattr(f, "value", None)
    if op == "in":
        return (path[0], op, [bytes(v) if isinstance(v, bytearray) else v for v in value])
    return (path[0], op, bytes(value) if isinstance(value, bytearray) else value)


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


__all__ = ["ArrowLogDataSource", "ArrowLogFilteringReader", "ArrowLogReader", "read_schema"]
