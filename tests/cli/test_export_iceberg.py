"""``arrowlog export-iceberg`` as a process: exports committed records once,
with its progress bar; ``python -m arrowlog.jobs.export_iceberg`` too; wrong
input gets one line, its exit code, and writes nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.jobs.export_iceberg import CatalogConfig, read_iceberg
from tests.support.cli import build_mixed_log, cli, env, rows

#: every test runs the command as a process (a fresh interpreter each)
pytestmark = pytest.mark.slow


def test_export_iceberg_exports_committed_records_once(tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    warehouse = str(tmp_path / "warehouse")
    build_mixed_log(root)
    done = subprocess.run(
        cli("export-iceberg", "t", "lake.t", "--root", root, "--warehouse", warehouse),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "exported 6 rows of t to lake.t (snapshot " in done.stdout, done.stdout + done.stderr
    assert "now at offsets 0:10" in done.stdout
    # the bar counts offsets: markers and aborted records included
    assert "offsets" in done.stderr and "10/10" in done.stderr and "100%" in done.stderr
    table = read_iceberg(CatalogConfig.sqlite(warehouse), "lake.t")
    xs: list[int] = table.column("x").to_pylist()  # type: ignore[assignment]
    offsets: list[int] = table.column("offset").to_pylist()  # type: ignore[assignment]
    assert sorted(xs) == sorted(offsets) == [0, 1, 2, 6, 7, 9]
    again = subprocess.run(
        [sys.executable, "-m", "arrowlog.jobs.export_iceberg", root, "t", "lake.t",
         "--warehouse", warehouse, "--no-progress", "--output", "json"],
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(again.stdout) == {
        "topic": "t", "table": "lake.t", "rows": 0, "offsets": {"0": 10}, "incarnation": 0,
        "snapshot_id": None, "attempts": 1,
    }  # fmt: skip
    assert again.stderr == ""
    assert read_iceberg(CatalogConfig.sqlite(warehouse), "lake.t").num_rows == 6


def test_catalog_properties_name_any_catalog(tmp_path: Path) -> None:
    """--catalog-properties as pyiceberg takes them (here a SQL catalog whose
    file is not in the warehouse); ARROWLOG_ROOT and the warehouse from the
    environment."""
    root = str(tmp_path / "log")
    build_mixed_log(root)
    db = tmp_path / "elsewhere" / "cat.db"
    db.parent.mkdir()
    properties = {"type": "sql", "uri": f"sqlite:///{db}"}
    done = subprocess.run(
        cli("export-iceberg", "t", "a.b.t", "--catalog-properties", json.dumps(properties),
            "--catalog-name", "mine", "--no-progress"),
        env=env(ARROWLOG_ROOT=root, ARROWLOG_ICEBERG_WAREHOUSE=(tmp_path / "wh").as_uri()),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "exported 6 rows of t to a.b.t" in done.stdout
    config = CatalogConfig("mine", {**properties, "warehouse": (tmp_path / "wh").as_uri()})
    assert read_iceberg(config, "a.b.t").num_rows == 6
    assert (tmp_path / "wh" / "a.b" / "t").is_dir() and db.is_file()


def test_wrong_input_gets_one_line_and_its_exit_code_and_writes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = build_mixed_log(str(root))
    log.create_topic("nanos", pa.schema([pa.field("at", pa.timestamp("ns"))]))
    warehouse = tmp_path / "warehouse"
    wh = ["--warehouse", str(warehouse)]
    cases = [
        (["t", "events", *wh], 2, "InvalidNameError: invalid Iceberg table identifier 'events'"),
        (["t", "../up.t", *wh], 2, "InvalidNameError"),
        (["nope", "ns.t", *wh], 3, "UnknownTopicOrPartitionError: unknown topic 'nope'"),
        (["nanos", "ns.t", *wh], 2, "UnsupportedTypeError: column 'at' is timestamp[ns]"),
        (["t", "ns.t"], 2, "error: no Iceberg catalog: pass --warehouse DIR"),
        (["t", "ns.t", "--catalog-properties", "{oops", *wh], 2, "not valid JSON"),
        (["t", "ns.t", "--catalog-uri", "sqlite:///x.db"], 2, "needs a warehouse too"),
        (["t", "ns.t", "--warehouse", "s3://b/w"], 2, "give the catalog's URI too"),
        # a REST catalog that does not answer: pyiceberg's error, typed and retriable
        (
            ["t", "ns.t", "--catalog-properties", '{"type": "rest", "uri": "http://127.0.0.1:9"}'],
            75,
            "ExportTableError: Iceberg table ns.t: ConnectionError",
        ),
    ]
    before = sorted(p.name for p in root.rglob("*"))
    for argv, code, message in cases:
        done = subprocess.run(
            cli("export-iceberg", *argv, "--root", str(root)),
            env=env(), capture_output=True, text=True, cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == code, (argv, done.stderr)
        assert message in done.stderr, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert done.stdout == ""
    assert not warehouse.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log"]
    assert sorted(p.name for p in root.rglob("*")) == before  # the log is only read


def test_a_recreated_topic_is_refused_until_from_new_incarnation(tmp_path: Path) -> None:
    """Exported, then deleted and created again: the run exits 1 with one
    line naming the re-creation and --from-new-incarnation, and writes
    nothing; with the flag it exports the new topic from offset 0."""
    root = str(tmp_path / "log")
    warehouse = str(tmp_path / "warehouse")
    build_mixed_log(root)
    argv = ["export-iceberg", "t", "lake.t", "--root", root, "--warehouse", warehouse,
            "--no-progress"]  # fmt: skip
    subprocess.run(cli(*argv), env=env(), capture_output=True, text=True, check=True)
    admin = arrowlog.connect(root, config=arrowlog.LogConfig(metadata_max_age_ms=0))
    admin.delete_topic("t")
    incarnation = admin.create_topic("t", rows(0).schema).incarnation
    admin.append("t", rows(100, 101, 102))
    refused = subprocess.run(cli(*argv), env=env(), capture_output=True, text=True)
    assert refused.returncode == 1, refused.stderr
    assert refused.stderr.startswith("arrowlog: TopicRecreatedError: ")
    assert "--from-new-incarnation" in refused.stderr
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert read_iceberg(CatalogConfig.sqlite(warehouse), "lake.t").num_rows == 6
    done = subprocess.run(
        cli(*argv, "--from-new-incarnation", "--output", "json"),
        env=env(), capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert (result["rows"], result["offsets"], result["incarnation"]) == (3, {"0": 3}, incarnation)
    assert read_iceberg(CatalogConfig.sqlite(warehouse), "lake.t").num_rows == 9


_BLOCK = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("pyiceberg", "sqlalchemy"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
from arrowlog.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_without_pyiceberg_the_error_names_the_extra(tmp_path: Path) -> None:
    root = str(tmp_path / "log")
    arrowlog.connect(root).create_topic("t", pa.schema([("x", pa.int64())]))
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK, "export-iceberg", "t", "ns.t", "--root", root,
         "--warehouse", str(tmp_path / "warehouse")],
        env=env(), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "MissingDependencyError: the Iceberg export needs the 'iceberg' extra" in done.stderr
    assert "pip install 'arrowlog[iceberg]'" in done.stderr
    assert not (tmp_path / "warehouse").exists()
