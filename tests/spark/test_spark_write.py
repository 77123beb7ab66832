"""df.write.format("arrowlog"): one transaction per job, exactly once through task
retries and job reruns, nothing visible from a failed job."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.compaction import MIN_TARGET_BYTES
from arrowlog.coordinator import PRODUCER_IDS_PREFIX
from tests.clocks import Clocks, ClockStore
from tests.conftest import StoreSpec
from tests.spark.conftest import with_options

FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)


def writer(df: Any, spec: StoreSpec, **options: str) -> Any:
    return with_options(df.write.format("arrowlog").mode("append"), spec, options)


def frame(spark: Any, n: int, partitions: int = 4) -> Any:
    return spark.range(0, n, 1, partitions).selectExpr("id", "concat('n', id) as name")


@pytest.fixture
def small_batches(spark: Any) -> Iterator[None]:
    """Arrow batches of 100 rows, so a task writes several segments before it fails."""
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    yield
    spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def committed_ids(log: arrowlog.ArrowLog, topic: str) -> list[int]:
    consumer = log.consumer()
    ids: list[int] = []
    for p in range(log.topic(topic).partitions):
        ids += consumer.read(topic, p).column("id").to_pylist()  # type: ignore[arg-type]
    return sorted(ids)


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
    [txn] = log.list_transactions()
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


def last_changed(
    batches: Iterator[pa.RecordBatch], change: Callable[[pa.RecordBatch], pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """``batches`` as they come, the last one through ``change``."""
    last = None
    for batch in batches:
        if last is not None:
            yield last
        last = batch
    if last is not None:
        yield change(last)


@pytest.mark.spark
def test_a_task_that_always_fails_leaves_nothing_visible(
    spark: Any, tmp_path: Path, small_batches: None
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2)
    df = frame(spark, 2000, partitions=2).selectExpr("*", "cast(id % 2 as int) as partition")
    df = df.mapInArrow(poisoned(False), df.schema)
    with pytest.raises(Exception, match=r"outside 0\.\.1"):
        writer(df, spec, topic="w", rowsPerBatch="100").save()
    assert committed_ids(log, "w") == []
    everything = log.consumer(isolation_level="read_uncommitted")
    assert sum(everything.read("w", p).num_rows for p in (0, 1)) > 0  # written, never visible
    assert log.stable_offsets("w") == log.end_offsets("w")  # and the LSO is not held back


@pytest.mark.spark
def test_tasks_failing_on_their_first_attempt_write_every_row_once(
    spark: Any, tmp_path: Path, small_batches: None
) -> None:
    spec = StoreSpec("local", str(tmp_path / "log"), {"fsync": False})
    log = spec.connect()
    log.create_topic("w", SCHEMA, partitions=2)
    df = frame(spark, 4000, partitions=4).selectExpr("*", "cast(id % 2 as int) as partition")
    df = df.mapInArrow(poisoned(True), df.schema)
    writer(df, spec, topic="w", rowsPerBatch="100").save()
    assert committed_ids(log, "w") == list(range(4000))
    everything = log.consumer(isolation_level="read_uncommitted")
    # the failed attempt's rows are in the log too, never visible
    assert sum(everything.read("w", p).num_rows for p in (0, 1)) > 4000
    [txn] = log.list_transactions()
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


def files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.mark.spark
@pytest.mark.parametrize(
    "build,options,message",
    [
        ("id, name, 'x' as extra", {}, "columns \\['extra'\\] that topic"),
        ("id", {}, "lacks columns \\['name'\\]"),
        ("id, name, cast(7 as int) as partition", {}, "outside 0..1"),
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


def partition_keys(log: arrowlog.ArrowLog, topic: str) -> dict[int, list[str]]:
    """Every object of each partition of ``topic``: segments, markers, checkpoints."""
    return {
        p: sorted(i.key for i in log.store.list(f"{topic}/{p}/"))
        for p in range(log.topic(topic).partitions)
    }


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
    [txn] = [t for t in log.list_transactions() if t.transactional_id.startswith("spark")]
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
    from arrowlog.topic import compacted_prefix

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
    writer(df.mapInArrow(poisoned(True), df.schema), spec, topic="w", rowsPerBatch="100").save()

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
    later.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(TopicConfig().delete_delay_ms + 2000)
    removed = later.vacuum()
    assert committed_ids(arrowlog.connect(spec.url), "w") == list(range(4000))
    assert stored_rows() < before
    left = {i.key for i in clock.list(PRODUCER_IDS_PREFIX)}
    holders = {f"{PRODUCER_IDS_PREFIX}{t.producer_id:020d}" for t in later.list_transactions()}
    assert left <= holders  # the task attempts' claims went
    assert {r.key for r in removed} >= set(claims) - holders
