"""Edges where the JVM and the Python reader once parted (an adversarial review
of the JVM reader): nested fields, metadata filters beside clashing topic
columns, nulls and bounds in pushed filters, old timestamps, types the JVM does
not convert, planning errors, a segment of other columns, reading a mistyped
root. Each runs through both readers, which must agree with each other and
with filtering a full read."""

from __future__ import annotations

import datetime
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from tests.support.spark import with_options
from tests.support.stores import StoreSpec

pytestmark = pytest.mark.spark
UTC = datetime.timezone.utc


def rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


def topic(
    tmp_path: Path, schema: pa.Schema, batches: list[dict[str, Any]], partitions: int = 1
) -> StoreSpec:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", schema, partitions=partitions)
    for i, b in enumerate(batches):
        log.append("t", pa.record_batch(b, schema=schema), partition=i % partitions)
    return spec


def load(spark: Any, spec: StoreSpec, reader: str, **options: str) -> Any:
    return with_options(
        spark.read.format("arrowlog"), spec, {"topic": "t", "reader": reader, **options}
    ).load()


READERS = ["jvm", "python"]


@pytest.mark.parametrize("reader", READERS)
def test_a_field_of_a_struct_or_of_structs_in_a_list_is_that_field(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    """Spark prunes a struct to the fields a query names; the JVM reader hands it
    whole struct vectors, so it reports whole top-level types (Spark picks)."""
    schema = pa.schema(
        [
            ("s", pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ("xs", pa.list_(pa.struct([("p", pa.int64()), ("q", pa.int64())]))),
        ]
    )
    spec = topic(
        tmp_path,
        schema,
        [
            {
                "s": [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}],
                "xs": [[{"p": 1, "q": 11}], [{"p": 2, "q": 12}]],
            }
        ],
    )
    df = load(spark, spec, reader)
    assert rows(df.select("s.b")) == [("x",), ("y",)]
    assert rows(df.select("xs.q")) == [([11],), ([12],)]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize(
    "where", ["_offset < 2", "_offset >= 3", "_partition = 1", "_partition in (1)"]
)
def test_filters_on_renamed_metadata_columns_hold_when_the_topic_columns_are_pruned(
    spark: Any, tmp_path: Path, reader: str, where: str
) -> None:
    # topic columns `offset` and `partition`: the metadata ones are `_offset`, `_partition`
    fields: list[pa.Field[Any]] = [
        pa.field("offset", pa.int64()),
        pa.field("partition", pa.string()),
        pa.field("x", pa.int64()),
    ]
    schema = pa.schema(fields)
    batches = [
        {"offset": [100 + k, 200 + k], "partition": ["p", "q"], "x": [k, 10 + k]} for k in range(4)
    ]
    spec = topic(tmp_path, schema, batches, partitions=2)
    full = load(spark, spec, "python").collect()
    expected = rows(
        spark.createDataFrame(full, load(spark, spec, "python").schema).where(where).select("x")
    )
    assert rows(load(spark, spec, reader).where(where).select("x")) == expected
    assert 0 < len(expected) < 8


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("pushed", [False, True], ids=["default-session", "pushdown-on"])
def test_null_in_a_partition_list_and_a_timestamp_bound_at_the_epoch(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest, reader: str, pushed: bool
) -> None:
    if pushed:
        request.getfixturevalue("pushdown")
    schema = pa.schema([("v", pa.int64())])
    spec = topic(tmp_path, schema, [{"v": [0]}, {"v": [1]}, {"v": [2]}], partitions=3)
    df = load(spark, spec, reader)
    assert rows(df.where("partition in (0, null)").select("v")) == [(0,)]
    # the epoch (0 microseconds) is an upper bound like any other
    epoch = "timestamp <= timestamp'1970-01-01 00:00:00Z' and timestamp < timestamp'2100-01-01'"
    assert rows(df.where(epoch)) == []
    assert len(rows(df.where("timestamp >= timestamp'0001-01-01 00:00:00Z'"))) == 3


@pytest.mark.parametrize("reader", READERS)
def test_timestamps_before_the_gregorian_calendar_filter_as_spark_compares_them(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest, reader: str
) -> None:
    request.getfixturevalue("pushdown")
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int64())])
    old = datetime.datetime(1000, 1, 3, tzinfo=UTC)
    spec = topic(
        tmp_path,
        schema,
        [{"ts": [old], "v": [1]}, {"ts": [datetime.datetime(2024, 1, 1, tzinfo=UTC)], "v": [2]}],
    )
    df = load(spark, spec, reader, targetSplitBytes="1")
    assert rows(df.where("ts >= timestamp'1000-01-01 00:00:00Z'").select("v")) == [(1,), (2,)]
    assert rows(df.where("ts < timestamp'1000-01-05 00:00:00Z'").select("v")) == [(1,)]


