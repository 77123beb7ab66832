"""Structured Streaming from and to arrowlog: a query SIGKILLed mid-run and
restarted from its checkpoint yields every record exactly once downstream."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import StructType

import arrowlog
from arrowlog.spark.options import ReadOptions
from arrowlog.spark.streaming import ArrowLogStreamReader, parse_offsets_json
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64())]
SCHEMA = pa.schema(FIELDS)
RECORDS = 3000


@pytest.mark.spark
@pytest.mark.slow
def test_a_killed_streaming_query_restarts_exactly_once(tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("src", SCHEMA, partitions=2)
    log.create_topic("dst", SCHEMA, partitions=2)
    producer = log.producer()
    for i in range(0, RECORDS, 50):
        batch = pa.record_batch({"id": list(range(i, i + 50))}, schema=SCHEMA)
        producer.send("src", batch, partition=(i // 50) % 2)
    checkpoint = str(tmp_path / "checkpoint")
    worker = [sys.executable, "-m", "tests.support.workers", "stream_copy"]
    argv = [*worker, *spec.argv(), "--out", checkpoint]
    consumer = log.consumer()

    def copied() -> int:
        return sum(consumer.stable_offset("dst", p) for p in (0, 1))

    with subprocess.Popen(
        [*argv, "--action", "run"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    ) as run:
        assert run.stdout is not None and run.stdout.readline().strip() == "STARTED"
        give_up = time.monotonic() + 240
        while copied() < 600 and time.monotonic() < give_up:  # a few micro-batches in
            time.sleep(0.1)
        run.send_signal(signal.SIGKILL)
        run.wait()
    assert 0 < copied() < RECORDS + 4, "killed before any, or after every, micro-batch"
    producer.send("src", pa.record_batch({"id": [RECORDS]}, schema=SCHEMA), partition=0)
    subprocess.run([*argv, "--action", "drain"], cwd=ROOT, check=True, timeout=300)
    ids = sorted(
        int(i or 0) for p in (0, 1) for i in consumer.read("dst", p).column("id").to_pylist()
    )
    assert ids == list(range(RECORDS + 1))  # every record once: none lost, none twice
    assert list(log.store.list("_arrowlog/staging/")) == []  # staged files swept


def stream_reader(spec: StoreSpec, **options: str) -> ArrowLogStreamReader:
    raw = {"path": spec.url, "topic": "t", **options}
    parsed = ReadOptions.parse({k.lower(): v for k, v in raw.items()}, streaming=True)
    return ArrowLogStreamReader(parsed, StructType())  # offsets and plans only


def two_partitions(spec: StoreSpec, per_partition: int) -> arrowlog.ArrowLog:
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    for p in (0, 1):
        batch = pa.record_batch({"id": list(range(per_partition))}, schema=SCHEMA)
        log.append("t", batch, partition=p)
    return log


def test_stream_offsets_take_kafkas_shape_and_old_checkpoints_still_read(tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    two_partitions(spec, 3)
    reader = stream_reader(spec, startingOffsets="earliest")
    assert reader.initialOffset() == {"t": {"0": 0, "1": 0}}
    latest = reader.latestOffset({"t": {"0": 0, "1": 0}}, ReadAllAvailable())
    assert latest == {"t": {"0": 3, "1": 3}}
    assert reader.reportLatestOffset() == latest
    old = {"t/0": 1, "t/1": 0}  # what checkpoints written before hold
    assert parse_offsets_json(old) == {("t", 0): 1, ("t", 1): 0}
    assert reader.latestOffset(old, ReadAllAvailable()) == latest
    planned = reader.partitions(old, latest)
    assert sum(p.task.rows for p in planned) == 5  # type: ignore[attr-defined]
    assert reader.partitions({"t": {"0": 1, "1": 0}}, latest) != []
    with pytest.raises(arrowlog.ArrowLogError, match="not an arrowlog stream offset"):
        parse_offsets_json({"t": 3})


@pytest.mark.parametrize("read_uncommitted", [False, True])
def test_a_topic_created_anew_is_data_loss_not_a_position(
    tmp_path: Path, read_uncommitted: bool
) -> None:
    """Offsets read in a deleted topic are no position in the one created anew
    under its name: Kafka's source reports the loss (failOnDataLoss), and
    without it the new topic is read from its start, never from the old
    offsets on (which would skip its first records once it grew past them)."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    two_partitions(spec, 3)
    isolation = "read_uncommitted" if read_uncommitted else "read_committed"
    checkpointed = stream_reader(spec, isolationLevel=isolation).initialOffset()
    assert checkpointed == {"t": {"0": 3, "1": 3}}
    quick = arrowlog.connect(
        spec.url, spec.options, config=arrowlog.LogConfig(metadata_max_age_ms=50)
    )
    quick.delete_topic("t")
    quick.create_topic("t", SCHEMA, partitions=2)
    for n in range(5):  # the new topic grows past the old offsets
        quick.append("t", pa.record_batch({"id": [100 + n]}, schema=SCHEMA), partition=0)
    strict = stream_reader(spec, isolationLevel=isolation)
    latest = strict.latestOffset(checkpointed, ReadAllAvailable())
    assert latest == {"t=2": {"0": 5, "1": 0}}  # the new topic, by its incarnation
    with pytest.raises(arrowlog.OffsetOutOfRangeError, match=r"created anew.*failOnDataLoss"):
        strict.partitions(checkpointed, latest)
    lenient = stream_reader(spec, isolationLevel=isolation, failOnDataLoss="false")
    planned = lenient.partitions(
        checkpointed, lenient.latestOffset(checkpointed, ReadAllAvailable())
    )
    assert sum(p.task.rows for p in planned) == 5  # type: ignore[attr-defined]
    assert lenient.partitions(latest, latest) == []  # and on from there as usual


