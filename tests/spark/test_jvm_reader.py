"""The JVM reader against the Python one (in a default session, and with filter
pushdown on) and the library's snapshot read: the same schema, the same rows, the
same errors, for every column type and for compressed, cut and damaged segments."""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import Compression, TopicConfig
from arrowlog.spark.jvm import JAR, built_against
from tests.support.spark import python_pushdown, snapshot_rows, sorted_rows, with_options
from tests.support.stores import StoreSpec, spec_for

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(
        bool(os.environ.get("ARROWLOG_SPARK_MIN")),
        reason="the jar is built for the pyspark of make setup, not the lowest one",
    ),
]

UTC = datetime.timezone.utc
FIELDS: list[pa.Field[Any]] = [
    pa.field("i8", pa.int8()),
    pa.field("i16", pa.int16()),
    pa.field("i32", pa.int32(), nullable=False),
    pa.field("i64", pa.int64()),
    pa.field("f32", pa.float32()),
    pa.field("f64", pa.float64()),
    pa.field("b", pa.bool_()),
    pa.field("s", pa.string()),
    pa.field("ls", pa.large_string()),
    pa.field("bin", pa.binary()),
    pa.field("d", pa.date32()),
    pa.field("ts_s", pa.timestamp("s", tz="UTC")),
    pa.field("ts_ms", pa.timestamp("ms", tz="UTC")),
    pa.field("ts_us", pa.timestamp("us", tz="UTC")),
    pa.field("ts_ns", pa.timestamp("ns", tz="UTC")),
    pa.field("ntz_us", pa.timestamp("us")),
    pa.field("dec", pa.decimal128(12, 3)),
    pa.field("ints", pa.list_(pa.int64())),
    pa.field("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
]
TYPES = pa.schema(FIELDS)


def typed_rows(n: int, start: int = 0) -> pa.RecordBatch:
    when = datetime.datetime(2024, 5, 1, tzinfo=UTC)
    values: dict[str, list[Any]] = {
        "i8": [i % 100 for i in range(start, start + n)],
        "i16": [i * 7 for i in range(start, start + n)],
        "i32": list(range(start, start + n)),
        "i64": [i * 10**12 for i in range(start, start + n)],
        "f32": [i / 4 for i in range(start, start + n)],
        "f64": [float("nan") if i == 3 else i / 3 for i in range(start, start + n)],
        "b": [i % 2 == 0 for i in range(start, start + n)],
        "s": [f"s{i % 3}" for i in range(start, start + n)],  # repeats: dictionary-encoded
        "ls": [f"long {i}" for i in range(start, start + n)],
        "bin": [bytes([i % 256, 0]) for i in range(start, start + n)],
        "d": [
            datetime.date(2024, 1, 1) + datetime.timedelta(days=i) for i in range(start, start + n)
        ],
        "ts_s": [when + datetime.timedelta(seconds=i) for i in range(start, start + n)],
        "ts_ms": [when + datetime.timedelta(milliseconds=i) for i in range(start, start + n)],
        "ts_us": [when + datetime.timedelta(microseconds=i) for i in range(start, start + n)],
        "ts_ns": [when + datetime.timedelta(microseconds=7 * i) for i in range(start, start + n)],
        "ntz_us": [
            datetime.datetime(2024, 1, 1) + datetime.timedelta(minutes=i)
            for i in range(start, start + n)
        ],
        "dec": [decimal.Decimal(i) / 1000 for i in range(start, start + n)],
        "ints": [list(range(i % 4)) for i in range(start, start + n)],
        "st": [{"x": i, "y": f"y{i}"} for i in range(start, start + n)],
    }
    for name in values:  # a null in every nullable column
        if TYPES.field(name).nullable and n > 1:
            values[name][1] = None
    return pa.record_batch(values, schema=TYPES)


def read(spark: Any, spec: StoreSpec, reader: str, **options: str) -> Any:
    return with_options(spark.read.format("arrowlog"), spec, {"reader": reader, **options}).load()


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    # NaN != NaN: compare it by its text
    return sorted(
        (tuple(repr(v) if isinstance(v, float) and v != v else v for v in r) for r in df.collect()),
        key=repr,
    )


def local(tmp_path: Path) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


def test_the_jar_is_the_one_built_for_this_pyspark() -> None:
    import pyspark

    assert JAR.is_file()
    assert built_against(JAR) == pyspark.__version__


def test_a_session_built_with_configure_reads_on_the_jvm(spark: Any, tmp_path: Path) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    log.append("t", pa.record_batch({"v": [1, 2]}))
    plans = {
        reader: read(spark, spec, reader, topic="t")._jdf.queryExecution().executedPlan().toString()
        for reader in ("jvm", "python")
    }
    assert "arrowlog (JVM reader)" in plans["jvm"] and "ColumnarToRow" in plans["jvm"]
    assert "JVM reader" not in plans["python"]


def test_the_planner_kept_between_queries_plans_what_the_log_holds_now(
    spark: Any, tmp_path: Path
) -> None:
    """The driver keeps one planner process, and it keeps its connections: a query
    after an append reads the new rows, one after the topic was deleted and created
    again reads the new topic's (tests/spark/test_jvm_planner.py has the rest)."""
    spec = local(tmp_path)
    log = spec.connect(config=arrowlog.LogConfig(metadata_max_age_ms=0))  # no wait to re-create
    log.create_topic("t", pa.schema([("v", pa.int64())]), partitions=2)
    log.append("t", pa.record_batch({"v": [1, 2]}))

    def values() -> list[int]:
        return sorted(r["v"] for r in read(spark, spec, "jvm", topic="t").collect())

    assert values() == [1, 2]
    log.append("t", pa.record_batch({"v": [3]}), partition=1)
    assert values() == [1, 2, 3]
    log.delete_topic("t")
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    log.append("t", pa.record_batch({"v": [9]}))
    assert values() == [9]


def test_the_session_has_the_executors_its_master_asks_for(spark: Any) -> None:
    """``make test-spark-cluster`` runs these tests with two executors in JVMs of
    their own (a block manager each, beside the driver's)."""
    import time

    from tests.support.spark import MASTER

    want = 3 if MASTER.startswith("local-cluster[2,") else 1
    deadline = time.monotonic() + 60
    while True:  # executors register after the session starts
        spark.sparkContext.parallelize(range(4), 4).count()
        found = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size()
        if found >= want or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert found == want


@pytest.mark.parametrize(
    ("compression", "kind"),
    [
        (Compression.ZSTD, "local"),
        (Compression.LZ4, "local"),
        (Compression.NONE, "local"),
        # executors fetch pre-signed URLs; the Python reader's, the storage.* options
        pytest.param(Compression.ZSTD, "s3", marks=pytest.mark.s3),
    ],
)
def test_every_type_reads_the_same_through_both_readers(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest, compression: Compression, kind: str
) -> None:
    spec = spec_for(kind, tmp_path, request)
    log = spec.connect()
    log.create_topic("types", TYPES, partitions=2, config=TopicConfig(compression=compression))
    for k in range(4):
        log.append("types", typed_rows(6, start=6 * k), partition=k % 2)
    jvm, python = (read(spark, spec, r, topic="types") for r in ("jvm", "python"))
    assert jvm.schema == python.schema  # types, nullability, metadata column names
    assert [f.nullable for f in jvm.schema.fields][2] is False
    assert rows_of(jvm) == rows_of(python)
    assert len(rows_of(jvm)) == 24
    key = ["partition", "offset", "i32", "s", "dec", "ints", "st"]
    assert sorted_rows(jvm, key) == sorted_rows(snapshot_rows(log, "types"), key)
    # a filter on metadata and data columns, through every reader
    where = "partition = 1 and offset >= 3 and i32 < 20"
    filtered = [
        rows_of(read(spark, spec, r, topic="types").where(where)) for r in ("jvm", "python")
    ]
    with python_pushdown(spark):
        filtered.append(rows_of(read(spark, spec, "python", topic="types").where(where)))
    assert filtered[0] == filtered[1] == filtered[2] and filtered[0]
    want = snapshot_rows(
        log, "types", keep=lambda r: r["partition"] == 1 and r["offset"] >= 3 and r["i32"] < 20
    )
    got = read(spark, spec, "jvm", topic="types").where(where)
    assert sorted_rows(got, key) == sorted_rows(want, key)
    # cut segments (a start and an end inside segments), and some columns only
    cut = {
        "startingOffsets": '{"types": {"0": 2, "1": 1}}',
        "endingOffsets": '{"types": {"0": 9, "1": 10}}',
    }
    picked = ["ts_ns", "offset", "s", "st"]
    jvm, python = (
        read(spark, spec, r, topic="types", **cut).select(*picked) for r in ("jvm", "python")
    )
    assert rows_of(jvm) == rows_of(python) and len(rows_of(jvm)) == 16
    within = snapshot_rows(
        log,
        "types",
        starts={("types", 0): 2, ("types", 1): 1},
        ends={("types", 0): 9, ("types", 1): 10},
    )
    cut_key = ["partition", "offset", "s", "st"]
    got = read(spark, spec, "jvm", topic="types", **cut)
    assert sorted_rows(got, cut_key) == sorted_rows(within, cut_key)
    # no topic column at all (a count): the JVM reader loads none of them
    assert read(spark, spec, "jvm", topic="types", **cut).count() == 16
    offsets = read(spark, spec, "jvm", topic="types", **cut).select("partition", "offset")
    assert sorted(tuple(r) for r in offsets.collect()) == [
        *((0, o) for o in range(2, 9)),
        *((1, o) for o in range(1, 10)),
    ]


@pytest.mark.parametrize("compression", [Compression.LZ4, Compression.ZSTD])
def test_large_compressed_buffers_read_the_same_through_both_readers(
    spark: Any, tmp_path: Path, compression: Compression
) -> None:
    """Buffers of megabytes: pyarrow writes an LZ4 frame of many linked blocks
    (matches reaching into earlier blocks, and matches longer than their offset:
    a run of one value), some stored uncompressed; the JVM reader decodes them
    itself (Arrow's LZ4 codec was twenty times slower)."""
    import numpy as np

    spec = local(tmp_path)
    log = spec.connect()
    n = 400_000
    rng = np.random.default_rng(3)
    fields: list[pa.Field[Any]] = [
        pa.field("seq", pa.int64()),
        pa.field("noise", pa.float64()),
        pa.field("word", pa.string()),
        pa.field("runs", pa.int32()),
    ]
    schema = pa.schema(fields)
    log.create_topic("big", schema, config=TopicConfig(compression=compression))
    for k in range(2):
        log.append(
            "big",
            pa.record_batch(
                [
                    pa.array(np.arange(k * n, (k + 1) * n) % 1000),  # compresses, linked
                    pa.array(rng.random(n)),  # does not: stored blocks
                    pa.array([f"w{i % 37}-{i % 11}" for i in range(n)]),
                    pa.array(np.arange(n, dtype=np.int32) // 99_999 * 3 + k),  # long runs
                ],
                schema=schema,
            ),
        )
    jvm, python = (read(spark, spec, r, topic="big") for r in ("jvm", "python"))
    aggregate = [
        "sum(seq)",
        "sum(cast(noise * 1e9 as bigint))",
        "count(distinct word)",
        "sum(runs * offset)",
        "count(*)",
    ]
    assert jvm.selectExpr(*aggregate).collect() == python.selectExpr(*aggregate).collect()
    assert jvm.orderBy("offset").limit(5).collect() == python.orderBy("offset").limit(5).collect()


def test_nanoseconds_that_microseconds_cannot_hold_fail_both_readers(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    schema = pa.schema([("t", pa.timestamp("ns", tz="UTC"))])
    log.create_topic("ns", schema)
    log.append("ns", pa.record_batch({"t": pa.array([1_000_001], pa.timestamp("ns", tz="UTC"))}))
    for reader in ("jvm", "python"):
        with pytest.raises(Exception, match=r"(?i)nanoseconds|truncated|lose"):
            read(spark, spec, reader, topic="ns").collect()


def _segment_files(spec: StoreSpec, topic: str) -> list[Path]:
    return sorted((Path(spec.url) / topic / "0" / "segments").glob("*.arrow"))


@pytest.mark.parametrize("reader", ["jvm", "python"])
def test_a_corrupt_segment_fails_the_read_naming_the_object(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic(
        "c", pa.schema([("v", pa.int64())]), config=TopicConfig(compression=Compression.NONE)
    )
    for i in range(3):
        log.append("c", pa.record_batch({"v": list(range(100 * i, 100 * i + 100))}))
    victim = _segment_files(spec, "c")[1]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01  # inside the record batch's body
    victim.write_bytes(bytes(data))
    wanted = rf"CorruptSegmentError: \S*{victim.name}: checksum mismatch"
    with pytest.raises(Exception, match=wanted):
        read(spark, spec, reader, topic="c").collect()


@pytest.mark.parametrize("reader", ["jvm", "python"])
def test_a_missing_segment_fails_the_read_as_lost_records(
    spark: Any, tmp_path: Path, reader: str
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("m", pa.schema([("v", pa.int64())]))
    for i in range(3):
        log.append("m", pa.record_batch({"v": [i]}))
    df = read(spark, spec, reader, topic="m")
    df.schema  # noqa: B018 - the plan is made: the segment goes between plan and read
    rdd_plan = df.rdd  # planned here
    _segment_files(spec, "m")[1].unlink()
    with pytest.raises(Exception, match=r"SegmentNotFoundError: \S*\.arrow: segment missing"):
        rdd_plan.collect()


def _flip(spec: StoreSpec, key: str, at: int) -> None:
    """One bit of object ``key`` flipped at byte ``at``."""
    store = spec.open()
    data = bytearray(bytes(store.get(key)))
    data[at] ^= 0x01
    store.delete(key)
    store.put_if_absent(key, bytes(data))
    store.close()


def test_a_column_table_that_misplaces_a_column_fails_both_readers(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A column table that passes every CRC but puts column a where b is (a
    writer's layout bug, or an object someone else wrote): a read of a fetches
    b's bytes, and the reader must not let Arrow read a where the batch's own
    metadata puts it, bytes never fetched nor checked. Both readers refuse it,
    naming the object; a whole read is right."""
    import numpy as np

    from arrowlog.format.segment import column_table
    from arrowlog.partition.heads import HEADS

    spec = local(tmp_path)
    log = spec.connect()
    schema = pa.schema([("a", pa.float64()), ("b", pa.float64())])
    log.create_topic("t", schema, config=TopicConfig(compression=Compression.NONE))
    real = column_table.layout

    def misplaced(data: memoryview, schema: pa.Schema) -> Any:
        body_start, body_end, ranges = real(data, schema) or (0, 0, [])
        return body_start, body_end, [ranges[1], *ranges[1:]]

    rng = np.random.default_rng(3)
    batch = pa.record_batch([rng.random(100_000), rng.random(100_000)], schema=schema)
    with monkeypatch.context() as patch:
        patch.setattr(column_table, "layout", misplaced)
        log.append("t", batch)
    HEADS.clear()
    name = Path(log.partition("t", 0).segments()[0].key).name
    wanted = rf"CorruptSegmentError: \S*{name}: column 'a' lies outside its range"
    for reader in ("jvm", "python"):
        options = {"columns": "a"} if reader == "python" else {}
        with pytest.raises(Exception, match=wanted):
            read(spark, spec, reader, topic="t", **options).select("a").collect()
    whole = read(spark, spec, "jvm", topic="t").toArrow().sort_by("offset")  # every column
    assert whole.column("a").combine_chunks().equals(batch.column("a"))


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_a_few_columns_of_a_large_segment_are_read_by_range_and_each_checked(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """A segment above the column-read threshold, read for some of its columns: only
    their bytes (and the frame's) are fetched and checked, as the Python reader does
    with ``columns``. A damaged column no query names goes unseen; one a query names,
    or the frame, fails the read naming the object."""
    import numpy as np

    from arrowlog.format.segment.column_table import COLUMNS_KEY, ColumnTable
    from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES

    spec = spec_for(kind, tmp_path, request)
    log = spec.connect()
    n = 160_000
    fields: list[pa.Field[Any]] = [
        pa.field("a", pa.float64()),
        pa.field("b", pa.int64()),
        pa.field("c", pa.string()),
    ]
    schema = pa.schema(fields)
    log.create_topic("big", schema, config=TopicConfig(compression=Compression.ZSTD))
    rng = np.random.default_rng(7)
    for k in range(2):  # random floats: ZSTD leaves them large
        log.append(
            "big",
            pa.record_batch(
                [rng.random(n), np.arange(k * n, (k + 1) * n), [f"s{i % 5}" for i in range(n)]],
                schema=schema,
            ),
        )
    [first, second] = log.partition("big", 0).segments()
    assert first.size >= COLUMN_READ_MIN_BYTES

    def column_table(key: str) -> ColumnTable:
        store = spec.open()
        data = bytes(store.get(key))
        store.close()
        table = ColumnTable.parse(pa.ipc.open_file(data).schema.metadata[COLUMNS_KEY], 3)
        assert table is not None
        return table

    a_lo, a_hi, _ = column_table(first.key).columns[0]
    _flip(spec, first.key, (a_lo + a_hi) // 2)  # inside column a only

    def rows(reader: str, *columns: str) -> pa.Table:
        """The columns read, by offset (through Arrow: 320,000 Rows cost seconds)."""
        options = {"columns": ",".join(columns)} if reader == "python" else {}
        df = read(spark, spec, reader, topic="big", **options).select(*columns, "offset")
        table: pa.Table = df.toArrow()
        return table.sort_by("offset")

    # b and c: right, through both readers, however damaged a is
    expected = pa.table(
        {
            "b": pa.array(range(2 * n), pa.int64()),
            "c": [f"s{i % n % 5}" for i in range(2 * n)],
            "offset": pa.array(range(2 * n), pa.int64()),
        }
    )
    for reader in ("jvm", "python"):
        got = rows(reader, "b", "c")
        assert got.column_names == expected.column_names, reader
        for name in expected.column_names:
            assert got.column(name).equals(expected.column(name)), (reader, name)
    name = Path(first.key).name
    for reader in ("jvm", "python"):
        with pytest.raises(Exception, match=rf"{name}: checksum mismatch in column 'a'"):
            rows(reader, "a")
    with pytest.raises(Exception, match=rf"{name}: checksum mismatch"):  # read whole
        read(spark, spec, "jvm", topic="big").collect()
    # a bit of the frame (the record batch's metadata, just before the body)
    _flip(spec, second.key, column_table(second.key).body_start - 24)
    for reader in ("jvm", "python"):
        with pytest.raises(Exception, match=r"checksum mismatch outside the columns"):
            rows(reader, "b")


def test_a_memory_store_is_refused_by_the_jvm_reader_with_the_way_out(spark: Any) -> None:
    from arrowlog.errors import InvalidConfigError
    from arrowlog.spark.jvm_planner import location
    from arrowlog.storage.url import open_store

    with pytest.raises(InvalidConfigError, match="reader=python"):
        location(open_store("memory://x"), "t/0/segments/00000000000000000000.arrow")


def test_writes_and_streams_go_through_the_jvm_source_to_the_python_one(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("w", pa.schema([("v", pa.int64())]), partitions=2)
    df = spark.createDataFrame([(i,) for i in range(10)], "v long")
    with_options(df.write.format("arrowlog").mode("append"), spec, {"topic": "w"}).save()
    assert sorted(r.v for r in read(spark, spec, "jvm", topic="w").collect()) == list(range(10))
    stream = with_options(
        spark.readStream.format("arrowlog"), spec, {"topic": "w", "startingOffsets": "earliest"}
    ).load()
    query = (
        stream.writeStream.format("memory")
        .queryName("jvm_source_stream")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    got = spark.sql("select v from jvm_source_stream").collect()
    assert sorted(r.v for r in got) == list(range(10))
    assert isinstance(arrowlog.connect(spec.url, spec.options), arrowlog.ArrowLog)


@pytest.mark.parametrize("kind", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_compacted_segments_read_the_same_through_both_readers(
    spark: Any, tmp_path: Path, request: pytest.FixtureRequest, kind: str
) -> None:
    """Every type, two partitions, committed and aborted transactions: after
    compaction both readers read the compacted objects (one fetch per object,
    a dictionary column decoded once) and return exactly the rows, offsets and
    timestamps they returned from the segments; cut ranges and tasks split by
    minPartitions too."""
    from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
    from arrowlog.read.scan import plan_scan

    spec = spec_for(kind, tmp_path, request)
    log = spec.connect()
    config = TopicConfig(compression=Compression.ZSTD, checkpoint_interval=2)
    log.create_topic("types", TYPES, partitions=2, config=config)
    tx = log.producer(transactional_id="tx")
    tx.init_transactions()
    for k in range(12):
        if k % 4 == 3:
            tx.begin_transaction()
            tx.send("types", typed_rows(3, start=100 + k), partition=k % 2)
            tx.flush()
            (tx.abort_transaction if k % 8 == 3 else tx.commit_transaction)()
        log.append("types", typed_rows(5, start=6 * k), partition=k % 2)
    cuts = [
        {},
        {
            "startingOffsets": '{"types": {"0": 2, "1": 1}}',
            "endingOffsets": '{"types": {"0": 17, "1": 12}}',
        },
        {"minPartitions": "7"},
    ]
    before = [rows_of(read(spark, spec, "python", topic="types", **cut)) for cut in cuts]
    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert {c.partition for c in done} == {0, 1}
    keys = {s.key for t in plan_scan(spec.connect(), ["types"]).tasks for s in t.segments}
    assert any("/compacted/" in k for k in keys)
    for cut, expected in zip(cuts, before, strict=True):
        for reader in ("jvm", "python"):
            assert rows_of(read(spark, spec, reader, topic="types", **cut)) == expected, (
                reader,
                cut,
            )
    jvm = read(spark, spec, "jvm", topic="types").select("s", "offset", "timestamp")
    python = read(spark, spec, "python", topic="types").select("s", "offset", "timestamp")
    assert rows_of(jvm) == rows_of(python)
    # a filter, with and without pushdown, and the library's snapshot read
    where = "partition = 0 and offset between 3 and 14"
    filtered = [
        rows_of(read(spark, spec, r, topic="types").where(where)) for r in ("jvm", "python")
    ]
    with python_pushdown(spark):
        filtered.append(rows_of(read(spark, spec, "python", topic="types").where(where)))
    assert filtered[0] == filtered[1] == filtered[2] and filtered[0]
    key = ["partition", "offset", "i32", "s"]
    want = snapshot_rows(
        log, "types", keep=lambda r: r["partition"] == 0 and 3 <= r["offset"] <= 14
    )
    got = read(spark, spec, "jvm", topic="types").where(where)
    assert sorted_rows(got, key) == sorted_rows(want, key)
    # read_uncommitted: the aborted records compaction left out are gone from
    # both readers alike (the plan lets the object leave them out)
    uncommitted = {"isolationLevel": "read_uncommitted"}
    jvm, python = (
        read(spark, spec, r, topic="types", **uncommitted).select("i32", "partition", "offset")
        for r in ("jvm", "python")
    )
    assert rows_of(jvm) == rows_of(python)
    assert len(rows_of(jvm)) == len(before[0])  # the committed rows, no more


def test_a_stray_at_a_segments_key_fails_both_readers(spark: Any, tmp_path: Path) -> None:
    """An object at a segment's key that is not the segment the index names (a
    late PUT into a key freed by vacuum) has the segment's offsets but another
    append time: both readers refuse it, naming it, instead of reading its rows."""
    from arrowlog.format.segment import SegmentHeader, encode_segment

    spec = local(tmp_path)
    log = spec.connect()
    log.create_topic("t", pa.schema([("v", pa.int64())]), config=TopicConfig(checkpoint_interval=2))
    for v in range(4):
        log.append("t", pa.record_batch({"v": [v]}))
    key = log.partition("t", 0).segment_key(1)
    stray = encode_segment(
        pa.record_batch({"v": [100]}),
        SegmentHeader(base_offset=1, record_count=1, timestamp_ms=1, append_id="stray"),
    )
    store = spec.open()
    store.delete(key)
    store.put_if_absent(key, stray)
    for reader in ("jvm", "python"):
        with pytest.raises(Exception, match="not the segment this scan planned"):
            read(spark, spec, reader, topic="t").collect()
