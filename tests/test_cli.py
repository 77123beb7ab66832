"""The arrowlog command line, run in-process on a local directory."""

from __future__ import annotations

import json
import re
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


def files(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must fail: exit code 2, one line on stderr, no traceback."""
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.startswith("arrowlog: ") and err.count("\n") == 1
    return err


def test_bad_input_fails_in_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "log"
    (tmp_path / "dup.csv").write_text("a,a\n1,2\n")
    (tmp_path / "junk.parquet").write_text("not parquet")
    strict = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    with pa.ipc.new_file(str(tmp_path / "nulls.arrow"), strict) as w:
        w.write_batch(pa.RecordBatch.from_arrays([pa.array([1, None])], schema=strict))
    with pa.ipc.new_file(
        str(tmp_path / "meta.arrow"), strict.with_metadata({"arrowlog.header": "x"})
    ):
        pass
    run(capsys, "create-topic", str(root), "t", "--like", str(tmp_path / "nulls.arrow"))
    before = files(root)
    for line, message in [
        ("create-topic u --like {d}/dup.csv", "InvalidConfigError: .* two fields named 'a'"),
        ("create-topic u --like {d}/meta.arrow", "'arrowlog.header' is reserved"),
        ("create-topic u --like {d}/missing.parquet", "FileNotFoundError"),
        ("create-topic u --like {d}/junk.parquet", "ArrowInvalid"),
        ("load t {d}/nulls.arrow", "SchemaMismatchError: .*'x' has 1 null"),
        ("load t {d}/nulls.arrow --rows-per-batch 0", "InvalidConfigError: rows_per_batch"),
        ("load t {d}/dup.csv", "duplicate column 'a'; missing column 'x'; unexpected column 'a'$"),
    ]:
        command, *rest = line.format(d=tmp_path).split()
        assert re.search(message, fails(capsys, command, str(root), *rest).strip())
    assert files(root) == before


def test_read_only_commands_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "log"
    data = tmp_path / "in.parquet"
    pq.write_table(pa.table({"x": list(range(10))}), data)
    run(capsys, "load", str(root), "t", str(data), "--create", "--rows-per-batch", "3", "--quiet")
    before = files(root)
    for line in [
        "topics",
        "describe t",
        "read t --start 2",
        "transactions",
        "producers t",
        "metrics t",
    ]:
        command, *rest = line.split()
        run(capsys, command, str(root), *rest)
    for line in [
        "describe nope",
        "read t --start 11",
        "read t --partition 1",
        "describe-transaction nope",
        f"read t --output {tmp_path}/no/x.parquet",
    ]:
        command, *rest = line.split()
        fails(capsys, command, str(root), *rest)
    assert files(root) == before