# types the JVM reader does not hand to Spark as stored: the Python reader reads them
FALLBACK: dict[str, tuple[pa.DataType, list[Any]]] = {
    "time64": (pa.time64("us"), [1, None]),
    "fixed_size_binary": (pa.binary(3), [b"abc", None]),
    "decimal256": (pa.decimal256(20, 2), [None, None]),
    "large_list": (pa.large_list(pa.int64()), [[1, 2], None]),
    "fixed_size_list": (pa.list_(pa.int64(), 2), [[1, 2], None]),
    "struct_of_timestamp_ms": (
        pa.struct([("b", pa.timestamp("ms", tz="UTC"))]),
        [{"b": 1000}, None],
    ),
    "list_of_timestamp_ns": (pa.list_(pa.timestamp("ns", tz="UTC")), [[1000, 2000], None]),
    "uint8": (pa.uint8(), [255, None]),
    "uint64": (pa.uint64(), [2**64 - 1, None]),
    "float16": (pa.float16(), [np.float16(1.5), None]),
    "date64": (pa.date64(), [86_400_000, None]),
}


@pytest.mark.parametrize("name", list(FALLBACK))
def test_types_the_jvm_does_not_convert_are_read_by_the_python_reader(
    spark: Any, tmp_path: Path, name: str
) -> None:
    t, values = FALLBACK[name]
    spec = topic(tmp_path, pa.schema([("c", t)]), [{"c": pa.array(values, t)}])
    jvm, python = (load(spark, spec, r) for r in READERS)
    assert jvm.schema == python.schema
    assert rows(jvm.select("c", "offset")) == rows(python.select("c", "offset"))
    assert len(rows(python)) == 2
    assert "JVM reader" not in jvm._jdf.queryExecution().executedPlan().toString()


def test_uint64_reads_as_a_decimal_holding_every_value(spark: Any, tmp_path: Path) -> None:
    import decimal

    spec = topic(
        tmp_path, pa.schema([("c", pa.uint64())]), [{"c": pa.array([2**64 - 1, 0], pa.uint64())}]
    )
    assert [r.c for r in load(spark, spec, "python").orderBy("offset").collect()] == [
        decimal.Decimal(2**64 - 1),
        decimal.Decimal(0),
    ]


@pytest.mark.parametrize(
    "options",
    [
        {"startingOffsets": '{"t": {"0": 5}}'},
        {"startingOffsets": "latest"},
        {"startingOffsets": '{"t": {"7": 0}}'},
        {"endingOffsets": '{"t": {"0": 99}}'},
    ],
)
def test_planning_errors_are_the_same_kind_through_both_readers(
    spark: Any, tmp_path: Path, options: dict[str, str]
) -> None:
    spec = topic(tmp_path, pa.schema([("v", pa.int64())]), [{"v": [1, 2]}])
    kinds = {}
    for reader in READERS:
        with pytest.raises(Exception) as e:
            load(spark, spec, reader, **options).collect()
        kinds[reader] = type(e.value).__name__
        assert "Error" in str(e.value)
    assert kinds == {"jvm": "AnalysisException", "python": "AnalysisException"}


@pytest.mark.parametrize("reader", READERS)
def test_a_checksummed_segment_of_other_columns_is_refused(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    """A segment with the offsets the log expects but another topic's column
    types (restored into the wrong prefix): CorruptSegmentError, never values."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    log.create_topic("b", pa.schema([("v", pa.timestamp("us", tz="UTC"))]))
    log.append("t", pa.record_batch({"v": pa.array([1, 2], pa.int64())}))
    log.append("b", pa.record_batch({"v": pa.array([1, 2], pa.timestamp("us", tz="UTC"))}))
    seg = Path("0", "segments", "00000000000000000000.arrow")
    shutil.copyfile(tmp_path / "log" / "b" / seg, tmp_path / "log" / "t" / seg)
    with pytest.raises(
        Exception,
        match=r"CorruptSegmentError: \S*00000000000000000000\.arrow: segment holds columns",
    ):
        load(spark, spec, reader).collect()


@pytest.mark.parametrize("reader", READERS)
def test_reading_a_mistyped_local_root_creates_nothing(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "typo" / "deeper"), {})
    with pytest.raises(Exception, match="UnknownTopicOrPartitionError"):
        load(spark, spec, reader).collect()
    assert not (tmp_path / "typo").exists()
    assert os.listdir(tmp_path) == []
