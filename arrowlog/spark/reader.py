"""The batch read of the ``arrowlog`` Python data source: planned on the driver
(:func:`arrowlog.read.scan.plan_scan`: a consistent snapshot of every partition,
each transaction decided once) and read on the executors, which fetch the
planned segments by key and yield Arrow record batches. The streaming reader
reads its micro-batches' tasks the same way (:func:`read_partition`)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, EqualTo, Filter, In, InputPartition
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.format.stats import Predicate
from arrowlog.read.scan import ScanTask, metadata_names, plan_scan, read_task
from arrowlog.spark.options import ReadOptions
from arrowlog.spark.planning import (
    ending_offsets,
    split_tasks,
    starting_offsets,
    subscribed_partitions,
    subscribed_topics,
)
from arrowlog.spark.pushdown import COMPARISONS, bounds, micros, predicate, usable
from arrowlog.spark.schema import arrow_schema, topic_columns
from arrowlog.storage.url import open_store


class ScanPartition(InputPartition):
    """One task of a read: the segments it reads (None: a read of nothing,
    which Spark still wants one partition for)."""

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
            where=usable(schema, self.where),
        )
        tasks = split_tasks(plan.tasks, o.min_partitions)
        return [ScanPartition(task) for task in tasks] or [ScanPartition(None)]

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
        data = topic_columns(self.schema)
        names = metadata_names(data)
        for f in filters:
            found = predicate(f, data.names)
            if found is not None:
                self.where.append(found)
            path: tuple[str, ...] = getattr(f, "attribute", ())
            column = path[0] if len(path) == 1 else None
            if column == names["partition"] and isinstance(f, EqualTo | In):
                self._keep_partitions(f)
            elif column == names["offset"] and isinstance(f, COMPARISONS):
                self._bound_offsets(*bounds(f))
            elif column == names["timestamp"] and isinstance(f, COMPARISONS):
                self._bound_timestamps(*bounds(f, to_int=micros))
            else:
                yield f

    def _keep_partitions(self, f: EqualTo | In) -> None:
        values = {f.value} if isinstance(f, EqualTo) else set(f.value)
        # a null is equal to nothing: `partition IN (0, NULL)` keeps 0 only
        wanted = {int(v) for v in values if v is not None}
        numbers = self.partition_numbers
        self.partition_numbers = wanted if numbers is None else numbers & wanted

    def _bound_offsets(self, low: int | None, high: int | None) -> None:
        if low is not None:
            self.min_offset = low if self.min_offset is None else max(self.min_offset, low)
        if high is not None:
            self.max_offset = high if self.max_offset is None else min(self.max_offset, high)

    def _bound_timestamps(self, low: int | None, high: int | None) -> None:
        if low is not None:  # 0 (the epoch) is a bound like any other
            low_us = self.min_timestamp_us
            self.min_timestamp_us = low if low_us is None else max(low_us, low)
        if high is not None:
            high_us = self.max_timestamp_us
            self.max_timestamp_us = high if high_us is None else min(high_us, high)


def read_partition(
    options: ReadOptions, schema: StructType, partition: InputPartition
) -> Iterator[pa.RecordBatch]:
    """Executor side of a batch or streaming read: the store is opened here."""
    assert isinstance(partition, ScanPartition)
    if partition.task is None:
        return
    store = open_store(options.root, options.storage)
    try:
        yield from read_task(store, partition.task, arrow_schema(schema), options.columns)
    finally:
        store.close()


__all__ = [
    "PUSHDOWN_PLANNER",
    "ArrowLogFilteringReader",
    "ArrowLogReader",
    "ScanPartition",
    "planning_with_pushdown",
    "read_partition",
]
