"""Helpers for the command-line tests: run ``main`` in-process or as a real
process, snapshot a local root, and build a log with aborted batches and
transaction markers."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.cli import main

REPO = Path(__file__).resolve().parents[2]

_FIELDS: list[pa.Field[Any]] = [
    pa.field("x", pa.int64(), nullable=False),
    pa.field("s", pa.string()),
]
SCHEMA = pa.schema(_FIELDS)


def rows(*xs: int) -> pa.RecordBatch:
    return pa.record_batch({"x": list(xs), "s": [f"r{x}" for x in xs]}, schema=SCHEMA)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    """Run a command that must succeed; its stdout."""
    code = main(list(argv))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def fails(capsys: pytest.CaptureFixture[str], code: int, *argv: str) -> str:
    """Run a command that must fail with ``code``: one line on stderr, no traceback."""
    got = main(list(argv))
    err = capsys.readouterr().err
    assert got == code, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


def files(root: Path) -> dict[str, int] | None:
    """Every file under ``root`` with its size (None: no such directory)."""
    if not root.exists():
        return None
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")}


def build_mixed_log(url: str, options: dict[str, object] | None = None) -> arrowlog.ArrowLog:
    """Topic ``t`` (1 partition) whose offsets are, in order: 0-2 plain; 3-4 an
    aborted transaction, 5 its ABORT marker; 6-7 a committed transaction, 8 its
    COMMIT marker; 9 plain. read_committed sees 0 1 2 6 7 9."""
    log = arrowlog.connect(url, options)
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 1, 2))
    producer = log.producer(transactional_id="txn")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(3, 4), partition=0)
    producer.abort_transaction()
    producer.flush()  # the ABORT marker at 5
    producer.begin_transaction()
    producer.send("t", rows(6, 7), partition=0)
    producer.commit_transaction()
    producer.close()  # waits for the COMMIT marker
    log.append("t", rows(9))
    return log


def load_then_backfill(capsys: pytest.CaptureFixture[str], topic: str, tmp: Path) -> pa.Table:
    """``load --create`` 1000 rows from a Parquet file in batches of 300, then
    ``backfill`` the same file: the rerun writes nothing. Returns the rows."""
    import pyarrow.parquet as pq

    data = tmp / "in.parquet"
    table = pa.table({"x": list(range(1000))})
    pq.write_table(table, data)
    out = run(capsys, "load", topic, str(data), "--create", "--rows-per-batch", "300")
    assert "offsets [0, 1000), 1,000 rows written, 0 already there" in out
    out = run(capsys, "backfill", topic, str(data), "--rows-per-batch", "300", "--no-progress")
    assert "0 rows written, 1,000 already there" in out
    return table


def cli(*argv: str) -> list[str]:
    """The command line as a process runs it (what the ``arrowlog`` entry point runs)."""
    return [sys.executable, "-m", "arrowlog.cli", *argv]


def env(**extra: str) -> dict[str, str]:
    # this worktree's code first, whatever the venv's editable install points at
    return {**os.environ, "PYTHONPATH": str(REPO), **extra}
