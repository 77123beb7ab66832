"""Attacks on the batch write path (arrowlog/spark/sink.py): ArrowLogWriter.write,
route, split_by_partition and conform, after the conform step moved to once
per segment at flush. Each was found as a bug (rows lost past 2 GiB, struct
children cast by name to nulls, nulls in not-null map values, floats overflowing
to infinity, loose partition values, keys routed before their cast, an explicit
keyColumn ignored, renamed metadata columns refused, a fenced abort holding the
LSO, segments past max_batch_bytes, an untyped error for a repeated column) and
now holds, or documents what held from the start.

Origin: the first attack on the Spark sink (was tests/spark/test_sink_attack.py)."""

from __future__ import annotations

import decimal
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.producer import key_partitions
from tests.support.spark_write import (
    SCHEMA,
    committed_ids,
    frame,
    last_changed,
    partition_keys,
    writer,
)
from tests.support.stores import StoreSpec


def local(tmp_path: Path) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


@pytest.fixture
def tiny_batches(spark: Any) -> Iterator[None]:
    """Arrow batches of 7 rows: a task hands the writer many batches."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "7")
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def rows_by_partition(
    log: arrowlog.ArrowLog, topic: str, column: str = "id"
) -> dict[int, list[Any]]:
    consumer = log.consumer()
    return {
        p: consumer.read(topic, p).column(column).to_pylist()
        for p in range(log.topic(topic).partitions)
    }


# --- silent data loss ------------------------------------------------------------


@pytest.mark.spark
def test_a_segment_over_2_gib_of_binary_loses_no_rows(tmp_path: Path) -> None:
    """Two rows of 1.1 GiB each for one partition (rowsPerBatch is not reached):
    the task reports rows=2 and the commit succeeds, with one row committed.
    Either both rows or a failed write is right. (The writer runs outside Spark,
    as a task runs it; about 3 GiB of memory, a few seconds. The rows compress
    well, so the segment stays under the default max_batch_bytes.)"""
    from pyspark.sql.pandas.types import from_arrow_schema

    from arrowlog.spark.options import WriteOptions
    from arrowlog.spark.sink import ArrowLogWriter

    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("blob", pa.binary())]
    schema = pa.schema(fields)
    log.create_topic("b", schema, partitions=1)
    options = WriteOptions.parse({"path": spec.url, "topic": "b", "storage.fsync": "false"})
    w = ArrowLogWriter(options, from_arrow_schema(schema))
    big = pa.array([b"x" * (1100 * 1024 * 1024)], pa.binary())
    batches = [pa.record_batch([pa.array([i]), big], schema=schema) for i in range(2)]
    del big
    try:
        message = w.write(iter(batches))
    except arrowlog.ArrowLogError:
        w.abort([None])
        assert log.consumer().read("b", 0, columns=["id"]).num_rows == 0
        return
    finally:
        del batches
    w.commit([message])
    assert message.rows == 2
    assert log.consumer().read("b", 0, columns=["id"]).column("id").to_pylist() == [0, 1]


STRUCT_TOPIC = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("s", pa.struct([pa.field("a", pa.int64()), pa.field("b", pa.string())])),
    ]
)


@pytest.mark.spark
@pytest.mark.parametrize(
    "struct",
    [
        "named_struct('A', id, 'B', name)",  # case differs: every value becomes null
        "named_struct('a', id, 'bb', name)",  # a misspelt child: b becomes null
        "named_struct('a', id, 'b', name, 'c', id)",  # an extra child: c is dropped
    ],
)
def test_struct_children_that_do_not_match_the_topic_are_refused(
    spark: Any, tmp_path: Path, struct: str
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("s", STRUCT_TOPIC)
    df = frame(spark, 10, partitions=1).selectExpr("id", f"{struct} as s")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        writer(df, spec, topic="s").save()
    assert committed_ids(log, "s") == []


# --- nulls under not-null fields -------------------------------------------------


@pytest.mark.spark
def test_nulls_in_not_null_map_values_fail_the_job(spark: Any, tmp_path: Path) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    value = pa.field("value", pa.int64(), nullable=False)
    kind = pa.map_(pa.string(), value)  # type: ignore[call-overload]
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("m", kind)]
    log.create_topic("m", pa.schema(fields))
    df = frame(spark, 10, partitions=1).selectExpr("id", "map('k', if(id = 3, null, id)) as m")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        writer(df, spec, topic="m").save()
    assert committed_ids(log, "m") == []


@pytest.mark.spark
def test_a_null_in_a_later_segment_fails_the_job_with_nothing_visible(
    spark: Any, tmp_path: Path, tiny_batches: None
) -> None:
    """Segments of a task are appended before a later one of the same task has a
    null in a not-null list item: the job fails (every attempt), none of its rows
    are visible, the LSO is not held back, and the fixed job (a rerun of the same
    txnVersion) commits every row once; a second rerun writes nothing."""
    keys = {"txnAppId": "fix", "txnVersion": "1"}
    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("l", pa.list_(pa.field("item", pa.int64(), nullable=False))),
    ]
    log.create_topic("n", pa.schema(fields), partitions=3)
    df = spark.range(0, 200, 1, 2).selectExpr(
        "id", "array(id, if(id = 95, null, id)) as l", "cast(id % 3 as int) as partition"
    )
    with pytest.raises(Exception, match=r"SchemaMismatchError: topic 'n': column 'l.item' has 1"):
        writer(df, spec, topic="n", rowsPerBatch="5", **keys).save()
    assert committed_ids(log, "n") == []
    everything = log.consumer(isolation_level="read_uncommitted")
    written = [everything.read("n", p).column("id").to_pylist() for p in range(3)]
    # task 0 appended segments before the one with the bad row
    assert any(i is not None and i < 90 for ids in written for i in ids)
    assert log.stable_offsets("n") == log.end_offsets("n")
    fixed = df.where("id != 95")
    writer(fixed, spec, topic="n", rowsPerBatch="5", **keys).save()
    assert committed_ids(log, "n") == [i for i in range(200) if i != 95]
    assert log.stable_offsets("n") == log.end_offsets("n")
    ends = log.end_offsets("n")
    writer(fixed, spec, topic="n", rowsPerBatch="5", **keys).save()
    assert log.end_offsets("n") == ends


def bad_on_first_attempt(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Task 0's first attempt: a null id in its last batch (after earlier segments)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    poison = context is not None and context.partitionId() == 0 and context.attemptNumber() == 0

    def null_id(last: pa.RecordBatch) -> pa.RecordBatch:
        ids = last.column(0).to_pylist()
        ids[-1] = None
        return last.set_column(0, last.schema.field(0), pa.array(ids, pa.int64()))

    return last_changed(batches, null_id) if poison else batches


@pytest.mark.spark
def test_a_retried_task_after_a_bad_later_segment_writes_every_row_once(
    spark: Any, tmp_path: Path, tiny_batches: None
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
    ]
    log.create_topic("r", pa.schema(fields), partitions=2)
    df = frame(spark, 120, partitions=2).selectExpr("*", "cast(id % 2 as int) as partition")
    df = df.mapInArrow(bad_on_first_attempt, df.schema)
    writer(df, spec, topic="r", rowsPerBatch="4").save()
    assert committed_ids(log, "r") == list(range(120))
    assert all(i % 2 == p for p, ids in rows_by_partition(log, "r").items() for i in ids)
    assert log.stable_offsets("r") == log.end_offsets("r")


# --- casts that change values ----------------------------------------------------


@pytest.mark.spark
def test_a_double_too_large_for_a_float_column_fails(spark: Any, tmp_path: Path) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("x", pa.float32())]
    log.create_topic("f", pa.schema(fields))
    df = frame(spark, 3, partitions=1).selectExpr("id", "cast(1e300 as double) as x")
    with pytest.raises(Exception, match="SchemaMismatchError"):
        writer(df, spec, topic="f").save()
    assert committed_ids(log, "f") == []


@pytest.mark.spark
@pytest.mark.parametrize(
    "column,values",
    [
        ("i", pa.array([3_000_000_000])),  # Spark's long past int32
        ("d", pa.array([decimal.Decimal("1.257")], pa.decimal128(10, 3))),  # past the scale
        ("t", pa.array([1001], pa.timestamp("us", tz="UTC"))),  # a microsecond past ms
        ("i", pa.array([1.5])),  # a fraction into an integer
        ("day", pa.array([86_400_000_001], pa.timestamp("us", tz="UTC"))),  # a time of day
        ("f", pa.array([1e300])),  # a double too large for a float
    ],
)
def test_casts_that_would_lose_data_fail_clearly(
    tmp_path: Path, column: str, values: pa.Array[Any]
) -> None:
    """Overflowing integers, truncated decimals, fractions, timestamps to a
    coarser unit or to a date with a time of day, and doubles past a float's
    range fail with SchemaMismatchError naming the column (in conform, which
    the task runs before anything is registered)."""
    from arrowlog.spark.conform import conform

    log = local(tmp_path).connect()
    fields: list[pa.Field[Any]] = [
        pa.field("i", pa.int32()),
        pa.field("d", pa.decimal128(6, 2)),
        pa.field("t", pa.timestamp("ms", tz="UTC")),
        pa.field("day", pa.date32()),
        pa.field("f", pa.float32()),
    ]
    topic = log.create_topic("c", pa.schema(fields))
    good = {
        "i": pa.array([1]),
        "d": pa.array([decimal.Decimal("1.25")], pa.decimal128(10, 3)),
        "t": pa.array([1000], pa.timestamp("us", tz="UTC")),
        "day": pa.array([86_400_000_000], pa.timestamp("us", tz="UTC")),
        "f": pa.array([0.1]),  # rounded, as Spark rounds a double into a float
    }
    assert conform(pa.record_batch(good), topic).num_rows == 1
    with pytest.raises(arrowlog.SchemaMismatchError, match=f"column '{column}'"):
        conform(pa.record_batch({**good, column: values}), topic)


# --- routing ---------------------------------------------------------------------


TYPED = (arrowlog.UnknownTopicOrPartitionError, arrowlog.SchemaMismatchError)


@pytest.mark.spark
@pytest.mark.parametrize(
    "partition",
    [
        pa.array([0.5, 1.5]),
        pa.array(["0", "1"]),
        pa.array([False, True]),
        pa.array(["0", "x"]),
        pa.array([0.0, float("nan")]),
        pa.array([0, None], pa.int32()),
    ],
    ids=["fraction", "text", "bool", "not-a-number-text", "nan", "null"],
)
def test_a_partition_column_that_is_not_an_integer_is_refused_clearly(
    tmp_path: Path, partition: pa.Array[Any]
) -> None:
    """Spark hands the writer whatever type the DataFrame's `partition` column has."""
    from arrowlog.spark.writing import route

    log = local(tmp_path).connect()
    topic = log.create_topic("p", SCHEMA, partitions=2)
    batch = pa.record_batch({"id": [10, 11], "name": ["a", "b"], "partition": partition})
    with pytest.raises(TYPED, match="partition") as caught:
        list(route(batch, topic, None, 0))
    if partition.null_count:
        assert "null" in str(caught.value)


