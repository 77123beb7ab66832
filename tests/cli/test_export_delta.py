"""``arrowlog export-delta`` as a process: exports committed records once, with
its progress bar; the old ``python -m arrowlog.jobs.export_delta`` form too."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from arrowlog.jobs.export_delta import read_delta
from tests.cli.conftest import build_mixed_log
from tests.cli.test_process import cli, env


@pytest.mark.spark
@pytest.mark.slow
def test_export_delta_exports_committed_records_once(tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    delta = str(tmp_path / "delta")
    build_mixed_log(root)
    done = subprocess.run(
        cli("export-delta", "t", delta, "--root", root),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "exported 6 rows of t" in done.stdout, done.stdout + done.stderr
    # the bar counts offsets: markers and aborted records included
    assert "offsets" in done.stderr and "10/10" in done.stderr and "100%" in done.stderr
    exported = read_delta(delta).column("x").to_pylist()
    assert sorted(x for x in exported if x is not None) == [0, 1, 2, 6, 7, 9]
    again = subprocess.run(
        [sys.executable, "-m", "arrowlog.jobs.export_delta", root, "t", delta, "--no-progress"],
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "exported 0 rows" in again.stdout
    assert len(read_delta(delta)) == 6
