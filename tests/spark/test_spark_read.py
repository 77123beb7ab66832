"""spark.read.format("arrowlog"): the same rows as the library's consumer, every
option of the Kafka source, one clear message per bad option. Every read runs
through each reader (the JVM one, the Python one in a default session, and with
filter pushdown on), and the rows are those of the library's own
``read_snapshot`` of every partition read, filtered after."""

from __future__ import annotations

import json
import os
import time
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.functions import col

import arrowlog
from arrowlog import Compression, TopicConfig
from tests.support.spark import reader_option, snapshot_rows, sorted_rows, with_options
from tests.support.stores import StoreSpec

# every test here reads through every reader
pytestmark = pytest.mark.usefixtures("every_reader")

FIELDS: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)
#: the columns compared with the library's snapshot read
ROW = ["topic", "partition", "offset", "v", "name"]


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
            every = snapshot_rows(log, "mix", isolation_level=isolation)
            snapshot = [r for r in every if r["partition"] == p]
            assert sorted_rows(df.filter(f"partition = {p}"), ROW) == sorted_rows(snapshot, ROW)
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
    cut = snapshot_rows(log, "t", starts={("t", 0): 2}, ends={("t", 1): 4})
    assert sorted_rows(df, ROW) == sorted_rows(cut, ROW)
    stamps = sorted({r.timestamp for r in reader(spark, spec, topic="t").collect()})
    middle = int(stamps[2].timestamp() * 1000)
    late = reader(spark, spec, topic="t", startingTimestamp=str(middle))
    assert all(int(r.timestamp.timestamp() * 1000) >= middle for r in late.collect())
    consumer = log.consumer()
    from_middle = {("t", p): consumer.offset_for_time("t", p, middle) for p in (0, 1)}
    want = snapshot_rows(log, "t", starts=from_middle)
    assert sorted_rows(late, ROW) == sorted_rows(want, ROW) and want
    pushed = reader(spark, spec, topic="t").filter("partition = 1 and offset >= 4")
    assert sorted(r.v for r in pushed.collect()) == [50, 51]
    want = snapshot_rows(log, "t", keep=lambda r: r["partition"] == 1 and r["offset"] >= 4)
    assert sorted_rows(pushed, ROW) == sorted_rows(want, ROW)
    everything = reader(spark, spec, topic="t").collect()
    after = reader(spark, spec, topic="t").filter(col("timestamp") >= stamps[2])
    assert sorted(r.v for r in after.collect()) == sorted(
        r.v for r in everything if r.timestamp >= stamps[2]
    )
    want = snapshot_rows(log, "t", keep=lambda r: r["timestamp_ms"] >= middle)
    assert sorted_rows(after, ROW) == sorted_rows(want, ROW)


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
    columns = ["_topic", "_offset", "offset", "topic"]
    assert sorted_rows(small, columns) == sorted_rows(snapshot_rows(log, "c"), columns)


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
    log.delete_records("t", 0, 1)
    with pytest.raises(Exception, match=message):  # Spark wraps our error in its own
        reader(spark, spec, **{"topic": "t", **options}).collect()


@pytest.mark.spark
def test_reads_below_the_log_start_follow_fail_on_data_loss(
    spark: Any, shared_store_spec: StoreSpec
) -> None:
    """Records deleted with delete_records, and their segments removed by
    vacuum: a read from an offset below the log start fails (the Kafka
    source's failOnDataLoss=true) or starts at the log start (false)."""
    import time

    spec = shared_store_spec
    log = spec.connect()
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2, delete_delay_ms=100))
    for i in range(6):
        log.append("t", rows(i))
    log.delete_records("t", 0, 3)
    from_zero = '{"t": {"0": 0}}'
    for removed in (False, True):
        if removed:
            time.sleep(2.2)  # the delay, and the store clock's second
            assert log.maintenance.vacuum()
        with pytest.raises(Exception, match="below the log start 3"):
            reader(spark, spec, topic="t", startingOffsets=from_zero).collect()
        df = reader(spark, spec, topic="t", startingOffsets=from_zero, failOnDataLoss="false")
        assert sorted(r.offset for r in df.collect()) == [3, 4, 5]
        assert sorted(r.offset for r in reader(spark, spec, topic="t").collect()) == [3, 4, 5]
        assert sorted_rows(df, ROW) == sorted_rows(snapshot_rows(log, "t"), ROW)


