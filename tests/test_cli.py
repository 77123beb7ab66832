"""The arrowlog command line, run in-process on a local directory."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowlog
from arrowlog.cli import main


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_load_describe_read_and_transactions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(tmp_path / "log")
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"x": list(range(1000))}), data)
    out = run(
        capsys, "load", root, "t", str(data), "--create", "--rows-per-batch", "300", "--quiet"
    )
    assert "1,000 rows written" in out
    desc = json.loads(run(capsys, "describe", root, "t"))
    assert desc["partitions"][0]["high_watermark"] == 1000
    assert desc["partitions"][0]["last_stable_offset"] == 1000
    assert "(3 rows)" in run(capsys, "read", root, "t", "--start", "10", "--end", "13")

    log = arrowlog.connect(root)
    producer = log.producer(transactional_id="stuck")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", pa.record_batch({"x": [1]}))
    listed = json.loads(run(capsys, "transactions", root))
    assert [(t["transactional_id"], t["state"]) for t in listed] == [("stuck", "ONGOING")]
    assert (
        json.loads(run(capsys, "metrics", root, "t"))["partitions"]["t/0"]["last_stable_offset"]
        == 1000
    )
    assert json.loads(run(capsys, "expire-transactions", root)) == []  # within its timeout
    aborted = json.loads(run(capsys, "abort-transaction", root, "stuck"))
    assert aborted["state"] == "COMPLETE_ABORT"
    assert (
        json.loads(run(capsys, "describe-transaction", root, "stuck"))["state"] == "COMPLETE_ABORT"
    )
    [entry] = json.loads(run(capsys, "producers", root, "t"))  # the loader has no producer id
    assert entry["producer_id"] == producer.producer_id
    assert "(1,000 rows)" in run(capsys, "read", root, "t")


def test_errors_are_reported_with_their_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["describe", str(tmp_path), "nope"]) == 2
    assert "UnknownTopicOrPartitionError" in capsys.readouterr().err
    assert main(["describe-transaction", str(tmp_path), "nope"]) == 2
