"""The schemas Spark and arrowlog exchange: the Spark schema a read declares
(the topic's columns as ``columns`` picks them, each widened where Spark has no
type for it, and the metadata columns), and the exact Arrow schema Spark
expects of the batches a reader yields or hands a writer."""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.errors import SchemaMismatchError
from arrowlog.partition import projected
from arrowlog.read.scan import METADATA_COLUMNS, output_schema
from arrowlog.spark.options import ReadOptions
from arrowlog.spark.planning import subscribed_topics


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


def topic_columns(schema: StructType) -> pa.Schema:
    """The topic's own columns of a read's Spark ``schema`` (the metadata
    columns come last)."""
    arrow = arrow_schema(schema)
    return pa.schema(list(arrow)[: len(arrow) - len(METADATA_COLUMNS)])


__all__ = ["arrow_schema", "read_schema", "spark_arrow_type", "topic_columns"]