def timed_log(spec: StoreSpec, partitions: int = 2, appends: int = 6) -> list[int]:
    """Topic ``t``: ``appends`` two-row batches spread round-robin over the
    partitions, each with its own append timestamp; returns the timestamps (ms)
    in append order."""
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=partitions)
    stamps = []
    for i in range(appends):
        p = i % partitions
        log.append("t", rows(i * 10, i * 10 + 1), partition=p)
        [last] = log.partition("t", p).summaries()[-1:]
        stamps.append(last.timestamp_ms)
        time.sleep(0.003)  # distinct append timestamps (milliseconds)
    return stamps


def local_spec(tmp_path: Any) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


@pytest.mark.spark
def test_filters_are_exact_with_and_without_pushdown(
    spark: Any, tmp_path: Any, every_reader: str
) -> None:
    """A default session (pushdown off) reads and filters; with the flag on, the
    filters shrink the plan: fewer segments, fewer tasks, the same rows."""
    spec = local_spec(tmp_path)
    timed_log(spec)
    log = spec.connect()
    df = reader(spark, spec, topic="t", targetSplitBytes="1")  # a task per segment
    assert df.rdd.getNumPartitions() == 6
    some = df.filter("partition = 1 and offset >= 2")
    assert sorted(r.v for r in some.collect()) == [30, 31, 50, 51]
    want = snapshot_rows(log, "t", keep=lambda r: r["partition"] == 1 and r["offset"] >= 2)
    assert sorted_rows(some, ROW) == sorted_rows(want, ROW)
    # the JVM reader pushes filters down in any session; the Python source only
    # where Spark's Python pushdown flag is on
    assert some.rdd.getNumPartitions() == (6 if every_reader == "python" else 2)
    first = df.filter("offset = 0")
    assert sorted(r.v for r in first.collect()) == [0, 10]
    want = snapshot_rows(log, "t", keep=lambda r: r["offset"] == 0)
    assert sorted_rows(first, ROW) == sorted_rows(want, ROW)


@pytest.mark.spark
def test_unknown_options_are_refused_through_spark_read(spark: Any, tmp_path: Any) -> None:
    spec = local_spec(tmp_path)
    timed_log(spec)
    with pytest.raises(Exception, match="did you mean 'startingOffsets'"):
        reader(spark, spec, topic="t", startingOffset="earliest").collect()
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers.* no brokers"):
        reader(spark, spec, topic="t", **{"kafka.bootstrap.servers": "b:9092"}).collect()


@pytest.mark.spark
def test_assign_and_subscribe_pattern(spark: Any, tmp_path: Any) -> None:
    spec = local_spec(tmp_path)
    log = spec.connect()
    for name, base in (("ev.a", 0), ("ev.b", 100), ("other", 200)):
        log.create_topic(name, SCHEMA, partitions=2)
        for p in (0, 1):
            log.append(name, rows(base + p), partition=p)
    assigned = reader(spark, spec, assign='{"ev.a": [1], "ev.b": [0, 1]}')
    assert sorted((r.topic, r.partition, r.v) for r in assigned.collect()) == [
        ("ev.a", 1, 1), ("ev.b", 0, 100), ("ev.b", 1, 101)
    ]  # fmt: skip
    want = snapshot_rows(log, [], partitions=[("ev.a", 1), ("ev.b", 0), ("ev.b", 1)])
    assert sorted_rows(assigned, ROW) == sorted_rows(want, ROW)
    matched = reader(spark, spec, subscribePattern=r"ev\..")
    assert sorted(r.v for r in matched.collect()) == [0, 1, 100, 101]
    assert sorted_rows(matched, ROW) == sorted_rows(snapshot_rows(log, ["ev.a", "ev.b"]), ROW)
    assert reader(spark, spec, subscribe="other").count() == 2
    with pytest.raises(Exception, match="subscribePattern 'ev' matches no topic"):
        reader(spark, spec, subscribePattern="ev").collect()  # the whole name must match
    with pytest.raises(Exception, match=r"partitions 0\.\.1, not 5"):
        reader(spark, spec, assign='{"ev.a": [5]}').collect()
    with pytest.raises(Exception, match="exactly one of the options"):
        reader(spark, spec, topic="ev.a", subscribePattern="ev.*").collect()


