"""df.write.format("arrowlog"): one transaction per job, exactly once through task
retries and job reruns, nothing visible from a failed job."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.txn.coordinator import PRODUCER_IDS_PREFIX
from tests.support.clocks import Clocks, ClockStore
from tests.support.spark import with_options
from tests.support.spark_write import (
    SCHEMA,
    committed_ids,
    files,
    frame,
    last_changed,
    partition_keys,
    writer,
)
from tests.support.stores import StoreSpec


@pytest.fixture
def small_batches(spark: Any) -> Iterator[None]:
    """Arrow batches of 100 rows, so a task writes several segments before it fails."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


@pytest.mark.spark
def test_a_job_commits_once_across_partitions(spark: Any, shared_store_spec: StoreSpec) -> None:
    log = shared_store_spec.connect()
    log.create_topic("w", SCHEMA, partitions=3)
    df = frame(spark, 3000).selectExpr("*", "cast(id % 3 as int) as partition")
    writer(df, shared_store_spec, topic="w", rowsPerBatch="400").save()
    assert committed_ids(log, "w") == list(range(3000))
    consumer = log.consumer()
    for p in range(3):
        ids = [int(i) for i in consumer.read("w", p).column("id").to_pylist() if i is not None]
        assert ids and all(i % 3 == p for i in ids)
    [txn] = log.admin.list_transactions()
    assert txn.state is arrowlog.TxnState.COMPLETE_COMMIT
    assert log.stable_offsets("w") == log.end_offsets("w")
    if shared_store_spec.kind == "local":
        # a DataFrame read from arrowlog can be written back: metadata columns drop
        reread = spark.read.format("arrowlog").option("topic", "w").load(shared_store_spec.url)
        log.create_topic("w2", SCHEMA)
        writer(reread.drop("partition"), shared_store_spec, topic="w2").save()
        assert committed_ids(log, "w2") == list(range(3000))


