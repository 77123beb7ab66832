"""Helpers of the Spark write tests: a topic of ids and names, DataFrames and writers
for it, what was committed, and the casts a writer makes of a column as a task hands
it over."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from pathlib import Path
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog.spark.conform import cast_column
from tests.support.spark import with_options
from tests.support.stores import StoreSpec

FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)


def writer(df: Any, spec: StoreSpec, **options: str) -> Any:
    return with_options(df.write.format("arrowlog").mode("append"), spec, options)


def frame(spark: Any, n: int, partitions: int = 4) -> Any:
    return spark.range(0, n, 1, partitions).selectExpr("id", "concat('n', id) as name")


def committed_ids(log: arrowlog.ArrowLog, topic: str) -> list[int]:
    consumer = log.consumer()
    ids: list[int] = []
    for p in range(log.topic(topic).partitions):
        ids += consumer.read(topic, p).column("id").to_pylist()  # type: ignore[arg-type]
    return sorted(ids)


def last_changed(
    batches: Iterator[pa.RecordBatch], change: Callable[[pa.RecordBatch], pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``batches`` as they come, the last one through ``change``."""
    last = None
    for batch in batches:
        if last is not None:
            yield last
        last = batch
    if last is not None:
        yield change(last)


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


def partition_keys(log: arrowlog.ArrowLog, topic: str) -> dict[int, list[str]]:
    """Every object of each partition of ``topic``: segments, markers, checkpoints."""
    return {
        p: sorted(i.key for i in log.store.list(f"{topic}/{p}/"))
        for p in range(log.topic(topic).partitions)
    }


_names = count()


def fresh_name() -> str:
    """A topic name no other call in this process gave."""
    return f"t{next(_names)}"


def cast(
    log: arrowlog.ArrowLog, column: pa.Array[Any], kind: pa.DataType, zone: str | None = None
) -> pa.Array[Any]:
    """``cast_column`` of ``column`` into a new topic whose one column ``c`` is
    ``kind``, in Spark session time zone ``zone`` (if given)."""
    field = pa.field("c", kind)
    topic = log.create_topic(fresh_name(), pa.schema([field]))
    return cast_column(column, field, topic, zone=zone)
