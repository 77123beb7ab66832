"""The ``arrowlog`` Spark data source: the one class Spark looks up by name,
composing the batch reader (:mod:`arrowlog.spark.reader`), the batch writer
(:mod:`arrowlog.spark.sink`) and the streaming reader and writer
(:mod:`arrowlog.spark.streaming`), each given its options parsed once
(:mod:`arrowlog.spark.options`).

Reads plan on the driver and read on the executors (a consistent snapshot of
every partition, each transaction decided once). A write is one transaction
for the whole job; with ``txnAppId`` and ``txnVersion`` (as in Delta), a job
whose version was committed already writes nothing. A streaming write commits
each micro-batch once.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamReader,
)
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.errors import ArrowLogError, InvalidConfigError
from arrowlog.spark.options import ReadOptions, WriteOptions
from arrowlog.spark.reader import (
    ArrowLogFilteringReader,
    ArrowLogReader,
    planning_with_pushdown,
)
from arrowlog.spark.schema import read_schema
from arrowlog.spark.sink import ArrowLogWriter
from arrowlog.spark.streaming import ArrowLogStreamReader, ArrowLogStreamWriter, RefusedStream


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
        if overwrite:
            raise InvalidConfigError("arrowlog is a log: only mode('append') is supported")
        return ArrowLogWriter(WriteOptions.parse(self.options), schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        try:
            options = ReadOptions.parse(self.options, streaming=True)
        except ArrowLogError as e:  # raised at the stream's first call (see RefusedStream)
            return RefusedStream(e)
        return ArrowLogStreamReader(options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamArrowWriter:
        if overwrite:
            raise InvalidConfigError("arrowlog is a log: only append output is supported")
        return ArrowLogStreamWriter(WriteOptions.parse(self.options, streaming=True), schema)


__all__ = [
    "ArrowLogDataSource",
    "ArrowLogFilteringReader",
    "ArrowLogReader",
    "read_schema",
]
