"""The batch writer's steps driven by hand, no Spark session: scheduled faults
between the driver's resume and its commit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import arrowlog
from arrowlog.distributed import join_partitions
from arrowlog.spark.options import WriteOptions
from arrowlog.spark.sink import ArrowLogWriter
from tests.spark.test_spark_write import SCHEMA

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
    resume = ArrowLogWriter._resume
    late: list[int] = []

    def resume_then_a_late_task_joins(self: ArrowLogWriter) -> arrowlog.Producer:
        producer = resume(self)
        if not late:  # the first commit's entry is taken by a failed task's late attempt
            join_partitions(log, self.transactional_id, self.epoch, [("w", 1)])
            late.append(1)
        return producer

    monkeypatch.setattr(ArrowLogWriter, "_resume", resume_then_a_late_task_joins)
    writer.commit([message])
    assert late
    assert log.consumer().read("w", 0).column("id").to_pylist() == [1, 2, 3]
    [txn] = log.list_transactions()
    assert txn.state is arrowlog.TxnState.COMPLETE_COMMIT
    assert txn.partitions == (("w", 0), ("w", 1))  # the late one got its marker too
    assert log.stable_offsets("w") == log.end_offsets("w")