# Tasks fail inside the writer, after it has written segments: the last batch of
# task 0 routes its rows to a partition the topic does not have. (A failure
# upstream of the writer stops a task before the writer sees any row: Spark hands
# the writer its input only once the upstream stage produced it.)
def poisoned(first_attempt_only: bool) -> Any:
    def poison(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        context = TaskContext.get()
        retry = context is not None and context.attemptNumber() > 0
        fail = context is not None and context.partitionId() == 0
        fail = fail and not (first_attempt_only and retry)

        def out_of_range(last: pa.RecordBatch) -> pa.RecordBatch:
            i = last.schema.get_field_index("partition")
            field = last.schema.field(i)
            return last.set_column(i, field, pa.array([7] * last.num_rows, field.type))

        return last_changed(batches, out_of_range) if fail else batches

    return poison


@pytest.mark.spark
@pytest.mark.parametrize("through", ["jvm", "python"])
def test_a_task_that_always_fails_leaves_nothing_visible(
    spark: Any, tmp_path: Path, small_batches: None, through: str
) -> None:
    """The Python sink's tasks append their rows as they go (in the log, never
    visible); the JVM writer's are named by no commit (not in the log)."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2)
    df = frame(spark, 2000, partitions=2).selectExpr("*", "cast(id % 2 as int) as partition")
    df = df.mapInArrow(poisoned(False), df.schema)
    with pytest.raises(Exception, match=r"outside 0\.\.1"):
        writer(df, spec, topic="w", rowsPerBatch="100", writer=through).save()
    assert committed_ids(log, "w") == []
    everything = log.consumer(isolation_level="read_uncommitted")
    stored = sum(everything.read("w", p).num_rows for p in (0, 1))
    assert stored > 0 if through == "python" else stored == 0
    assert log.stable_offsets("w") == log.end_offsets("w")  # and the LSO is not held back


@pytest.mark.spark
@pytest.mark.parametrize("through", ["jvm", "python"])
def test_tasks_failing_on_their_first_attempt_write_every_row_once(
    spark: Any, tmp_path: Path, small_batches: None, through: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2)
    df = frame(spark, 4000, partitions=4).selectExpr("*", "cast(id % 2 as int) as partition")
    df = df.mapInArrow(poisoned(True), df.schema)
    writer(df, spec, topic="w", rowsPerBatch="100", writer=through).save()
    assert committed_ids(log, "w") == list(range(4000))
    everything = log.consumer(isolation_level="read_uncommitted")
    # the Python sink's failed attempt's rows are in the log too, never
    # visible; the JVM writer's failed attempt uploaded objects no commit names
    stored = sum(everything.read("w", p).num_rows for p in (0, 1))
    assert stored > 4000 if through == "python" else stored == 4000
    [txn] = log.admin.list_transactions()
    assert len(txn.partitions) == 2 and txn.state is arrowlog.TxnState.COMPLETE_COMMIT


@pytest.mark.spark
def test_rerunning_a_committed_job_writes_nothing(spark: Any, shared_store_spec: StoreSpec) -> None:
    log = shared_store_spec.connect()
    log.create_topic("w", SCHEMA)
    df = frame(spark, 500)
    for _ in range(2):
        writer(df, shared_store_spec, topic="w", txnAppId="nightly", txnVersion="1").save()
    assert committed_ids(log, "w") == list(range(500))
    ends = log.end_offsets("w")
    writer(df, shared_store_spec, topic="w", txnAppId="nightly", txnVersion="1").save()
    assert log.end_offsets("w") == ends  # not a byte written
    writer(df, shared_store_spec, topic="w", txnAppId="nightly", txnVersion="2").save()
    assert committed_ids(log, "w") == sorted(list(range(500)) * 2)


@pytest.mark.spark
@pytest.mark.parametrize(
    "build,options,message",
    [
        ("id, name, 'x' as extra", {}, "columns \\['extra'\\] that topic"),
        ("id", {}, "lacks columns \\['name'\\]"),
        ("id, name, cast(7 as int) as partition", {}, "outside 0..1 .*drop the column"),
        (
            "id, name, cast(7 as int) as partition",
            {"writer": "python"},
            "outside 0..1 .*drop the column",
        ),
        ("id, name", {"keyColumn": "nope"}, "keyColumn 'nope'"),
        ("id, name", {"txnAppId": "a"}, "txnAppId and txnVersion go together"),
    ],
)
def test_bad_writes_fail_clearly_and_write_nothing(
    spark: Any, tmp_path: Path, build: str, options: dict[str, str], message: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2)
    before = files(tmp_path / "log")
    with pytest.raises(Exception, match=message):
        writer(frame(spark, 10).selectExpr(*build.split(", ")), spec, topic="w", **options).save()
    assert committed_ids(log, "w") == []
    if "partition" not in build:  # the driver refuses it before the transaction begins
        assert files(tmp_path / "log") == before
    with pytest.raises(Exception, match="only mode\\('append'\\)"):
        frame(spark, 1).write.format("arrowlog").mode("overwrite").option("topic", "w").save(
            spec.url
        )


@pytest.mark.spark
def test_nulls_under_a_not_null_field_fail_the_job_and_leave_nothing_visible(
    spark: Any, tmp_path: Path
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("l", pa.list_(pa.field("item", pa.int64(), nullable=False))),
    ]
    log.create_topic("w", pa.schema(fields), partitions=2)
    df = spark.range(0, 400, 1, 2)
    for columns, message in [
        (["if(id = 77, null, id) as id", "array(id) as l"], "column 'id' has 1 null"),
        (["id", "array(id, if(id % 100 = 7, null, id)) as l"], "column 'l.item' has 2 null"),
    ]:
        with pytest.raises(Exception, match=f"SchemaMismatchError: topic 'w': {message}"):
            writer(df.selectExpr(*columns), spec, topic="w").save()
    assert log.consumer().read("w", 0).num_rows == log.consumer().read("w", 1).num_rows == 0
    assert log.stable_offsets("w") == log.end_offsets("w")  # nothing holds the LSO back


@pytest.mark.spark
def test_key_column_routes_rows_like_the_producer(spark: Any, tmp_path: Path) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("k", SCHEMA, partitions=3)
    writer(frame(spark, 300), spec, topic="k", keyColumn="id").save()
    log.create_topic("k2", SCHEMA, partitions=3)
    batch = pa.record_batch(
        {"id": list(range(300)), "name": [f"n{i}" for i in range(300)]}, schema=SCHEMA
    )
    log.producer().send_keyed("k2", batch, key="id")
    consumer = log.consumer()
    for p in range(3):
        via_spark = consumer.read("k", p).column("id").to_pylist()
        via_producer = consumer.read("k2", p).column("id").to_pylist()
        assert via_spark and sorted(via_spark, key=str) == sorted(via_producer, key=str)


@pytest.mark.spark
def test_a_job_puts_markers_only_in_the_partitions_it_wrote_to(
    spark: Any, shared_store_spec: StoreSpec, small_batches: None
) -> None:
    spec = shared_store_spec
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=4)
    for p in range(4):  # some history everywhere
        history = pa.record_batch([pa.array([-1 - p]), pa.array(["x"])], schema=SCHEMA)
        log.producer().send("w", history, partition=p)
    before = partition_keys(log, "w")
    ends = log.end_offsets("w")
    df = frame(spark, 600, partitions=2).selectExpr("*", "cast(1 as int) as partition")
    writer(df, spec, topic="w", rowsPerBatch="100").save()
    after = partition_keys(log, "w")
    assert {p: after[p] for p in (0, 2, 3)} == {p: before[p] for p in (0, 2, 3)}
    assert {p: log.end_offsets("w")[p] for p in (0, 2, 3)} == {p: ends[p] for p in (0, 2, 3)}
    assert log.stable_offsets("w") == log.end_offsets("w")
    ids = log.consumer().read("w", 1).column("id").to_pylist()
    assert sorted(ids) == [-2, *range(600)]  # type: ignore[type-var]
    [txn] = [t for t in log.admin.list_transactions() if t.transactional_id.startswith("spark")]
    assert txn.partitions == (("w", 1),)
    # a job that fails after writing to partition 1: its abort marks only there too
    failing = df.mapInArrow(poisoned(False), df.schema)
    with pytest.raises(Exception, match=r"outside 0\.\.3"):
        writer(failing, spec, topic="w", rowsPerBatch="100").save()
    final = partition_keys(log, "w")
    assert {p: final[p] for p in (0, 2, 3)} == {p: before[p] for p in (0, 2, 3)}
    assert log.stable_offsets("w") == log.end_offsets("w")
    assert sorted(log.consumer().read("w", 1).column("id").to_pylist()) == [-2, *range(600)]  # type: ignore[type-var]


@pytest.mark.spark
def test_compact_after_commit_compacts_what_the_jobs_wrote(spark: Any, tmp_path: Any) -> None:
    """Option compactAfterCommit: after each job commits, the topic's complete
    checkpoint windows are compacted; the rows read the same, and a bad value is
    refused before anything is written."""
    from arrowlog.format.topic import compacted_prefix

    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("c", SCHEMA, partitions=2, config=arrowlog.TopicConfig(checkpoint_interval=4))
    df = frame(spark, 400).selectExpr("*", "cast(id % 2 as int) as partition")
    for _ in range(4):  # each job: data segments and a marker in both partitions
        writer(df, spec, topic="c", rowsPerBatch="50", compactAfterCommit="true").save()
    assert committed_ids(log, "c") == sorted(list(range(400)) * 4)
    store = spec.open()
    assert all(list(store.list(compacted_prefix("c", p))) for p in range(2))
    before = [info.key for info in store.list("")]
    with pytest.raises(Exception, match="compactAfterCommit"):
        writer(df, spec, topic="c", compactAfterCommit="maybe").save()
    assert [info.key for info in store.list("")] == before


@pytest.mark.spark
def test_orphans_of_failed_task_attempts_go_with_compaction_and_vacuum(
    spark: Any, tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2, config=TopicConfig(checkpoint_interval=4))
    df = frame(spark, 4000, partitions=4).selectExpr("*", "cast(id % 2 as int) as partition")
    # the Python sink's failed attempts leave rows in the log (the JVM writer's
    # leave none: test_tasks_failing_on_their_first_attempt_write_every_row_once)
    poisoned_df = df.mapInArrow(poisoned(True), df.schema)
    writer(poisoned_df, spec, topic="w", rowsPerBatch="100", writer="python").save()

    def stored_rows() -> int:
        everything = log.consumer(isolation_level="read_uncommitted")
        return sum(everything.read("w", p).num_rows for p in (0, 1))

    before = stored_rows()
    assert before > 4000  # the failed attempt's rows, invisible
    claims = [i.key for i in log.store.list(PRODUCER_IDS_PREFIX)]
    assert len(claims) >= 5  # the job's transactional id, a claim per task attempt

    # a week later, the daily job: compact, then vacuum once the delay passed
    clock = ClockStore(spec.open(), start_ms=int(time.time() * 1000))
    clocks = Clocks(clock, monkeypatch)
    later = arrowlog.connect(clock)
    clocks.advance(8 * 24 * 3600 * 1000)
    later.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(TopicConfig().delete_delay_ms + 2000)
    removed = later.maintenance.vacuum()
    assert committed_ids(arrowlog.connect(spec.url), "w") == list(range(4000))
    assert stored_rows() < before
    left = {i.key for i in clock.list(PRODUCER_IDS_PREFIX)}
    holders = {
        f"{PRODUCER_IDS_PREFIX}{t.producer_id:020d}" for t in later.admin.list_transactions()
    }
    assert left <= holders  # the task attempts' claims went
    assert {r.key for r in removed} >= set(claims) - holders


# --- values as Spark's own CAST gives them, in the session's time zone ------------

#: wall clocks to write (and their dates): an ordinary one; one in Los Angeles'
#: spring-forward gap (02:30 never happened there: Spark's CAST reads it with
#: the offset before the gap, 03:30); one in its fall-back overlap (Spark takes
#: the earlier instant); one of local mean time, before standard time zones;
#: one after Sao Paulo's midnight that never was (2018-11-04 started at 01:00)
WALL_CLOCKS = [
    "2024-01-02 03:04:05.123456",
    "2024-03-10 02:30:00",
    "2024-11-03 01:30:00",
    "1850-06-01 12:00:00",
    "2018-11-04 00:30:00",
]
ZONED = pa.timestamp("us", tz="UTC")
#: a topic for each way Spark's CAST takes a time zone, or none: a wall clock
#: (TimestampNTZType) and a date into an instant, also inside a struct and a
#: list; an instant (TimestampType) into a wall clock; a wall clock into a date
#: and a date into a wall clock
TIME_FIELDS: list[pa.Field[Any]] = [
    pa.field("id", pa.int64()),
    pa.field("x", ZONED),
    pa.field("d", ZONED),
    pa.field("s", pa.struct([pa.field("t", ZONED)])),
    pa.field("a", pa.list_(ZONED)),
    pa.field("i", pa.timestamp("us")),
    pa.field("xd", pa.date32()),
    pa.field("dn", pa.timestamp("us")),
]
#: the columns written, from view ``walls`` (id, x: a wall clock, d: its date)
TIME_COLUMNS = [
    "id",
    "x",
    "d",
    "named_struct('t', x) as s",
    "array(x, cast(d as timestamp_ntz)) as a",
    "cast(x as timestamp) as i",
    "cast(d as timestamp_ntz) as xd",
    "d as dn",
]
#: what Spark's own CAST makes of them in the same session (instants as
#: microseconds since the epoch: a collected TimestampType is a datetime in the
#: Python driver's local zone, not the session's)
SPARKS_CAST = """
    select id, unix_micros(cast(x as timestamp)) as x, unix_micros(cast(d as timestamp)) as d,
           cast(cast(x as timestamp) as timestamp_ntz) as i,
           cast(cast(d as timestamp_ntz) as date) as xd, cast(d as timestamp_ntz) as dn
    from walls"""


@pytest.fixture
def session_zone(spark: Any) -> Iterator[Callable[[str | None], None]]:
    """Sets (or, with None, unsets) the session's time zone for one test; puts
    back what the session had, set or not."""
    key = "spark.sql.session.timeZone"
    was = spark.conf.getAll.get(key)

    def use(zone: str | None) -> None:
        if zone is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, zone)

    yield use
    use(was)


def walls(spark: Any) -> None:
    """View ``walls``: a row per wall clock of WALL_CLOCKS (id, x, its date d), and
    one of nulls."""
    rows = [f"({i}, timestamp_ntz'{w}')" for i, w in enumerate(WALL_CLOCKS)]
    values = ", ".join([*rows, f"({len(rows)}, null)"])
    spark.sql(
        f"select id, x, cast(x as date) as d from values {values} as v(id, x)"
    ).createOrReplaceTempView("walls")


def micros(value: Any) -> int | None:
    """An instant read back, in microseconds since the epoch."""
    if value is None:
        return None
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return int((value - epoch) // dt.timedelta(microseconds=1))


def written_as_sparks_cast(spark: Any, log: arrowlog.ArrowLog) -> None:
    """Every row of topic ``t`` holds what Spark's CAST gives in the session."""
    expected = {r["id"]: r.asDict() for r in spark.sql(SPARKS_CAST).collect()}
    rows = log.consumer().read("t", 0).to_pylist()
    assert sorted(r["id"] for r in rows) == sorted(expected)
    for row in rows:
        want = expected[row["id"]]
        got = {
            "x": micros(row["x"]),
            "d": micros(row["d"]),
            "s": micros(row["s"]["t"]),
            "a": [micros(v) for v in row["a"]],
        }
        assert got == {"x": want["x"], "d": want["d"], "s": want["x"], "a": [want["x"], want["d"]]}
        assert (row["i"], row["xd"], row["dn"]) == (want["i"], want["xd"], want["dn"])


@pytest.mark.spark
@pytest.mark.parametrize(
    "zone", ["UTC", "America/Los_Angeles", "Asia/Kolkata", "America/Sao_Paulo"]
)
def test_time_values_are_written_as_sparks_cast_gives_them_in_the_session_time_zone(
    spark: Any, tmp_path: Path, session_zone: Callable[[str | None], None], zone: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", pa.schema(TIME_FIELDS))
    session_zone(zone)
    walls(spark)
    writer(spark.table("walls").selectExpr(*TIME_COLUMNS).coalesce(1), spec, topic="t").save()
    written_as_sparks_cast(spark, log)


@pytest.mark.spark
@pytest.mark.parametrize("zone", ["America/Los_Angeles", "Asia/Kolkata"])
def test_a_streaming_write_takes_the_session_time_zone_as_a_batch_write_does(
    spark: Any, tmp_path: Path, session_zone: Callable[[str | None], None], zone: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("ids", SCHEMA)
    ids = list(range(len(WALL_CLOCKS) + 1))
    log.append("ids", pa.record_batch({"id": ids, "name": [None] * len(ids)}, schema=SCHEMA))
    log.create_topic("t", pa.schema(TIME_FIELDS))
    session_zone(zone)
    walls(spark)
    stream = with_options(spark.readStream.format("arrowlog"), spec, {"topic": "ids"})
    query = (
        stream.option("startingOffsets", "earliest")
        .load()
        .select("id")
        .join(spark.table("walls"), "id")
        .selectExpr(*TIME_COLUMNS)
        .coalesce(1)
        .writeStream.format("arrowlog")
        .option("topic", "t")
        .option("txnAppId", "walls")
        .option("storage.fsync", "false")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start(spec.url)
    )
    query.awaitTermination(300)
    assert query.exception() is None
    written_as_sparks_cast(spark, log)


@pytest.mark.spark
def test_a_wall_clock_into_an_instant_in_a_session_of_unknown_time_zone_is_refused(
    spark: Any, tmp_path: Path, session_zone: Callable[[str | None], None]
) -> None:
    """A session that leaves spark.sql.session.timeZone at its default (the
    JVM's zone) does not tell its Python tasks which it is: unless a
    TimestampType column of the rows carries it, a wall clock or a date into
    an instant fails the job, with nothing visible."""
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", pa.schema([pa.field("x", ZONED), pa.field("d", ZONED)]))
    session_zone(None)
    query = "select timestamp_ntz'2024-01-02 03:04:05' x, date'2024-01-02' d"
    with pytest.raises(Exception, match=r"InvalidConfigError: .*spark\.sql\.session\.timeZone"):
        writer(spark.sql(query), spec, topic="t").save()
    assert log.consumer().read("t", 0).num_rows == 0
    assert log.stable_offsets("t") == log.end_offsets("t")
    # a TimestampType column of the same rows carries the session's zone (the JVM's)
    log.create_topic("u", pa.schema([pa.field("x", ZONED), pa.field("at", ZONED)]))
    writer(spark.sql(f"select x, cast(x as timestamp) at from ({query})"), spec, topic="u").save()
    expected = spark.sql(f"select unix_micros(cast(x as timestamp)) x from ({query})").first()
    row = log.consumer().read("u", 0).to_pylist()[0]
    assert micros(row["x"]) == micros(row["at"]) == expected["x"]


# --- Spark's void (NullType) columns: empty array() and map() literals, select null


@pytest.mark.spark
def test_void_literals_are_written_as_empty_lists_maps_and_nulls(
    spark: Any, tmp_path: Path
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    fields: list[pa.Field[Any]] = [
        pa.field("e", pa.list_(pa.string())),
        pa.field("ee", pa.list_(pa.list_(pa.field("item", pa.int64(), nullable=False)))),
        pa.field("m", pa.map_(pa.string(), pa.int64())),
        pa.field("n", pa.int64()),
        pa.field("nl", pa.list_(pa.int64())),
        pa.field("an", pa.list_(pa.float64())),
        pa.field("st", pa.struct([pa.field("v", pa.timestamp("us", tz="UTC"))])),
    ]
    log.create_topic("t", pa.schema(fields))
    query = """select array() e, array(array()) ee, map() m, null n, null nl, array(null) an,
                      named_struct('v', null) st"""
    writer(spark.sql(query), spec, topic="t").save()
    assert log.consumer().read("t", 0).to_pylist() == [
        {"e": [], "ee": [[]], "m": [], "n": None, "nl": None, "an": [None], "st": {"v": None}}
    ]


@pytest.mark.spark
@pytest.mark.parametrize(
    "query,kind,message",
    [
        ("select null x", pa.int64(), "hold only nulls"),
        ("select array() x", pa.int64(), "cannot become int64"),
        ("select map() x", pa.list_(pa.int64()), "cannot become list"),
    ],
    ids=["null-into-not-null", "array-into-int64", "map-into-list"],
)
def test_void_columns_that_cannot_fit_are_refused_before_the_transaction_begins(
    spark: Any, tmp_path: Path, query: str, kind: pa.DataType, message: str
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("t", pa.schema([pa.field("x", kind, nullable=False)]))
    before = files(tmp_path / "log")
    with pytest.raises(Exception, match=f"SchemaMismatchError: .*{message}"):
        writer(spark.sql(query), spec, topic="t").save()
    assert files(tmp_path / "log") == before