@pytest.mark.spark
def test_many_partitions_and_one_row_segments_write_every_row_once(
    spark: Any, tmp_path: Path, tiny_batches: None
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("many", SCHEMA, partitions=8)
    df = frame(spark, 100, partitions=3).selectExpr("*", "cast(id * 7 % 8 as int) as partition")
    writer(df, spec, topic="many", rowsPerBatch="1").save()
    by_partition = rows_by_partition(log, "many")
    assert sorted(i for ids in by_partition.values() for i in ids) == list(range(100))
    assert all(i * 7 % 8 == p for p, ids in by_partition.items() for i in ids)
    assert log.stable_offsets("many") == log.end_offsets("many")
    [txn] = log.admin.list_transactions()
    assert len(txn.partitions) == 8 and txn.state is arrowlog.TxnState.COMPLETE_COMMIT


@pytest.mark.spark
def test_key_column_with_small_segments_routes_like_send_keyed(
    spark: Any, tmp_path: Path, tiny_batches: None
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("k", SCHEMA, partitions=5)
    df = frame(spark, 90, partitions=2).selectExpr("cast(id as int) as id", "name")  # int32
    writer(df, spec, topic="k", keyColumn="id", rowsPerBatch="3").save()
    for p, ids in rows_by_partition(log, "k").items():
        assert ids and key_partitions(ids, 5) == [p] * len(ids)
    assert committed_ids(log, "k") == list(range(90))


@pytest.fixture(
    params=[
        "UTC",
        "America/New_York",
    ]
)
def session_time_zone(spark: Any, request: pytest.FixtureRequest) -> Iterator[None]:
    spark.conf.set("spark.sql.session.timeZone", request.param)
    yield
    spark.conf.unset("spark.sql.session.timeZone")


@pytest.mark.spark
def test_timestamp_keys_route_like_send_keyed_whatever_the_session_time_zone(
    spark: Any, tmp_path: Path, session_time_zone: None
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
    ]
    log.create_topic("t", pa.schema(fields), partitions=4)
    df = frame(spark, 40, partitions=1).selectExpr("id", "timestamp_seconds(id * 3600) as ts")
    writer(df, spec, topic="t", keyColumn="ts").save()
    for p, stamps in rows_by_partition(log, "t", "ts").items():
        assert key_partitions(stamps, 4) == [p] * len(stamps)


@pytest.mark.spark
@pytest.mark.parametrize(
    "key,kind",
    [
        ("cast(id as double)", pa.int64()),
        ("cast(id as decimal(38,18))", pa.decimal128(10, 2)),
    ],
    ids=["double-into-int64", "decimal-38-18-into-decimal-10-2"],
)
def test_keys_of_another_type_than_the_topics_route_by_the_stored_value(
    spark: Any, tmp_path: Path, key: str, kind: pa.DataType
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("k", kind)]
    log.create_topic("kt", pa.schema(fields), partitions=4)
    df = frame(spark, 40, partitions=1).selectExpr("id", f"{key} as k")
    writer(df, spec, topic="kt", keyColumn="k").save()
    for p, keys in rows_by_partition(log, "kt", "k").items():
        assert key_partitions(keys, 4) == [p] * len(keys)


# --- metadata columns ------------------------------------------------------------


@pytest.mark.spark
def test_key_column_is_not_silently_ignored_for_a_dataframe_read_from_arrowlog(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("src", SCHEMA, partitions=4)
    writer(
        frame(spark, 80).selectExpr("*", "cast(id % 4 as int) as partition"), spec, topic="src"
    ).save()
    log.create_topic("dst", SCHEMA, partitions=4)
    reread = spark.read.format("arrowlog").option("topic", "src").load(spec.url)
    from pyspark.errors import PySparkException

    try:
        writer(reread, spec, topic="dst", keyColumn="id").save()
    except PySparkException as e:  # refusing the ambiguity is fine too
        assert "keyColumn" in str(e) and "partition" in str(e)
        return
    for p, ids in rows_by_partition(log, "dst").items():
        assert key_partitions(ids, 4) == [p] * len(ids)


@pytest.mark.spark
def test_a_dataframe_read_from_a_topic_with_a_timestamp_column_can_be_written_back(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    ]
    schema = pa.schema(fields)
    log.create_topic("a", schema, partitions=2)
    log.create_topic("b", schema, partitions=2)
    stamps = pa.array([0, 1, 2], pa.timestamp("us", tz="UTC"))
    log.producer().send(
        "a", pa.record_batch([pa.array([0, 1, 2]), stamps], schema=schema), partition=1
    )
    reread = spark.read.format("arrowlog").option("topic", "a").load(spec.url)
    assert "_timestamp" in reread.columns
    writer(reread, spec, topic="b").save()
    assert rows_by_partition(log, "b") == {0: [], 1: [0, 1, 2]}


@pytest.mark.spark
def test_a_user_column_named_like_a_metadata_column_is_refused(spark: Any, tmp_path: Path) -> None:
    """A column `timestamp` (or `topic`, `offset`, `partition`) that the topic
    lacks is dropped only if it is of the metadata column's kind, as a DataFrame
    read from arrowlog has it: a user's string `timestamp` is refused like any
    other extra column, not dropped without a word."""
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("u", SCHEMA)
    for extra in ["'2024-01-01' as timestamp", "1 as topic", "'7' as offset"]:
        df = frame(spark, 3, partitions=1).selectExpr("*", extra)
        with pytest.raises(Exception, match="SchemaMismatchError: the DataFrame has columns"):
            writer(df, spec, topic="u").save()
    assert committed_ids(log, "u") == []
    metadata = "current_timestamp() as timestamp, 'u' as topic, id as offset"
    writer(
        frame(spark, 3, partitions=1).selectExpr("*", *metadata.split(", ")), spec, topic="u"
    ).save()
    assert committed_ids(log, "u") == [0, 1, 2]
    assert log.consumer().read("u", 0).schema.names == ["id", "name"]


# --- empty input -----------------------------------------------------------------


@pytest.mark.spark
def test_empty_dataframes_and_empty_tasks_touch_no_partition(spark: Any, tmp_path: Path) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("e", SCHEMA, partitions=3)
    before = partition_keys(log, "e")
    writer(frame(spark, 0, partitions=3), spec, topic="e").save()
    writer(frame(spark, 0, partitions=3), spec, topic="e", keyColumn="id").save()
    writer(
        frame(spark, 0, partitions=3).selectExpr("*", "cast(9 as int) as partition"),
        spec,
        topic="e",
    ).save()
    assert partition_keys(log, "e") == before
    # four tasks, two of them empty, rows for partition 2 only
    df = (
        frame(spark, 40, partitions=4)
        .where("id < 20")
        .selectExpr("*", "cast(2 as int) as partition")
    )
    writer(df, spec, topic="e").save()
    after = partition_keys(log, "e")
    assert {p: after[p] for p in (0, 1)} == {p: before[p] for p in (0, 1)}
    assert {p: sorted(ids) for p, ids in rows_by_partition(log, "e").items()} == {
        0: [],
        1: [],
        2: list(range(20)),
    }
    assert log.stable_offsets("e") == log.end_offsets("e")
    assert all(t.state is arrowlog.TxnState.COMPLETE_COMMIT for t in log.admin.list_transactions())


# --- the abort after a failed task -----------------------------------------------


@pytest.mark.spark
def test_an_abort_that_loses_its_entry_to_a_late_task_still_releases_the_lso(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job fails (a bad row in one task) while another task is still writing: it
    registers a partition just as the driver's abort resumes the transaction."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from arrowlog.spark.options import WriteOptions
    from arrowlog.spark.sink import ArrowLogWriter, JobTransaction
    from arrowlog.txn.distributed import join_partitions

    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2)
    options = WriteOptions.parse({"path": spec.url, "topic": "w", "storage.fsync": "false"})
    spark_schema = StructType([StructField("id", LongType()), StructField("name", StringType())])
    w = ArrowLogWriter(options, spark_schema)
    w.write(iter([pa.record_batch({"id": [1, 2], "name": ["a", "b"]}, schema=SCHEMA)]))
    resume = JobTransaction._resume
    late: list[int] = []

    def resume_then_a_late_task_joins(self: JobTransaction) -> arrowlog.Producer:
        producer = resume(self)
        if not late:
            join_partitions(log, self.transactional_id, self.epoch, [("w", 1)])
            late.append(1)
        return producer

    monkeypatch.setattr(JobTransaction, "_resume", resume_then_a_late_task_joins)
    w.abort([None])
    assert late
    [txn] = log.admin.list_transactions()
    assert txn.state is arrowlog.TxnState.COMPLETE_ABORT
    assert log.stable_offsets("w") == log.end_offsets("w")
    assert committed_ids(log, "w") == []


@pytest.mark.spark
def test_a_dataframe_with_a_duplicate_column_fails_with_a_typed_error(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("d", SCHEMA)
    df = frame(spark, 3, partitions=1).selectExpr("id", "id", "name")
    with pytest.raises(Exception, match=r"SchemaMismatchError|InvalidConfigError"):
        writer(df, spec, topic="d").save()
    assert committed_ids(log, "d") == []


# --- segment size ----------------------------------------------------------------


@pytest.mark.spark
def test_a_write_of_wide_rows_fits_the_topics_max_batch_bytes(spark: Any, tmp_path: Path) -> None:
    """The same at a small scale: max_batch_bytes of 64 KiB, 4000 rows of 128
    hexadecimal characters in one task. Cutting segments by bytes, or at least
    telling the user to lower rowsPerBatch, would do."""
    from pyspark.errors import PySparkException

    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("wide", SCHEMA, config=arrowlog.TopicConfig(max_batch_bytes=64 * 1024))
    df = frame(spark, 4000, partitions=1).selectExpr(
        "id", "concat(sha2(cast(id as string), 256), sha2(name, 256)) as name"
    )
    try:
        writer(df, spec, topic="wide").save()
    except PySparkException as e:
        assert re.search(r"max_batch_bytes[^\n]*rowsPerBatch", str(e))
        return
    assert committed_ids(log, "wide") == list(range(4000))
