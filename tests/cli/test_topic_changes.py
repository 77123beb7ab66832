"""``arrowlog topics alter`` and ``topics delete``: they call
``ArrowLog.create_partitions(topic, total)`` and ``ArrowLog.delete_topic(topic)``,
built in parallel with the command line (issue 8). Run after both are merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import arrowlog
from arrowlog.cli import main
from tests.support.cli import SCHEMA, files, rows, run


def test_alter_adds_partitions(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", rows(1), partition=1)
    assert "now has 4 partition(s)" in run(capsys, "topics", "alter", "t", "--partitions", "4")
    [described] = json.loads(run(capsys, "topics", "describe", "t", "--output", "json"))
    assert described["partitions"] == 4
    assert [p["high_watermark"] for p in described["partition_offsets"]] == [0, 1, 0, 0]
    echo = '{"x": 7}\n'
    produced = tmp_input(root, echo)
    run(capsys, "produce", "t", "--input", produced, "--partition", "3")
    assert arrowlog.connect(str(root)).consumer().read("t", 3).column("x").to_pylist() == [7]


def tmp_input(root: Path, text: str) -> str:
    path = root.parent / "in.jsonl"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("total", ["2", "1"])
def test_alter_never_removes_partitions(
    root: Path, capsys: pytest.CaptureFixture[str], total: str
) -> None:
    arrowlog.connect(str(root)).create_topic("t", SCHEMA, partitions=2)
    before = files(root)
    from arrowlog.cli import main

    assert main(["topics", "alter", "t", "--partitions", total]) != 0
    err = capsys.readouterr().err
    assert err.startswith("arrowlog: ") and err.count("\n") == 1, err
    assert files(root) == before


def test_delete(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA)
    log.create_topic("u", SCHEMA)
    log.append("t", rows(1))
    assert "deleted topic t" in run(capsys, "topics", "delete", "t")
    assert run(capsys, "topics", "list").split() == ["u"]
    from arrowlog.cli import main

    assert main(["consume", "t"]) == 3
    assert "was deleted" in capsys.readouterr().err
    # A rerun finishes an interrupted removal; it is not an error.
    assert "was already deleted" in run(capsys, "topics", "delete", "t")
    assert main(["topics", "delete", "never"]) == 3
    assert "never" in capsys.readouterr().err


def test_create_again_says_it_waits_for_clients_first(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA)
    log.append("t", rows(1))
    log.append("t", rows(2))
    monkeypatch.setenv("ARROWLOG_METADATA_MAX_AGE_MS", "100")
    run(capsys, "topics", "delete", "t")
    out = run(capsys, "topics", "create", "t", "--schema", "x: int64")
    assert "was deleted: waiting" in out and "created topic t" in out
    assert arrowlog.connect(str(root)).topic("t").prefix == "t=2"
    monkeypatch.setenv("ARROWLOG_METADATA_MAX_AGE_MS", "soon")
    assert main(["topics", "list"]) == 2
    assert "ARROWLOG_METADATA_MAX_AGE_MS must be an integer" in capsys.readouterr().err
