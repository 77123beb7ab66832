"""A Spark data source whose writer takes every batch and keeps none: the
ceiling of any writer built on Spark's Python data source API, arrowlog's
included (the bench measures arrowlog's write against it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType


class _Discard(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:  # type: ignore[override]
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return _Rows(rows)


class _Rows(WriterCommitMessage):
    def __init__(self, rows: int) -> None:
        self.rows = rows


class DiscardSource(DataSource):
    """``df.write.format("arrowlog-discard")``: every batch reaches Python, none
    is kept."""

    @classmethod
    def name(cls) -> str:
        return "arrowlog-discard"

    def schema(self) -> StructType:
        return StructType()

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        return _Discard()


def register(spark: Any) -> None:
    """Register the source with ``spark``; its workers get the class by value
    (``bench`` is not installed where they run)."""
    from pyspark import cloudpickle

    import bench.discard

    cloudpickle.register_pickle_by_value(bench.discard)  # type: ignore[no-untyped-call]
    spark.dataSource.register(DiscardSource)
