"""Restartable bulk loading: SIGKILL the loader mid-load, rerun it, and the
partition holds the input exactly once, in order."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowlog
from arrowlog.producer.bulkload import LoadMismatchError, bulk_load, rechunk
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
ROWS = 240_000


def make_input(path: Path) -> pa.Table:
    ids = pa.array(range(ROWS), pa.int64())
    table = pa.table(
        {
            "id": ids,
            "label": pa.array([f"row-{i}" for i in range(ROWS)]),
            "v": pa.array([i * 0.5 for i in range(ROWS)]),
        }
    )
    pq.write_table(table, path, row_group_size=7_777)  # row groups unaligned with chunks
    return table


def loader(spec: StoreSpec, data: Path) -> list[str]:
    argv = [sys.executable, "-m", "arrowlog.cli", "load", "--root", spec.url, "bulk", str(data),
            "--create", "--rows-per-batch", "800", "--quiet"]  # fmt: skip
    for key, value in spec.options.items():
        if key == "endpoint_url":
            argv += ["--endpoint-url", str(value)]
        elif key in ("key", "secret", "fsync"):
            argv += ["--option", f"{key}={value}"]
    return argv


@pytest.mark.slow
def test_a_loader_killed_mid_load_resumes_exactly_once(
    shared_store_spec: StoreSpec, tmp_path: Path
) -> None:
    data = tmp_path / "input.parquet"
    table = make_input(data)
    env = dict(os.environ)
    if shared_store_spec.kind == "s3":
        env.update(AWS_DEFAULT_REGION="us-east-1")
    watcher = shared_store_spec.connect()
    kills = []
    for fraction in (0.15, 0.45, 0.8):
        proc = subprocess.Popen(loader(shared_store_spec, data), cwd=ROOT, env=env)
        give_up = time.monotonic() + 300
        end = 0
        while proc.poll() is None and time.monotonic() < give_up:
            if "bulk" in watcher.list_topics():
                end = watcher.partition("bulk", 0).end_offset()
                if end >= fraction * ROWS:
                    break
            time.sleep(0.005)
        assert proc.poll() is None, "the loader finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills.append(end)
    assert kills == sorted(kills) and 0 < kills[0] < ROWS

    def run_to_the_end() -> str:
        argv = loader(shared_store_spec, data)
        done = subprocess.run(argv, cwd=ROOT, env=env, check=True, capture_output=True, text=True)
        return done.stdout

    summary = re.search(r"([\d,]+) rows written, ([\d,]+) already there", run_to_the_end())
    assert summary is not None
    written, skipped = (int(n.replace(",", "")) for n in summary.groups())
    assert skipped >= kills[-1] and written + skipped == ROWS
    got = shared_store_spec.connect().read("bulk", 0)
    assert got.num_rows == ROWS
    assert got.equals(table.combine_chunks())
    assert "0 rows written" in run_to_the_end()  # a rerun after completion writes nothing


def test_rechunk_cuts_the_same_however_the_input_is_batched() -> None:
    table = pa.table({"x": list(range(100))})
    a = [b.to_pylist() for b in rechunk(table.to_batches(max_chunksize=7), 30)]
    b = [b.to_pylist() for b in rechunk(table.to_batches(max_chunksize=100), 30)]
    assert a == b and [len(c) for c in a] == [30, 30, 30, 10]


def test_a_load_refuses_a_log_that_does_not_hold_its_input() -> None:
    log = arrowlog.connect("memory://")
    schema = pa.schema([("x", pa.int64())])
    log.create_topic("t", schema)
    part = log.partition("t", 0)
    part.append(pa.record_batch({"x": [1, 2, 3]}, schema=schema))
    other_input = [pa.record_batch({"x": list(range(10, 20))}, schema=schema)]
    with pytest.raises(LoadMismatchError, match="differ from the input"):
        bulk_load(part, other_input, start_offset=0, rows_per_batch=4)
    with pytest.raises(LoadMismatchError, match="before the load's start offset"):
        bulk_load(part, other_input, start_offset=5)
    short_input = [pa.record_batch({"x": [1, 2]}, schema=schema)]
    with pytest.raises(LoadMismatchError, match="not a rerun"):
        bulk_load(part, short_input, start_offset=0)
    assert part.end_offset() == 3
    result = bulk_load(
        part,
        [pa.record_batch({"x": [1, 2, 3, 4, 5]}, schema=schema)],
        start_offset=0,
        rows_per_batch=1,
    )
    assert (result.rows_skipped, result.rows_written, result.batches_written) == (3, 2, 2)
    assert part.read()["x"].to_pylist() == [1, 2, 3, 4, 5]
