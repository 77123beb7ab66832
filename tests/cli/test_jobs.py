"""``arrowlog load`` / ``backfill``: a restartable bulk load with one progress
bar; bad input gives one line and writes nothing."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

import arrowlog
from tests.support.cli import fails, files, load_then_backfill, run


def test_load_then_rerun_resumes(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    table = load_then_backfill(capsys, "t", tmp_path)
    log = arrowlog.connect(str(root))
    assert log.read("t", 0).equals(table)
    assert [s.base for s in log.partition("t", 0).segments()] == [0, 300, 600, 900]


def test_the_progress_bar_shows_total_percentage_and_eta(
    root: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from arrowlog.cli import main

    data = tmp_path / "in.arrow"
    with pa.ipc.new_file(str(data), pa.schema([("x", pa.int64())])) as writer:
        writer.write_batch(pa.record_batch({"x": list(range(500))}))
    assert main(["load", "t", str(data), "--create", "--rows-per-batch", "100"]) == 0
    err = capfd.readouterr().err
    assert re.search(r"500/500 +100% .*ETA", err), err


def test_bad_input_fails_in_one_line_and_writes_nothing(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "dup.csv").write_text("a,a\n1,2\n")
    (tmp_path / "junk.parquet").write_text("not parquet")
    strict = pa.schema([pa.field("x", pa.int64(), nullable=False)])
    with pa.ipc.new_file(str(tmp_path / "nulls.arrow"), strict) as w:
        w.write_batch(pa.RecordBatch.from_arrays([pa.array([1, None])], schema=strict))
    with pa.ipc.new_file(
        str(tmp_path / "meta.arrow"), strict.with_metadata({"arrowlog.header": "x"})
    ):
        pass
    run(capsys, "topics", "create", "t", "--schema-from", str(tmp_path / "nulls.arrow"))
    before = files(root)
    for line, code, message in [
        (
            "topics create u --schema-from {d}/dup.csv",
            2,
            "InvalidConfigError: .* two fields named 'a'",
        ),
        ("topics create u --schema-from {d}/meta.arrow", 2, "'arrowlog.header' is reserved"),
        ("load t {d}/missing.parquet", 3, "FileNotFoundError"),
        ("load t {d}/junk.parquet", 2, "ArrowInvalid"),
        ("load t {d}/nulls.arrow", 2, "SchemaMismatchError: column 'x' of .* holds null"),
        ("load t {d}/nulls.arrow --rows-per-batch 0", 2, "InvalidConfigError: rows_per_batch"),
        (
            "load t {d}/dup.csv",
            2,
            "duplicate column 'a'; missing column 'x'; unexpected column 'a'$",
        ),
        ("load nope {d}/nulls.arrow", 3, "unknown topic 'nope'"),
        ("load t {d}/nulls.arrow --partition 1", 3, "not 1"),
    ]:
        err = fails(capsys, code, *line.format(d=tmp_path).split())
        assert re.search(message, err), err
    assert files(root) == before


def test_a_parquet_file_of_nullable_columns_without_nulls_loads_into_a_not_null_topic(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyarrow writes every Parquet column nullable; ``produce`` takes the same
    rows. A null in it is still refused, naming the column, and writes nothing."""
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "clean.parquet")
    pq.write_table(pa.table({"x": [1, None]}), tmp_path / "nulls.parquet")
    run(capsys, "topics", "create", "t", "--schema", "x: int64 not null")
    out = run(capsys, "load", "t", str(tmp_path / "clean.parquet"), "--no-progress")
    assert "offsets [0, 3), 3 rows written" in out
    out = run(capsys, "load", "t", str(tmp_path / "clean.parquet"), "--no-progress")
    assert "0 rows written, 3 already there" in out  # a rerun compares the rows it holds
    before = files(root)
    err = fails(capsys, 2, "load", "t", str(tmp_path / "nulls.parquet"),
                "--start-offset", "3", "--no-progress")  # fmt: skip
    assert "column 'x' of" in err and "holds null(s)" in err
    assert files(root) == before


def test_a_null_in_a_later_row_group_is_refused_before_any_row_is_written(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file's footer (or its values) must prove the not-null columns
    hold no null before a row is written: a load that wrote its first row
    groups and then refused a null would leave a prefix no rerun can finish."""
    import pyarrow.parquet as pq

    path = tmp_path / "late-null.parquet"
    with pq.ParquetWriter(path, pa.schema([("x", pa.int64())])) as writer:
        writer.write_table(pa.table({"x": [1, 2]}))
        writer.write_table(pa.table({"x": [3, None]}))
    run(capsys, "topics", "create", "t", "--schema", "x: int64 not null")
    before = files(root)
    err = fails(capsys, 2, "load", "t", str(path), "--rows-per-batch", "2", "--no-progress")
    assert "column 'x' of" in err and "holds null(s)" in err and "nothing was written" in err
    assert files(root) == before


def test_a_load_into_a_partition_with_records_names_the_start_offset_to_give(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"x": [7, 8]}), tmp_path / "in.parquet")
    run(capsys, "topics", "create", "t", "--schema", "x: int64")
    log = arrowlog.connect(str(root))
    log.append("t", pa.record_batch({"x": [1, 2, 3]}))
    before = files(root)
    err = fails(capsys, 1, "load", "t", str(tmp_path / "in.parquet"), "--no-progress")
    assert "a new load after them is --start-offset 3" in err
    assert files(root) == before
    out = run(capsys, "load", "t", str(tmp_path / "in.parquet"), "--start-offset", "3",
              "--no-progress")  # fmt: skip
    assert "offsets [3, 5), 2 rows written" in out
