"""The main demo job, run twice: the rerun writes nothing and skips its Spark
transform before building the DataFrame (the version is read from the log)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import arrowlog

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.spark
@pytest.mark.slow
def test_a_rerun_of_the_demo_skips_its_committed_transform(tmp_path: Path) -> None:
    argv = [
        sys.executable, "-m", "arrowlog.jobs.demo", "--rows", "4000",
        "--root", str(tmp_path / "store"),
        "--data", str(tmp_path / "events.parquet"),
        "--delta", str(tmp_path / "delta"),
    ]  # fmt: skip
    first = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True)
    assert "transaction committed" in first.stdout
    log = arrowlog.connect(str(tmp_path / "store"))
    ends = log.end_offsets("purchases")
    coordinator = sorted(i.key for i in log.store.list("_arrowlog/coordinator/"))
    second = subprocess.run(argv, cwd=ROOT, check=True, capture_output=True, text=True)
    assert "skipped without computing it" in second.stdout
    assert "1,000 purchases, each exactly once" in second.stdout
    assert log.end_offsets("purchases") == ends
    assert sorted(i.key for i in log.store.list("_arrowlog/coordinator/")) == coordinator
