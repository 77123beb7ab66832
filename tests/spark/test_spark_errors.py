"""Spark says what is wrong in one line: an option, a topic, a position or a
write refused by arrowlog reaches PySpark as the error Spark raises for a data
source (``AnalysisException``, or the streaming query's error) whose message is
the arrowlog error's own line (``InvalidConfigError: ...``), not a Python
traceback with that line last. Both readers, both writers and both directions
of a stream; and a stream's progress reports how far it is behind the latest
offsets, as Spark's Kafka source does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException, StreamingQueryException

from tests.support.spark import with_options
from tests.support.stores import StoreSpec

SCHEMA = pa.schema([pa.field("id", pa.int64())])
READERS = ["jvm", "python"]


def one_line(error: BaseException) -> str:
    """``error``'s message, which must be one line naming an arrowlog error and
    carrying no traceback."""
    text = str(error)
    assert "Traceback" not in text and '  File "' not in text, text
    first, *_ = text.splitlines()
    return first


def topic_of(tmp_path: Path, records: int = 3) -> StoreSpec:
    """A store whose topic ``t`` has two partitions of ``records`` records each."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    for p in (0, 1):
        for i in range(records):
            log.append("t", pa.record_batch({"id": [i]}, schema=SCHEMA), partition=p)
    return spec


def read(spark: Any, spec: StoreSpec, reader: str, **options: str) -> Any:
    builder = spark.read.format("arrowlog")
    return with_options(builder, spec, {"topic": "t", "reader": reader, **options}).load()


