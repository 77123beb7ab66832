"""``arrowlog export-delta`` as a process: exports committed records once, with
its progress bar, without Spark; ``python -m arrowlog.jobs.export_delta`` too;
a re-created topic is refused with one line naming the flag that exports it
from its start; wrong input gets one line, its exit code, and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import arrowlog
from arrowlog.jobs.export_delta import read_delta
from tests.support.cli import build_mixed_log, cli, env, rows

#: every test runs the command as a process (a fresh interpreter each)
pytestmark = pytest.mark.slow


def test_export_delta_exports_committed_records_once(tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    delta = str(tmp_path / "delta")
    build_mixed_log(root)
    done = subprocess.run(
        cli("export-delta", "t", delta, "--root", root),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert f"exported 6 rows of t to {delta} (version 1); now at offsets 0:10" in done.stdout, (
        done.stdout + done.stderr
    )
    # the bar counts offsets: markers and aborted records included
    assert "offsets" in done.stderr and "10/10" in done.stderr and "100%" in done.stderr
    exported = read_delta(delta).column("x").to_pylist()
    assert sorted(x for x in exported if x is not None) == [0, 1, 2, 6, 7, 9]
    nothing = subprocess.run(
        cli("export-delta", "t", delta, "--root", root),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    # nothing new: one line, no empty 0/0 bar
    assert nothing.stdout == (
        f"exported 0 rows of t to {delta} (no commit); now at offsets 0:10\n"
    ), nothing.stdout
    assert "0/0" not in nothing.stderr and "offsets" not in nothing.stderr, nothing.stderr
    again = subprocess.run(
        [sys.executable, "-m", "arrowlog.jobs.export_delta", root, "t", delta, "--no-progress",
         "--output", "json"],
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(again.stdout) == {
        "topic": "t", "table": delta, "rows": 0, "offsets": {"0": 10}, "incarnation": 0,
        "version": None, "attempts": 1,
    }  # fmt: skip
    assert again.stderr == ""
    assert len(read_delta(delta)) == 6


def test_a_recreated_topic_is_refused_until_from_new_incarnation(tmp_path: Path) -> None:
    """Exported, then deleted and created again: the run exits 1 with one
    line naming the re-creation and --from-new-incarnation, and writes
    nothing; with the flag it exports the new topic from offset 0."""
    root = str(tmp_path / "log")
    delta = str(tmp_path / "delta")
    build_mixed_log(root)
    subprocess.run(
        cli("export-delta", "t", delta, "--root", root, "--no-progress"),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    admin = arrowlog.connect(root, config=arrowlog.LogConfig(metadata_max_age_ms=0))
    admin.delete_topic("t")
    incarnation = admin.create_topic("t", rows(0).schema).incarnation
    admin.append("t", rows(100, 101, 102))
    refused = subprocess.run(
        cli("export-delta", "t", delta, "--root", root, "--no-progress"),
        env=env(), capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("arrowlog: TopicRecreatedError: ")
    assert "deleted and created again" in refused.stderr
    assert "--from-new-incarnation" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert DeltaTable(delta).version() == 1
    done = subprocess.run(
        cli("export-delta", "t", delta, "--root", root, "--no-progress",
            "--from-new-incarnation"),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert (
        f"exported 3 rows of t to {delta} (version 2); now at offsets 0:3 "
        f"of incarnation {incarnation}" in done.stdout
    ), done.stdout
    xs = read_delta(delta).column("x").to_pylist()
    assert sorted(x for x in xs if x is not None) == [0, 1, 2, 6, 7, 9, 100, 101, 102]


def test_wrong_input_gets_one_line_and_its_exit_code_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = build_mixed_log(str(root))
    log.create_topic("times", pa.schema([pa.field("at", pa.time64("us"))]))
    other = tmp_path / "other"  # a Delta table of other columns
    write_deltalake(str(other), pa.table({"name": ["x"]}))
    delta = str(tmp_path / "delta")
    cases = [
        (["nope", delta], 3, "UnknownTopicOrPartitionError: unknown topic 'nope'"),
        (["times", delta], 2, "UnsupportedTypeError: column 'at' is time64[us]"),
        (["t", delta, "--delta-storage-options", "{oops"], 2, "not valid JSON"),
        (["t", delta, "--delta-storage-options", "[1]"], 2, "must be a JSON object"),
        (["t", str(other)], 2, f"SchemaMismatchError: Delta table {other} does not take"),
    ]
    before = sorted(p.name for p in root.rglob("*"))
    for argv, code, message in cases:
        done = subprocess.run(
            cli("export-delta", *argv, "--root", str(root), "--no-progress"),
            env=env(), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == code, (argv, done.stderr)
        assert message in done.stderr, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""
    assert not Path(delta).exists()
    assert DeltaTable(str(other)).version() == 0
    assert sorted(p.name for p in root.rglob("*")) == before  # the log is only read


_BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "deltalake":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from arrowlog.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_deltalake_the_error_names_the_extra(tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    arrowlog.connect(root).create_topic("t", pa.schema([("x", pa.int64())]))
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK, "export-delta", "t", str(tmp_path / "delta"),
         "--root", root],
        env=env(), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "MissingDependencyError: the Delta export needs the 'delta' extra" in done.stderr
    assert "pip install 'arrowlog[delta]'" in done.stderr
    assert not (tmp_path / "delta").exists()


def test_deleted_records_fail_the_export_until_skip_deleted(tmp_path: Path) -> None:
    """Records deleted before they were exported: the run exits 1 with one line
    naming --skip-deleted and writes nothing; with the flag it exports from the
    log start."""
    root = str(tmp_path / "log")
    delta = str(tmp_path / "delta")
    log = arrowlog.connect(root)
    log.create_topic("t", rows(0).schema)
    log.append("t", rows(0, 1, 2))
    subprocess.run(
        cli("export-delta", "t", delta, "--root", root, "--no-progress"),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    log.append("t", rows(3, 4, 5))
    log.delete_records("t", 0, 5)
    refused = subprocess.run(
        cli("export-delta", "t", delta, "--root", root, "--no-progress"),
        env=env(), capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("arrowlog: OffsetOutOfRangeError: ")
    assert "partition 0: 3 to 4" in refused.stderr and "--skip-deleted" in refused.stderr
    assert refused.stderr.count("\n") == 1
    assert DeltaTable(delta).version() == 1
    done = subprocess.run(
        cli("export-delta", "t", delta, "--root", root, "--no-progress", "--skip-deleted"),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "exported 1 rows of t" in done.stdout, done.stdout
    assert "now at offsets 0:6" in done.stdout, done.stdout
    assert sorted(x for x in read_delta(delta).column("x").to_pylist() if x is not None) == [
        0,
        1,
        2,
        5,
    ]