@pytest.mark.spark
def test_offsets_by_timestamp(spark: Any, tmp_path: Any) -> None:
    spec = local_spec(tmp_path)
    stamps = timed_log(spec)  # partition 0: appends 0, 2, 4; partition 1: 1, 3, 5

    def read(**options: str) -> list[tuple[int, int]]:
        got = reader(spark, spec, topic="t", **options).collect()
        return sorted((r.partition, r.v) for r in got)

    starting = json.dumps({"t": {"0": stamps[2], "1": stamps[5]}})
    assert read(startingOffsetsByTimestamp=starting) == [
        (0, 20), (0, 21), (0, 40), (0, 41), (1, 50), (1, 51)
    ]  # fmt: skip
    log, consumer = spec.connect(), spec.connect().consumer()
    starts = {("t", p): consumer.offset_for_time("t", p, stamps[2 + 3 * p]) for p in (0, 1)}
    df = reader(spark, spec, topic="t", startingOffsetsByTimestamp=starting)
    assert sorted_rows(df, ROW) == sorted_rows(snapshot_rows(log, "t", starts=starts), ROW)
    # startingTimestamp takes precedence over the per-partition timestamps
    both = read(startingOffsetsByTimestamp=starting, startingTimestamp=str(stamps[4]))
    assert both == [(0, 40), (0, 41), (1, 50), (1, 51)]
    # no record at or after partition 1's timestamp: it ends at the latest offset
    ending = json.dumps({"t": {"0": stamps[2], "1": stamps[5] + 1}})
    assert read(endingOffsetsByTimestamp=ending) == [
        (0, 0), (0, 1), (1, 10), (1, 11), (1, 30), (1, 31), (1, 50), (1, 51)
    ]  # fmt: skip
    late = json.dumps({"t": {"0": stamps[4], "1": stamps[5] + 1}})
    with pytest.raises(Exception, match="t/1: no record at or after timestamp"):
        read(startingOffsetsByTimestamp=late)
    latest = read(startingOffsetsByTimestamp=late, startingOffsetsByTimestampStrategy="latest")
    assert latest == [(0, 40), (0, 41)]
    with pytest.raises(Exception, match="must give every partition read a timestamp"):
        read(startingOffsetsByTimestamp=json.dumps({"t": {"0": stamps[0]}}))


@pytest.mark.spark
def test_min_partitions_splits_large_partitions(spark: Any, tmp_path: Any) -> None:
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", rows(*range(10)), partition=0)
    log.append("t", rows(100), partition=1)
    assert reader(spark, spec, topic="t").rdd.getNumPartitions() == 2
    df = reader(spark, spec, topic="t", minPartitions="5")
    # in proportion to rows: 10 rows -> 5 tasks, 1 row -> 1 task
    assert df.rdd.getNumPartitions() == 6
    got = sorted((r.partition, r.offset, r.v) for r in df.collect())
    assert got == [(0, i, i) for i in range(10)] + [(1, 0, 100)]
    assert sorted_rows(df, ROW) == sorted_rows(snapshot_rows(log, "t"), ROW)


