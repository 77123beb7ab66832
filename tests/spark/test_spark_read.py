"""spark.read.format("arrowlog"): the same rows as the library's consumer, every
option of the Kafka source, one clear message per bad option."""

from __future__ import annotations

import json
import time
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.functions import col

import arrowlog
from arrowlog import TopicConfig
from tests.conftest import StoreSpec
from tests.spark.conftest import with_options

FIELDS: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values), "name": [f"n{v}" for v in values]}, schema=SCHEMA)


def reader(spark: Any, spec: StoreSpec, **options: str) -> Any:
    return with_options(spark.read.format("arrowlog"), spec, options).load()


def mixed_log(spec: StoreSpec) -> arrowlog.ArrowLog:
    """Partition 0 holds plain, committed, aborted and (at the end) open
    transactional records; partition 1 a committed transaction only."""
    log = spec.connect()
    log.create_topic("mix", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=3))
    plain = log.producer()
    plain.send("mix", rows(1, 2), partition=0)
    t = log.producer(transactional_id="mix-tx")
    t.init_transactions()
    with t.transaction():
        t.send("mix", rows(3), partition=0)
        t.send("mix", rows(30), partition=1)
    t.begin_transaction()
    t.send("mix", rows(4), partition=0)
    t.abort_transaction()
    plain.send("mix", rows(5), partition=0)
    t.begin_transaction()
    t.send("mix", rows(6), partition=0)  # left open: the LSO stops here
    plain.send("mix", rows(7), partition=0)
    return log


@pytest.mark.spark
def test_spark_reads_what_the_consumer_reads(spark: Any, shared_store_spec: StoreSpec) -> None:
    log = mixed_log(shared_store_spec)
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = log.consumer(isolation_level=isolation)
        df = reader(spark, shared_store_spec, topic="mix", isolationLevel=isolation)
        for p in (0, 1):
            got = df.filter(f"partition = {p}").orderBy("offset").collect()
            end = consumer.end_offset("mix", p)
            want = consumer.read("mix", p, 0, end)
            assert [r.v for r in got] == want.column("v").to_pylist(), (isolation, p)
            offsets = [r.offset for r in got]
            assert offsets == sorted(offsets) and (not offsets or offsets[-1] < end)
    committed = reader(spark, shared_store_spec, topic="mix").filter("partition = 0").collect()
    assert sorted(r.v for r in committed) == [1, 2, 3, 5]
    assert {r.topic for r in committed} == {"mix"}


@pytest.mark.spark
def test_offsets_timestamps_and_filters(spark: Any, tmp_path: Any) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    for i in range(6):
        log.append("t", rows(i * 10, i * 10 + 1), partition=i % 2)
        time.sleep(0.003)  # distinct append timestamps (milliseconds)
    starting = json.dumps({"t": {"0": 2, "1": -2}})
    ending = json.dumps({"t": {"0": -1, "1": 4}})
    df = reader(spark, spec, topic="t", startingOffsets=starting, endingOffsets=ending)
    got = sorted((r.partition, r.offset, r.v) for r in df.collect())
    assert got == [(0, 2, 20), (0, 3, 21), (0, 4, 40), (0, 5, 41),
                   (1, 0, 10), (1, 1, 11), (1, 2, 30), (1, 3, 31)]  # fmt: skip
    stamps = sorted({r.timestamp for r in reader(spark, spec, topic="t").collect()})
    middle = int(stamps[2].timestamp() * 1000)
    late = reader(spark, spec, topic="t", startingTimestamp=str(middle)).collect()
    assert all(int(r.timestamp.timestamp() * 1000) >= middle for r in late) and late
    pushed = reader(spark, spec, topic="t").filter("partition = 1 and offset >= 4")
    assert sorted(r.v for r in pushed.collect()) == [50, 51]
    everything = reader(spark, spec, topic="t").collect()
    after = reader(spark, spec, topic="t").filter(col("timestamp") >= stamps[2])
    assert sorted(r.v for r in after.collect()) == sorted(
        r.v for r in everything if r.timestamp >= stamps[2]
    )


@pytest.mark.spark
def test_input_partitions_are_sized_by_bytes_and_metadata_columns_renamed(
    spark: Any, tmp_path: Any
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    fields: list[pa.Field[Any]] = [pa.field("offset", pa.int64()), pa.field("topic", pa.string())]
    clash = pa.schema(fields)
    log.create_topic("c", clash)
    for i in range(20):
        log.append("c", pa.record_batch({"offset": [i], "topic": ["mine"]}, schema=clash))
    df = reader(spark, spec, topic="c")
    assert df.columns == ["offset", "topic", "_topic", "partition", "_offset", "timestamp"]
    assert df.rdd.getNumPartitions() == 1  # 20 tiny segments: one task
    small = reader(spark, spec, topic="c", targetSplitBytes="1")
    assert small.rdd.getNumPartitions() == 20
    row = df.orderBy("_offset").first()
    assert (row.offset, row.topic, row._topic, row._offset) == (0, "mine", "c", 0)


@pytest.mark.spark
@pytest.mark.parametrize(
    "options,message",
    [
        (
            {"startingOffsets": "{not json"},
            "startingOffsets: expected 'earliest', 'latest' or JSON",
        ),
        ({"topic": "nope"}, "unknown topic 'nope'"),
        ({"startingOffsets": '{"t": {"7": 0}}'}, "partitions 0..1, not 7"),
        (
            {"startingOffsets": '{"t": {"0": 5}}', "endingOffsets": '{"t": {"0": 2}}'},
            "after ending offset",
        ),
        ({"endingOffsets": '{"t": {"0": 99}}'}, "past the latest offset"),
        ({"isolationLevel": "dirty"}, "isolationLevel"),
        ({"startingOffsets": "latest"}, "'latest' is not allowed"),
        ({"startingOffsets": '{"t": {"0": 0}}', "failOnDataLoss": "true"}, "below the log start"),
    ],
)
def test_option_errors_say_what_is_wrong(
    spark: Any, tmp_path: Any, options: dict[str, str], message: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=2))
    for i in range(3):
        log.append("t", rows(i), partition=0)
    _advance_log_start(log, "t", 0, 1)
    with pytest.raises(Exception, match=message):  # Spark wraps our error in its own
        reader(spark, spec, **{"topic": "t", **options}).collect()


@pytest.mark.spark
def test_fail_on_data_loss_false_skips_deleted_offsets(spark: Any, tmp_path: Any) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    for i in range(3):
        log.append("t", rows(i))
    _advance_log_start(log, "t", 0, 1)
    df = reader(spark, spec, topic="t", startingOffsets='{"t": {"0": 0}}', failOnDataLoss="false")
    assert sorted(r.offset for r in df.collect()) == [1, 2]


def _advance_log_start(log: arrowlog.ArrowLog, topic: str, partition: int, log_start: int) -> None:
    """What a retention pass would do: record a higher log start in the newest
    checkpoint (arrowlog has no retention yet; the reader's checks already exist)."""
    from arrowlog.checkpoint import Checkpoint
    from arrowlog.topic import checkpoint_prefix, parse_checkpoint_key

    [info] = list(log.store.list(checkpoint_prefix(topic, partition), limit=1))
    start = parse_checkpoint_key(info.key)
    assert start is not None
    cp = Checkpoint.from_json(log.store.get(info.key), key=info.key, start=start)
    log.store.delete(info.key)
    moved = Checkpoint(
        log_start=log_start, start=cp.start, end=cp.end, segments=cp.segments, state=cp.state
    )
    log.store.put_if_absent(info.key, moved.to_json())