def test_min_offsets_per_trigger_waits_up_to_max_trigger_delay(tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = two_partitions(spec, 2)
    start = {"t": {"0": 0, "1": 0}}
    patient = stream_reader(spec, minOffsetsPerTrigger="6", maxTriggerDelay="1h")
    # the first trigger goes at once (as in Kafka), later ones wait for 6 records
    first = patient.latestOffset(start, ReadAllAvailable())
    assert first == {"t": {"0": 2, "1": 2}}
    log.append("t", pa.record_batch({"id": [7, 8]}, schema=SCHEMA), partition=0)
    assert patient.latestOffset(first, ReadAllAvailable()) == first  # 2 < 6: wait
    log.append("t", pa.record_batch({"id": [1, 2, 3, 4]}, schema=SCHEMA), partition=1)
    assert patient.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 4, "1": 6}}
    # a zero delay has always waited long enough
    eager = stream_reader(spec, minOffsetsPerTrigger="100", maxTriggerDelay="0ms")
    eager.latestOffset(start, ReadAllAvailable())
    assert eager.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 4, "1": 6}}
    # Trigger.AvailableNow never waits
    now = stream_reader(spec, minOffsetsPerTrigger="100", maxTriggerDelay="1h")
    now.latestOffset(start, ReadAllAvailable())
    now.prepareForTriggerAvailableNow()
    assert now.latestOffset(first, ReadAllAvailable()) == {"t": {"0": 4, "1": 6}}


@pytest.mark.spark
def test_streaming_progress_shows_kafka_offsets_and_the_latest(spark: Any, tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    two_partitions(spec, 3)
    stream = (
        spark.readStream.format("arrowlog")
        .option("topic", "t")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "4")
        .load(spec.url)
    )
    query = (
        stream.writeStream.format("memory")
        .queryName("progress")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    [first, *_] = query.recentProgress
    source = first["sources"][0]
    assert json.loads(source["endOffset"]) == {"t": {"0": 2, "1": 2}}  # 4 of 6 records
    assert json.loads(source["latestOffset"]) == {"t": {"0": 3, "1": 3}}
    assert sorted(r.id for r in spark.table("progress").collect()) == [0, 0, 1, 1, 2, 2]


@pytest.mark.spark
def test_a_query_restarts_from_a_checkpoint_in_the_old_offset_shape(
    spark: Any, tmp_path: Path
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = two_partitions(spec, 3)
    checkpoint = tmp_path / "checkpoint"

    out = tmp_path / "out"

    def run() -> list[int]:
        """Everything the (recoverable) Parquet sink holds after a run."""
        stream = (
            spark.readStream.format("arrowlog")
            .option("topic", "t")
            .option("startingOffsets", "earliest")
            .load(spec.url)
        )
        stream.select("id").writeStream.format("parquet").option("path", str(out)).option(
            "checkpointLocation", str(checkpoint)
        ).trigger(availableNow=True).start().awaitTermination()
        return sorted(r.id for r in spark.read.parquet(str(out)).collect())

    assert run() == [0, 0, 1, 1, 2, 2]
    # what a checkpoint written before the Kafka shape holds
    [entry] = (checkpoint / "offsets").glob("0")
    lines = entry.read_text().splitlines()
    assert json.loads(lines[-1]) == {"t": {"0": 3, "1": 3}}
    entry.write_text("\n".join([*lines[:-1], json.dumps({"t/0": 3, "t/1": 3})]))
    log.append("t", pa.record_batch({"id": [10, 11]}, schema=SCHEMA), partition=1)
    # resumed where the old offsets say: the new rows once, nothing twice
    assert run() == [0, 0, 1, 1, 2, 2, 10, 11]


@pytest.mark.spark
def test_a_streaming_sink_compacts_after_each_micro_batch(spark: Any, tmp_path: Path) -> None:
    """Option compactAfterCommit on a streaming write: each micro-batch commits
    a transaction (segments and markers), then the topic's complete windows are
    compacted; every record is there once."""
    from arrowlog.format.topic import compacted_prefix

    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    config = arrowlog.TopicConfig(checkpoint_interval=2)
    log.create_topic("src", SCHEMA, config=config)
    log.create_topic("dst", SCHEMA, config=config)
    for i in range(12):
        log.append("src", pa.record_batch({"id": list(range(i * 10, i * 10 + 10))}, schema=SCHEMA))
    query = (
        spark.readStream.format("arrowlog")
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "20")
        .load(spec.url)
        .select("id")
        .writeStream.format("arrowlog")
        .option("topic", "dst")
        .option("txnAppId", "copy")
        .option("compactAfterCommit", "true")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(spec.url)
    )
    query.awaitTermination(300)
    ids = log.consumer().read("dst", 0).column("id").to_pylist()
    assert sorted(i for i in ids if i is not None) == list(range(120))
    assert list(spec.open().list(compacted_prefix("dst", 0)))