@pytest.mark.spark
@pytest.mark.s3
def test_structured_storage_options_reach_the_store(
    spark: Any, s3_server: Any, every_reader: str
) -> None:
    spec = StoreSpec("s3", s3_server.url(f"json-options-{every_reader}"), s3_server.storage_options)
    timed_log(spec, appends=2)
    df = (
        spark.read.format("arrowlog")
        .option("reader", reader_option(every_reader))
        .option("topic", "t")
        .option("storage.endpoint_url", s3_server.endpoint)
        .option("storage.key", s3_server.access_key)
        .option("storage.secret", s3_server.secret_key)
        .option("storage.client_kwargs", json.dumps({"region_name": "us-east-1"}))
        .load(spec.url)
    )
    assert sorted(r.v for r in df.collect()) == [0, 1, 10, 11]
    assert sorted_rows(df, ROW) == sorted_rows(snapshot_rows(spec.connect(), "t"), ROW)
    with pytest.raises(Exception, match=r"storage\.client_kwargs: expected a JSON object"):
        df.sparkSession.read.format("arrowlog").option("topic", "t").option(
            "storage.client_kwargs", "{'region_name': 'us-east-1'}"
        ).load(spec.url).collect()


@pytest.mark.spark
def test_register_by_hand(spark: Any, tmp_path: Any) -> None:
    """arrowlog.spark.register(spark), for sessions whose lookup cannot see the
    package, is harmless where it can: no DATA_SOURCE_ALREADY_EXISTS, and the
    format reads as before. (Spark shows no difference between a registered and a
    discovered source, so this cannot prove that registration alone suffices.)"""
    import arrowlog.spark

    spec = local_spec(tmp_path)
    timed_log(spec, appends=2)
    arrowlog.spark.register(spark)
    df = reader(spark, spec, topic="t")
    assert sorted(r.v for r in df.collect()) == [0, 1, 10, 11]
    assert sorted_rows(df, ROW) == sorted_rows(snapshot_rows(spec.connect(), "t"), ROW)


@pytest.mark.spark
def test_the_columns_option_reads_those_columns_of_large_segments(
    spark: Any, shared_store_spec: StoreSpec
) -> None:
    """Segments above the column-read threshold are fetched column by column:
    the rows are the consumer's, in the order asked, metadata columns after."""
    import numpy as np

    from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES

    log = shared_store_spec.connect()
    n = 150_000
    fields: list[pa.Field[Any]] = [
        pa.field("f", pa.float64()),
        pa.field("i", pa.int64()),
        pa.field("kind", pa.string()),
    ]
    schema = pa.schema(fields)
    log.create_topic("wide", schema, config=TopicConfig(compression=Compression.NONE))
    for s in range(2):
        rng = np.random.default_rng(s)
        log.append(
            "wide",
            pa.record_batch(
                [
                    pa.array(rng.random(n)),
                    pa.array(np.arange(s * n, (s + 1) * n)),
                    pa.array(np.array(["a", "b", "c"])[rng.integers(0, 3, n)]),
                ],
                schema=schema,
            ),
        )
    assert min(r.size for r in log.partition("wide", 0).segments()) >= COLUMN_READ_MIN_BYTES
    df = reader(spark, shared_store_spec, topic="wide", columns="kind,i")
    assert df.columns == ["kind", "i", "topic", "partition", "offset", "timestamp"]
    got = df.orderBy("offset").select("kind", "i", "offset").toArrow()
    want = log.consumer().read("wide", columns=["kind", "i"])
    assert got.select(["kind", "i"]).equals(want)
    snapshot = log.consumer().read_snapshot({("wide", 0): (None, None)}, columns=["kind", "i"])
    assert got.select(["kind", "i"]).equals(snapshot.tables[("wide", 0)])
    assert got.column("offset").to_pylist() == list(range(2 * n))
    with pytest.raises(Exception, match="no column 'nope'"):
        reader(spark, shared_store_spec, topic="wide", columns="kind,nope").collect()


