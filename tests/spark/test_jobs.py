"""The jobs in arrowlog/jobs/: backfill killed and rerun, exact; export_delta rerun,
no duplicates, and the Delta table equal to the committed range."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from arrowlog.jobs.export_delta import export, exported_state, read_delta
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("label", pa.string())]
SCHEMA = pa.schema(FIELDS)


def rows(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch(
        {"id": list(range(start, start + n)), "label": [f"r{i}" for i in range(start, start + n)]},
        schema=SCHEMA,
    )


@pytest.mark.slow
def test_backfill_killed_mid_run_and_rerun_is_exact(tmp_path: Path) -> None:
    data = tmp_path / "input.parquet"
    table = pa.Table.from_batches([rows(0, 300_000)])
    pq.write_table(table, data, row_group_size=10_000)
    root = str(tmp_path / "log")
    argv = [sys.executable, "-m", "arrowlog.jobs.backfill", root, "events", str(data), "--create",
            "--rows-per-batch", "1000", "--no-progress"]  # fmt: skip
    spec = StoreSpec("local", root, {})
    proc = subprocess.Popen(argv, cwd=ROOT)
    give_up = time.monotonic() + 120
    end = 0
    while proc.poll() is None and time.monotonic() < give_up:
        log = spec.connect()
        if "events" in log.list_topics():
            end = log.partition("events", 0).end_offset()
            if end >= 60_000:
                break
        time.sleep(0.01)
    assert proc.poll() is None, "the backfill finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert 0 < end < 300_000
    done = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True)
    assert "already there" in done.stdout
    got = spec.connect().read("events", 0)
    assert got.equals(table.combine_chunks())


@pytest.mark.spark
def test_export_delta_exports_committed_ranges_once(spark: Any, tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    delta = str(tmp_path / "delta")
    spec = StoreSpec("local", root, {"fsync": False})
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    p = log.producer(transactional_id="exp")
    p.init_transactions()
    with p.transaction():
        p.send("t", rows(0, 100), partition=0)
        p.send("t", rows(100, 50), partition=1)
    p.begin_transaction()
    p.send("t", rows(1000, 10), partition=0)
    p.abort_transaction()
    p.flush()  # the markers are written: the LSO no longer moves under the exports
    assert export(spark, root, "t", delta, {}) == 150
    assert export(spark, root, "t", delta, {}) == 0  # a rerun exports nothing
    with p.transaction():
        p.send("t", rows(150, 30), partition=1)
    p.flush()
    p.begin_transaction()
    p.send("t", rows(2000, 5), partition=0)  # open: past the LSO, not exported yet
    assert export(spark, root, "t", delta, {}) == 30
    exported = read_delta(delta)
    ids: list[int] = exported.column("id").to_pylist()  # type: ignore[assignment]
    assert sorted(ids) == list(range(180))
    assert exported.num_rows == 180
    state = exported_state(delta, "t")
    assert state.version == 1 and state.offsets == {
        str(k): v for k, v in log.stable_offsets("t").items()
    }
    assert {"topic", "partition", "offset", "timestamp"} <= set(exported.column_names)
