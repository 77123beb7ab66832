"""Attacks on idempotent Spark batch writes (txnAppId + txnVersion), driven by
hand without a Spark session: precise schedules between the driver's requests.

Origin: the attack on Spark write keys (was tests/attack/test_spark_keys_attack.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import arrowlog
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.sink import ArrowLogWriter, committed_version

FIELDS: list[pa.Field[pa.DataType]] = [pa.field("id", pa.int64()), pa.field("name", pa.string())]
SCHEMA = pa.schema(FIELDS)
SPARK_SCHEMA = StructType([StructField("id", LongType()), StructField("name", StringType())])


def keyed(root: str, version: int, *, topic: str = "w", app: str = "nightly") -> WriteOptions:
    return WriteOptions(
        root=root, storage={}, topic=topic, key_column=None, app_id=app,
        app_version=version, transaction_timeout_ms=60_000, rows_per_batch=1_000,
    )  # fmt: skip


def rows(ids: range) -> pa.RecordBatch:
    return pa.record_batch({"id": list(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def visible(log: arrowlog.ArrowLog, topic: str = "w") -> list[int]:
    consumer = log.consumer()
    ids: list[int] = []
    for p in range(log.topic(topic).partitions):
        ids += consumer.read(topic, p).column("id").to_pylist()  # type: ignore[arg-type]
    return sorted(ids)


def run(root: str, version: int, ids: range, **kw: str) -> ArrowLogWriter:
    writer = ArrowLogWriter(keyed(root, version, **kw), SPARK_SCHEMA)
    message = writer.write(iter([rows(ids)]))
    writer.commit([message])
    return writer


@pytest.fixture
def root(tmp_path: Path) -> str:
    root = str(tmp_path / "log")
    arrowlog.connect(root).create_topic("w", SCHEMA, partitions=2)
    return root


def test_rerun_after_commit_died_past_prepare(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Version 1's driver dies right after PREPARE_COMMIT (no markers, no
    COMPLETE). A rerun of version 1 must roll it forward, then skip (docs: "It
    fences and finishes an earlier attempt")."""
    log = arrowlog.connect(root)
    first = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    message = first.write(iter([rows(range(10))]))

    def die(*args: object, **kw: object) -> None:
        raise SystemExit("driver killed after PREPARE_COMMIT")

    monkeypatch.setattr("arrowlog.producer._coordinator_session.finish", die)
    with pytest.raises(SystemExit):
        first.commit([message])
    monkeypatch.undo()
    rerun = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    rerun.commit([rerun.write(iter([rows(range(10))]))])
    assert visible(log) == list(range(10))  # holds: readers ask the coordinator
    [txn] = log.admin.list_transactions()
    assert txn.state is arrowlog.TxnState.COMPLETE_COMMIT  # fails: still PREPARE_COMMIT