@pytest.mark.spark
def test_filters_on_data_columns_skip_segments_by_their_statistics(
    spark: Any, tmp_path: Any, every_reader: str
) -> None:
    """With pushdown on, filters on data columns leave out the segments whose
    statistics rule them out (fewer tasks) and Spark still filters the rows: the
    same rows either way, NaN (above every number in Spark) and nulls included."""
    spec = local_spec(tmp_path)
    log = spec.connect()
    fields: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("f", pa.float64())]
    log.create_topic("s", pa.schema(fields))
    for k in range(6):  # segment k: v in [10k, 10k + 10), f = v, segment 5 has a NaN
        values = list(range(10 * k, 10 * k + 10))
        floats: list[float | None] = [float(v) for v in values]
        if k == 5:
            floats[0] = float("nan")
        if k == 2:
            floats[1] = None
        log.append("s", pa.record_batch([values, floats], schema=pa.schema(fields)))
    df = reader(spark, spec, topic="s", targetSplitBytes="1")  # a task per segment
    assert df.rdd.getNumPartitions() == 6
    # the JVM reader pushes filters down in any session; the Python source only
    # where Spark's Python pushdown flag is on
    pushed = every_reader != "python"
    some = df.filter("v >= 35 and v < 42")
    assert sorted(r.v for r in some.collect()) == list(range(35, 42))
    assert some.rdd.getNumPartitions() == (2 if pushed else 6)
    huge = df.filter("f > 1e300")  # only the NaN, which Spark holds above every number
    assert [r.v for r in huge.collect()] == [50]
    assert huge.rdd.getNumPartitions() == (1 if pushed else 6)
    nulls = df.filter("f is null")
    assert [r.v for r in nulls.collect()] == [21]
    assert nulls.rdd.getNumPartitions() == (1 if pushed else 6)
    assert df.filter("v in (3, 57)").rdd.getNumPartitions() == (2 if pushed else 6)
    columns = ["partition", "offset", "v", "f"]
    for got, keep in (
        (some, lambda r: 35 <= r["v"] < 42),
        (huge, lambda r: r["f"] is not None and (r["f"] != r["f"] or r["f"] > 1e300)),
        (nulls, lambda r: r["f"] is None),
    ):
        assert sorted_rows(got, columns) == sorted_rows(snapshot_rows(log, "s", keep=keep), columns)


def torn_log(spec: StoreSpec) -> arrowlog.ArrowLog:
    """Topic ``t`` of three partitions: an open transaction A holds partition 1's
    LSO; a committed transaction B has rows 10, 11 in partition 0 and 12, 13 in
    partition 1, those behind A's. Plain rows: 1, 2, 3 in partition 0 before B
    and 4 after it, 20, 21 in partition 2. B's append time is neither's."""
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=3)
    log.append("t", rows(1, 2, 3), partition=0)
    log.append("t", rows(20, 21), partition=2)
    a = log.producer(transactional_id="a")
    a.init_transactions()
    a.begin_transaction()
    a.send("t", rows(100), partition=1)
    a.flush()  # left open
    b = log.producer(transactional_id="b")
    b.init_transactions()
    time.sleep(0.003)  # distinct append timestamps (milliseconds)
    with b.transaction():
        b.send("t", rows(10, 11), partition=0)
        b.send("t", rows(12, 13), partition=1)
    b.flush()  # its markers
    time.sleep(0.003)
    log.append("t", rows(4), partition=0)
    return log


