"""The batch writer's steps driven by hand, no Spark session: scheduled faults
between the driver's resume and its commit, and between a rerun's requests."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import arrowlog
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.sink import ArrowLogWriter, JobTransaction, TaskCommit
from arrowlog.txn.coordinator import CoordinatorLog, TxnEntry
from arrowlog.txn.distributed import join_partitions
from tests.support.spark_write import SCHEMA

SPARK_SCHEMA = StructType([StructField("id", LongType()), StructField("name", StringType())])


def test_a_commit_that_loses_its_entry_to_a_late_task_resumes_and_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "log")
    log = arrowlog.connect(root)
    log.create_topic("w", SCHEMA, partitions=2)
    options = WriteOptions(
        root=root, storage={}, topic="w", key_column=None, app_id=None, app_version=None,
        transaction_timeout_ms=60_000, rows_per_batch=1_000,
    )  # fmt: skip
    writer = ArrowLogWriter(options, SPARK_SCHEMA)
    rows = pa.record_batch({"id": [1, 2, 3], "name": ["a", "b", "c"]}, schema=SCHEMA)
    message = writer.write(iter([rows]))  # outside Spark: to partition 0
    resume = JobTransaction._resume
    late: list[int] = []

    def resume_then_a_late_task_joins(self: JobTransaction) -> arrowlog.Producer:
        producer = resume(self)
        if not late:  # the first commit's entry is taken by a failed task's late attempt
            join_partitions(log, self.transactional_id, self.epoch, [("w", 1)])
            late.append(1)
        return producer

    monkeypatch.setattr(JobTransaction, "_resume", resume_then_a_late_task_joins)
    writer.commit([message])
    assert late
    assert log.consumer().read("w", 0).column("id").to_pylist() == [1, 2, 3]
    [txn] = log.admin.list_transactions()
    assert txn.state is arrowlog.TxnState.COMPLETE_COMMIT
    assert txn.partitions == (("w", 0), ("w", 1))  # the late one got its marker too
    assert log.stable_offsets("w") == log.end_offsets("w")


def keyed(root: str, version: int) -> WriteOptions:
    return WriteOptions(
        root=root, storage={}, topic="w", key_column=None, app_id="nightly",
        app_version=version, transaction_timeout_ms=60_000, rows_per_batch=1_000,
    )  # fmt: skip


def rows(ids: range) -> pa.RecordBatch:
    return pa.record_batch({"id": list(ids), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


def test_a_rerun_whose_version_commits_between_its_read_and_its_fence_aborts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Version 1 is running when a rerun of version 1 starts (a retried driver).
    The rerun reads the coordinator: version 1 is not committed yet. Then,
    before its next request, version 1 commits and version 2 begins and writes.
    The rerun must see that version 1 is done and leave version 2 alone: a fence
    decided on its first read would abort version 2."""
    root = str(tmp_path / "log")
    log = arrowlog.connect(root)
    log.create_topic("w", SCHEMA, partitions=2)
    first = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    first_rows = first.write(iter([rows(range(10))]))
    newer: list[tuple[ArrowLogWriter, TaskCommit]] = []
    latest = CoordinatorLog.latest

    def read_then_others_act(self: CoordinatorLog) -> TxnEntry | None:
        entry = latest(self)
        if not newer:
            monkeypatch.setattr(CoordinatorLog, "latest", latest)
            first.commit([first_rows])
            second = ArrowLogWriter(keyed(root, 2), SPARK_SCHEMA)
            newer.append((second, second.write(iter([rows(range(100, 110))]))))
        return entry

    monkeypatch.setattr(CoordinatorLog, "latest", read_then_others_act)
    rerun = ArrowLogWriter(keyed(root, 1), SPARK_SCHEMA)
    assert newer, "the schedule did not run"
    assert rerun.skip
    [(second, second_rows)] = newer
    [txn] = log.admin.list_transactions()
    assert txn.state is arrowlog.TxnState.ONGOING  # version 2, untouched
    second.commit([second_rows])
    ids = log.consumer().read("w", 0).column("id").to_pylist()
    assert ids == list(range(10)) + list(range(100, 110))
    assert log.stable_offsets("w") == log.end_offsets("w")
