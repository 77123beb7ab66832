"""The jobs in spark_jobs/ as a Spark user runs them: ``spark-submit`` (the one
the pyspark wheel ships) from a directory outside the repository, against a
local-directory store. A submitted backfill lands every record exactly once and
a resubmission writes nothing; bad arguments fail with one line and the
documented exit code, and write nothing; the demo runs as a Spark application
on the session spark-submit made and commits its transform exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pyspark
import pytest

import arrowlog

ROOT = Path(__file__).resolve().parents[2]
SPARK_SUBMIT = Path(pyspark.__file__).parent / "bin" / "spark-submit"
ROWS = 20_000


def submit(job: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``spark-submit spark_jobs/<job>.py ARGS`` in ``cwd``: this checkout's
    arrowlog on the path of the driver and of the workers, and this Python."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    command = [
        str(SPARK_SUBMIT), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
        str(ROOT / "spark_jobs" / f"{job}.py"), *args,
    ]  # fmt: skip
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)


def files(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*")}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working directory outside the repository."""
    path = tmp_path / "elsewhere"
    path.mkdir()
    assert ROOT not in path.parents
    return path


@pytest.mark.spark
@pytest.mark.slow
def test_a_submitted_backfill_lands_every_record_once_and_a_resubmission_writes_nothing(
    tmp_path: Path, outside: Path
) -> None:
    data = tmp_path / "input.parquet"
    table = pa.table(
        {"id": pa.array(range(ROWS), pa.int64()), "label": [f"r{i}" for i in range(ROWS)]}
    )
    pq.write_table(table, data, row_group_size=5_000)
    root = tmp_path / "log"
    args = ["--root", str(root), "events", str(data), "--create", "--rows-per-batch", "1000"]
    first = submit("backfill", *args, cwd=outside)
    assert first.returncode == 0, first.stderr
    assert "offsets [0, 20000), 20,000 rows written, 0 already there" in first.stdout
    log = arrowlog.connect(str(root))
    assert log.read("events", 0).equals(table.combine_chunks())
    segments = [(s.base, s.end) for s in log.partition("events", 0).segments()]
    assert segments == [(base, base + 1000) for base in range(0, ROWS, 1000)]
    written = files(root)
    again = submit("backfill", *args, "--no-progress", cwd=outside)
    assert again.returncode == 0, again.stderr
    assert "0 rows written, 20,000 already there" in again.stdout
    assert files(root) == written
    assert arrowlog.connect(str(root)).read("events", 0).equals(table.combine_chunks())


@pytest.mark.spark
@pytest.mark.slow
def test_bad_arguments_to_a_submitted_job_fail_in_one_line_and_write_nothing(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "log"
    arrowlog.connect(str(root)).create_topic("events", pa.schema([("id", pa.int64())]))
    data = tmp_path / "input.parquet"
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), data)
    before = files(root)
    for args, code, message in [
        # a usage error, found by the argument parser
        ([], 2, "arrowlog backfill: error: Missing argument 'FILE'."),
        # an error the job finds: exit code 3 is "not found"
        ([str(data), "--partition", "5"], 3, "arrowlog: UnknownTopicOrPartitionError: "),
    ]:
        done = submit("backfill", "--root", str(root), "events", *args, cwd=outside)
        # spark-submit hands on the driver's stderr as its stdout
        output = done.stdout + done.stderr
        assert done.returncode == code, output
        errors = [line for line in output.splitlines() if line.startswith("arrowlog")]
        assert len(errors) == 1 and errors[0].startswith(message), output
        assert "Traceback" not in output
        assert files(root) == before


@pytest.mark.spark
@pytest.mark.slow
def test_the_submitted_demo_commits_its_transform_and_export_exactly_once(
    tmp_path: Path, outside: Path
) -> None:
    root = tmp_path / "store"
    done = submit(
        "demo", "--rows", "4000", "--root", str(root), "--data", str(tmp_path / "events.parquet"),
        "--delta", str(tmp_path / "delta"), cwd=outside,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "transaction committed" in done.stdout
    assert "4,000 events -> 1,000 purchases, each exactly once" in done.stdout
    log = arrowlog.connect(str(root))
    purchases = pa.concat_tables(log.read("purchases", p) for p in range(4))
    event_ids: list[int] = purchases.column("event_id").to_pylist()  # type: ignore[assignment]
    assert sorted(event_ids) == list(range(3, 4000, 4))