@pytest.mark.spark
@pytest.mark.parametrize("reader", READERS)
def test_a_misspelt_read_option_is_one_line_naming_the_right_one(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    spec = topic_of(tmp_path)
    with pytest.raises(AnalysisException) as raised:
        read(spark, spec, reader, startingOffset="earliest").count()
    line = one_line(raised.value)
    assert "InvalidConfigError: reading arrowlog: unknown option 'startingoffset'" in line
    assert "did you mean 'startingOffsets'?" in line


@pytest.mark.spark
@pytest.mark.parametrize("reader", READERS)
def test_an_unknown_topic_is_one_line_naming_the_root_and_its_topics(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    spec = topic_of(tmp_path)
    with pytest.raises(AnalysisException) as raised:
        read(spark, spec, reader, topic="nope").count()
    line = one_line(raised.value)
    assert "UnknownTopicOrPartitionError: unknown topic 'nope'" in line
    assert spec.url in line and "(it holds t)" in line


@pytest.mark.spark
@pytest.mark.parametrize("reader", READERS)
def test_a_planning_error_is_one_line_in_both_readers(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    spec = topic_of(tmp_path)
    beyond = json.dumps({"t": {"0": 50, "1": 0}})
    with pytest.raises(AnalysisException) as raised:
        read(spark, spec, reader, endingOffsets=beyond).count()
    assert "OffsetOutOfRangeError: t/0: ending offset 50 is past the latest offset 3" in (
        one_line(raised.value)
    )
    absent = json.dumps({"t": {"5": 0}})
    with pytest.raises(AnalysisException) as raised:
        read(spark, spec, reader, startingOffsets=absent).count()
    assert "topic 't' has partitions 0..1, not 5" in one_line(raised.value)


@pytest.mark.spark
@pytest.mark.parametrize("writer", ["jvm", "python"])
def test_write_option_errors_are_one_line(spark: Any, tmp_path: Path, writer: str) -> None:
    spec = topic_of(tmp_path)
    df = spark.createDataFrame([(1,)], "id long")

    def write(mode: str = "append", **options: str) -> None:
        builder = df.write.format("arrowlog").mode(mode)
        with_options(builder, spec, {"topic": "t", "writer": writer, **options}).save()

    with pytest.raises(AnalysisException) as raised:
        write(keyColumns="id")
    line = one_line(raised.value)
    assert "InvalidConfigError: writing arrowlog: unknown option 'keycolumns'" in line
    assert "did you mean 'keyColumn'?" in line
    with pytest.raises(AnalysisException) as raised:
        write(topic="nope")
    assert "UnknownTopicOrPartitionError: unknown topic 'nope'" in one_line(raised.value)
    with pytest.raises(AnalysisException) as raised:
        write(mode="overwrite")
    assert "InvalidConfigError: arrowlog is a log: only mode('append')" in one_line(raised.value)
    assert spec.connect().consumer().stable_offset("t", 0) == 3  # nothing written


@pytest.mark.spark
def test_stream_errors_are_one_line(spark: Any, tmp_path: Path) -> None:
    spec = topic_of(tmp_path)
    with pytest.raises(AnalysisException) as raised:
        with_options(
            spark.readStream.format("arrowlog"), spec, {"topic": "t", "maxOffsetsPerTrigger": "-3"}
        ).load()
    assert "InvalidConfigError: option maxOffsetsPerTrigger: expected an integer >= 1" in (
        one_line(raised.value)
    )
    # a position refused when the query plans its first micro-batch
    absent = json.dumps({"t": {"5": 0}})
    stream = with_options(
        spark.readStream.format("arrowlog"), spec, {"topic": "t", "startingOffsets": absent}
    ).load()
    query = (
        stream.writeStream.format("memory")
        .queryName("refused_start")
        .option("checkpointLocation", str(tmp_path / "read-checkpoint"))
        .start()
    )
    with pytest.raises(StreamingQueryException) as stopped:
        query.awaitTermination(120)
    assert "topic 't' has partitions 0..1, not 5" in one_line(stopped.value)
    # a streaming write without the key that makes it exactly-once
    copy = with_options(spark.readStream.format("arrowlog"), spec, {"topic": "t"}).load()
    query = with_options(
        copy.writeStream.format("arrowlog"),
        spec,
        {"topic": "t", "checkpointLocation": str(tmp_path / "write-checkpoint")},
    ).start()
    with pytest.raises(StreamingQueryException) as stopped:
        query.awaitTermination(120)
    assert "InvalidConfigError: a streaming write needs option txnAppId" in one_line(stopped.value)


@pytest.mark.spark
def test_stream_progress_reports_offsets_behind_latest_as_kafka_does(
    spark: Any, tmp_path: Path
) -> None:
    spec = topic_of(tmp_path, records=5)  # partitions 0 and 1 end at 5
    log = spec.connect()
    log.append("t", pa.record_batch({"id": [7, 8, 9, 10]}, schema=SCHEMA), partition=1)
    stream = with_options(
        spark.readStream.format("arrowlog"),
        spec,
        {"topic": "t", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "7"},
    ).load()
    query = (
        stream.writeStream.format("memory")
        .queryName("behind")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    progress = [p["sources"][0] for p in query.recentProgress if p["numInputRows"]]
    first, last = progress[0], progress[-1]
    ends = json.loads(first["endOffset"])["t"]
    latest = json.loads(first["latestOffset"])["t"]
    assert latest == {"0": 5, "1": 9}
    behind = [latest[p] - ends[p] for p in ("0", "1")]
    assert sum(ends.values()) <= 7 and min(behind) > 0  # maxOffsetsPerTrigger
    assert first["metrics"] == {
        "minOffsetsBehindLatest": str(min(behind)),
        "maxOffsetsBehindLatest": str(max(behind)),
        "avgOffsetsBehindLatest": str(sum(behind) / 2),
    }
    assert last["metrics"] == {
        "minOffsetsBehindLatest": "0",
        "maxOffsetsBehindLatest": "0",
        "avgOffsetsBehindLatest": "0.0",
    }
    assert spark.table("behind").count() == 14


@pytest.mark.spark
def test_a_planning_error_under_filter_pushdown_is_one_line(
    spark: Any, tmp_path: Path, pushdown: None
) -> None:
    """With Spark's Python filter pushdown on, the Python source plans the read
    when Spark pushes the filters into it: its errors there are planning's."""
    spec = topic_of(tmp_path)
    beyond = json.dumps({"t": {"0": 50, "1": 0}})
    with pytest.raises(AnalysisException) as raised:
        read(spark, spec, "python", endingOffsets=beyond).filter("partition = 0").count()
    assert "OffsetOutOfRangeError: t/0: ending offset 50 is past the latest offset 3" in (
        one_line(raised.value)
    )
    with pytest.raises(AnalysisException) as raised:
        read(spark, spec, "python", startingOffsets="latest").filter("offset > 0").count()
    assert "InvalidConfigError: option startingOffsets: 'latest' is not allowed" in (
        one_line(raised.value)
    )


def stream_failure(spark: Any, stream: Any, checkpoint: Path, available_now: bool) -> str:
    """The one line of the error a query of ``stream`` into memory stops with."""
    writer = stream.writeStream.format("memory").option("checkpointLocation", str(checkpoint))
    writer = writer.queryName(checkpoint.name)
    query = (writer.trigger(availableNow=True) if available_now else writer).start()
    try:
        with pytest.raises(StreamingQueryException) as stopped:
            query.awaitTermination(120)
    finally:
        query.stop()
    return one_line(stopped.value)


@pytest.mark.spark
@pytest.mark.parametrize("available_now", [False, True])
def test_a_batch_only_option_of_a_stream_is_one_line_naming_it(
    spark: Any, tmp_path: Path, available_now: bool
) -> None:
    """Options a stream refuses that a schema takes (a batch read's end) are
    checked when the query starts its stream: the arrowlog error, not pyspark's
    UnboundLocalError of a reader it never got."""
    spec = topic_of(tmp_path)
    for option, value in (("endingOffsets", "latest"), ("endingTimestamp", "1700000000000")):
        stream = with_options(
            spark.readStream.format("arrowlog"), spec, {"topic": "t", option: value}
        ).load()
        line = stream_failure(spark, stream, tmp_path / f"{option}_{available_now}", available_now)
        assert f"InvalidConfigError: reading arrowlog as a stream: '{option}' applies to " in line
        assert "UnboundLocalError" not in line


@pytest.mark.spark
def test_a_streaming_write_refused_is_one_line_before_any_task(spark: Any, tmp_path: Path) -> None:
    """A streaming write checks, as a batch write does, its topic, the
    DataFrame's columns and its key column before any task runs: one line,
    not a traceback from every task."""
    spec = topic_of(tmp_path)
    log = spec.connect()
    log.create_topic("words", pa.schema([pa.field("word", pa.string(), nullable=False)]))
    source = with_options(
        spark.readStream.format("arrowlog"), spec, {"topic": "t", "startingOffsets": "earliest"}
    ).load()
    refused = {
        "unknown topic": ({"topic": "nope"}, "UnknownTopicOrPartitionError: unknown topic 'nope'"),
        "key column": (
            {"topic": "t", "keyColumn": "nope"},
            "InvalidConfigError: keyColumn 'nope' is not a column of the DataFrame",
        ),
        "columns": ({"topic": "words"}, "SchemaMismatchError: "),
    }
    for n, (options, expected) in enumerate(refused.values()):
        writer = with_options(
            source.select("id").writeStream.format("arrowlog"),
            spec,
            {"txnAppId": "copy", **options, "checkpointLocation": str(tmp_path / f"w{n}")},
        )
        query = writer.trigger(availableNow=True).start()
        try:
            with pytest.raises(StreamingQueryException) as stopped:
                query.awaitTermination(120)
        finally:
            query.stop()
        assert expected in one_line(stopped.value)
    assert log.consumer().stable_offset("words", 0) == 0  # nothing written