def test_rerun_paused_between_fence_and_begin(root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two drivers run version 1 (a retried driver and its zombie). The first
    fences (nothing to finish) and pauses before its begin; the second runs
    version 1 to its commit. The first must not begin and write version 1 again."""
    import arrowlog.spark.sink as sink

    log = arrowlog.connect(root)
    begin = sink.begin_after  # type: ignore[attr-defined]
    other: list[ArrowLogWriter] = []

    def others_run_first(*args: object, **kw: object) -> object:
        if not other:
            monkeypatch.setattr(sink, "begin_after", begin)
            other.append(run(root, 1, range(10)))
        return begin(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sink, "begin_after", others_run_first)
    paused = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    assert other, "the schedule did not run"
    if not paused.skip:
        paused.commit([paused.write(iter([rows(range(10))]))])  # reports success too
    assert visible(log) == list(range(10))  # fails: every row twice


def test_keys_do_not_outlive_a_deleted_topic(root: str) -> None:
    """Version 1 committed to topic w; w is deleted and created anew (a new
    table, in Delta's terms). Version 1 to the new w must write its rows."""
    log = arrowlog.connect(root, config=arrowlog.LogConfig(metadata_max_age_ms=0))
    run(root, 1, range(10))
    log.delete_topic("w")
    log.create_topic("w", SCHEMA, partitions=2)
    run(root, 1, range(10))
    assert visible(log) == list(range(10))  # fails: [] (the new w got nothing)


def test_paused_older_version_rolls_the_version_back(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 1's driver fences (its first write) and pauses before its begin;
    version 2 runs and commits (its driver then dies before it can report). The
    driver of version 1 resumes and commits. A rerun of version 2 must be a no-op."""
    import arrowlog.spark.sink as sink

    log = arrowlog.connect(root)
    begin = sink.begin_after  # type: ignore[attr-defined]
    other: list[ArrowLogWriter] = []

    def others_run_first(*args: object, **kw: object) -> object:
        if not other:
            monkeypatch.setattr(sink, "begin_after", begin)
            other.append(run(root, 2, range(100, 110)))
        return begin(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sink, "begin_after", others_run_first)
    paused = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    monkeypatch.undo()
    assert other, "the schedule did not run"
    if not paused.skip:
        paused.commit([paused.write(iter([rows(range(10))]))])
    assert committed_version(log, "w", "nightly") == 2  # fails: 1
    run(root, 2, range(100, 110))  # the rerun of version 2
    assert visible(log).count(100) == 1


def test_skipped_rerun_writes_no_object(root: str, tmp_path: Path) -> None:
    """A rerun of a committed version, while a newer one runs: not a single
    object of the store changes (not even a producer id or a registration)."""
    run(root, 1, range(10))
    newer = ArrowLogWriter(keyed(root, 2), SPARK_SCHEMA)
    newer_rows = newer.write(iter([rows(range(100, 110))]))

    def snapshot() -> dict[str, int]:
        base = tmp_path / "log"
        return {str(f.relative_to(base)): f.stat().st_mtime_ns for f in base.rglob("*")}

    before = snapshot()
    rerun = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    assert rerun.skip
    message = rerun.write(iter([rows(range(10))]))
    rerun.commit([message])
    rerun.abort([message])
    assert snapshot() == before
    newer.commit([newer_rows])
    assert visible(arrowlog.connect(root)) == list(range(10)) + list(range(100, 110))


def test_the_same_keys_on_another_topic_leave_a_running_job_alone(root: str) -> None:
    """Version 1 of "nightly" is running on topic w (not committed yet). Version 1
    of "nightly" on topic x is another job: it writes and commits, and w's job
    still commits afterwards."""
    log = arrowlog.connect(root)
    log.create_topic("x", SCHEMA)
    on_w = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    w_rows = on_w.write(iter([rows(range(10))]))
    run(root, 1, range(50, 60), topic="x")
    on_w.commit([w_rows])
    assert visible(log, "x") == list(range(50, 60))
    assert visible(log, "w") == list(range(10))
    run(root, 1, range(10))  # and each topic remembers its own version
    run(root, 1, range(50, 60), topic="x")
    assert visible(log, "w") == list(range(10))
    assert visible(log, "x") == list(range(50, 60))


def test_zombie_task_appending_after_the_rerun_committed(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 1's task registers its partition and pauses before its append; its
    driver dies. The rerun fences, writes and commits version 1. Then the zombie
    task's append lands: it must never become visible nor hold back the LSO."""
    import arrowlog.spark.sink as sink

    log = arrowlog.connect(root)
    first = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    join = sink.join_partitions  # type: ignore[attr-defined]
    rerun: list[ArrowLogWriter] = []

    def join_then_pause(*args: object, **kw: object) -> None:
        join(*args, **kw)  # type: ignore[arg-type]
        monkeypatch.setattr(sink, "join_partitions", join)
        rerun.append(run(root, 1, range(10)))

    monkeypatch.setattr(sink, "join_partitions", join_then_pause)
    first.write(iter([rows(range(10))]))  # the zombie's append, after the rerun
    assert rerun and not rerun[0].skip
    assert visible(log) == list(range(10))
    assert log.stable_offsets("w") == log.end_offsets("w")
    landed = log.partition("w", 0).read().column("id").to_pylist()
    assert sorted(i for i in landed if i is not None) == sorted([*range(10)] * 2)