@pytest.mark.spark
def test_a_filter_picks_rows_of_the_reads_snapshot_and_never_moves_where_it_ends(
    spark: Any, shared_store_spec: StoreSpec, every_reader: str
) -> None:
    """The snapshot of a read is decided by its options alone (every partition
    read, its offsets and isolation), as a read without a filter decides it;
    filters on partition, offset and timestamp pick rows of it. B is visible in
    partition 0 but not in partition 1 (behind A's open records), so the
    snapshot ends partition 0 before B. A filter keeping partition 0 alone, or
    offsets that end before B, must not let B in: every reader returns what
    the library's read_snapshot of every partition, filtered after, returns.
    (An adversary found the JVM reader and the Python one with pushdown
    returning B's partition-0 rows there, and the Python one in a default
    session not.)"""
    spec = shared_store_spec
    log = torn_log(spec)
    assert log.stable_offsets("t") == {0: 7, 1: 0, 2: 2}  # B's marker at 5, row 4 at 6
    b_ms = next(s.timestamp_ms for s in log.partition("t", 0).summaries() if s.transactional)

    def load() -> Any:  # a DataFrame per query: without the jar, Spark reuses its first plan
        return reader(spark, spec, topic="t", targetSplitBytes="1")  # a task per segment

    cases: dict[str, tuple[list[int], Any]] = {
        "true": ([1, 2, 3, 20, 21], lambda r: True),
        "partition = 0": ([1, 2, 3], lambda r: r["partition"] == 0),
        "partition in (0, 2)": ([1, 2, 3, 20, 21], lambda r: r["partition"] in (0, 2)),
        "offset < 5": ([1, 2, 3, 20, 21], lambda r: r["offset"] < 5),
        "partition = 0 and offset >= 3": ([], lambda r: r["partition"] == 0 and r["offset"] >= 3),
        f"partition = 0 and timestamp <= timestamp_millis({b_ms})": (
            [1, 2, 3],
            lambda r: r["partition"] == 0 and r["timestamp_ms"] <= b_ms,
        ),
        f"timestamp >= timestamp_millis({b_ms})": ([], lambda r: r["timestamp_ms"] >= b_ms),
    }
    for where, (values, keep) in cases.items():
        got = [r.asDict() for r in load().filter(where).collect()]
        assert sorted(r["v"] for r in got) == values, where
        assert sorted_rows(got, ROW) == sorted_rows(snapshot_rows(log, "t", keep=keep), ROW), where
    # the filters were pushed down (fewer tasks), except in a default session
    pushed = every_reader != "python"
    assert load().rdd.getNumPartitions() == 2  # a segment of partition 0, one of 2
    assert load().filter("partition = 0").rdd.getNumPartitions() == (1 if pushed else 2)


@pytest.mark.spark
@pytest.mark.skipif(
    bool(os.environ.get("ARROWLOG_SPARK_MIN")),
    reason="without the jar, Spark's own Python source keeps a DataFrame's first plan",
)
def test_each_query_of_a_read_plans_its_own_snapshot(spark: Any, tmp_path: Any) -> None:
    """Every query made of a read (a filter, a select, a count) takes its own
    snapshot when it is planned, whatever the reader: one after an append
    reads the new rows, and (pushdown on) one without a filter after a
    filtered one reads every row. Spark's PythonDataSourceV2 keeps the first
    plan of a read for every query made of it (under pushdown, the last
    filtered query's plan, whose pushed filters Spark does not apply again:
    too few rows); the JVM source plans each Python batch scan anew, as its
    own reader does. (A DataFrame's own plan is made once, at its first
    action, as Spark does for every source.)"""
    spec = local_spec(tmp_path)
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", rows(1, 2), partition=0)
    log.append("t", rows(3), partition=1)
    df = reader(spark, spec, topic="t")
    assert sorted(r.v for r in df.filter("partition = 0").collect()) == [1, 2]
    assert sorted(r.v for r in df.select("v").collect()) == [1, 2, 3]
    log.append("t", rows(4), partition=1)
    assert sorted(r.v for r in df.select("v").collect()) == [1, 2, 3, 4]
    assert df.count() == 4
    assert sorted(r.v for r in df.filter("partition = 1").collect()) == [3, 4]
    assert sorted_rows(df, ROW) == sorted_rows(snapshot_rows(log, "t"), ROW)
