"""``arrowlog groups``: list, describe with lag, reset-offsets (dry run by
default), delete."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import arrowlog
from tests.support.cli import SCHEMA, fails, files, rows, run


def make(root: Path) -> arrowlog.ArrowLog:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=2)
    for i in range(5):
        log.append("t", rows(i), partition=0)
    log.append("t", rows(0, 1, 2), partition=1)
    log.consumer(group_id="g").commit({("t", 0): 2})
    return log


def test_list_and_describe_with_lag(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = make(root)
    log.consumer(group_id="h").commit({("t", 1): 1})
    assert run(capsys, "groups", "list").split() == ["g", "h"]
    described = json.loads(run(capsys, "groups", "describe", "g", "--output", "json"))
    got = [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in described]
    assert got == [(0, 2, 5, 3), (1, None, 3, None)]
    table = run(capsys, "groups", "describe", "g")
    assert "LAG" in table and "CURRENT-OFFSET" in table
    assert "unknown consumer group 'nope'" in fails(capsys, 3, "groups", "describe", "nope")


def reset(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    return run(capsys, "groups", "reset-offsets", "g", *argv)


def _position(log: arrowlog.ArrowLog, group: str, p: int) -> int | None:
    return log.consumer(group_id=group).committed("t", p)


def test_reset_offsets_is_a_dry_run_until_execute(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = make(root)
    before = files(root)
    plan = json.loads(
        reset(
            capsys,
            "--topic",
            "t",
            "--to-earliest",
            "--output",
            "json",
        )
    )
    assert [(r["partition"], r["current_offset"], r["new_offset"]) for r in plan] == [
        (0, 2, 0),
        (1, None, 0),
    ]
    assert files(root) == before  # a dry run writes nothing
    reset(capsys, "--topic", "t:0", "--to-latest", "--execute")
    assert (_position(log, "g", 0), _position(log, "g", 1)) == (5, None)
    reset(capsys, "--topic", "t:0", "--shift-by", "-2", "--execute")
    assert _position(log, "g", 0) == 3
    reset(capsys, "--topic", "t:0", "--shift-by", "-99", "--execute")
    assert _position(log, "g", 0) == 0  # clamped to the log start
    reset(capsys, "--topic", "t:0,1", "--to-offset", "1", "--execute")
    assert (_position(log, "g", 0), _position(log, "g", 1)) == (1, 1)
    reset(capsys, "--all-topics", "--to-offset", "99", "--execute")
    assert (_position(log, "g", 0), _position(log, "g", 1)) == (5, 3)  # clamped to the end
    time.sleep(0.01)
    later = int(time.time() * 1000)
    time.sleep(0.01)
    log.append("t", rows(5), partition=0)
    reset(
        capsys,
        "--topic",
        "t",
        "--to-datetime",
        str(later),
        "--execute",
    )
    assert (_position(log, "g", 0), _position(log, "g", 1)) == (5, 3)
    reset(
        capsys,
        "--topic",
        "t:0",
        "--to-datetime",
        "2000-01-01T00:00:00Z",
        "--execute",
    )
    assert _position(log, "g", 0) == 0


def test_reset_by_duration_to_current_and_through_an_exported_file(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kafka-consumer-groups' --by-duration, --to-current, --export and
    --from-file: a position saved as CSV lines and put back later."""
    log = make(root)
    reset(capsys, "--topic", "t:0", "--by-duration", "1h", "--execute")
    assert _position(log, "g", 0) == 0  # every record is younger than an hour
    reset(capsys, "--topic", "t:0", "--to-offset", "4", "--execute")
    exported = reset(capsys, "--all-topics", "--to-current", "--export")
    assert exported == "t,0,4\n"  # t/1 has no offset of g's: nothing to keep
    saved = tmp_path / "g.csv"
    saved.write_text("t,0,4\n")
    reset(capsys, "--topic", "t:0", "--to-earliest", "--execute")
    assert _position(log, "g", 0) == 0
    before = files(root)
    planned = json.loads(reset(capsys, "--from-file", str(saved), "--output", "json"))
    assert [(r["partition"], r["new_offset"]) for r in planned] == [(0, 4)]
    assert files(root) == before  # a dry run
    reset(capsys, "--from-file", str(saved), "--execute")
    assert _position(log, "g", 0) == 4


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["g", "--topic", "t"], 2, "exactly one of --to-earliest"),
        (["g", "--topic", "t", "--to-earliest", "--to-latest"], 2, "exactly one of"),
        (["g", "--to-earliest"], 2, "--topic .* or --all-topics"),
        (["g", "--topic", "t:x", "--to-earliest"], 2, "TOPIC:0,1,2"),
        (["g", "--topic", "t:7", "--to-earliest"], 3, "not 7"),
        (["g", "--topic", "nope", "--to-earliest"], 3, "unknown topic"),
        (["g", "--topic", "t:1", "--shift-by", "1", "--execute"], 2, "no offset for t/1"),
        (["nope", "--topic", "t", "--shift-by", "1"], 3, "unknown consumer group"),
        (["g", "--topic", "t", "--to-datetime", "soon"], 2, "neither milliseconds"),
        (["bad/group", "--topic", "t", "--to-earliest", "--execute"], 2, "invalid group id"),
        (["g", "--topic", "t", "--by-duration", "an hour"], 2, "not a duration"),
        (["g", "--topic", "t:1", "--to-current", "--execute"], 2, "--to-current: .* no offset in"),
        (["g", "--topic", "t", "--from-file", "{csv}"], 2, "leave out --topic"),
        (["g", "--from-file", "{bad}"], 2, "line 2: expected topic,partition,offset"),
        (["g", "--from-file", "{twice}"], 2, "names a partition again"),
        (["g", "--from-file", "{far}", "--execute"], 3, "not 9"),
    ],
)
def test_bad_resets_are_one_line_and_write_nothing(
    root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    message: str,
) -> None:
    import re

    make(root)
    inputs = {
        "csv": "t,0,1\n",
        "bad": "t,0,1\nt;1;2\n",
        "twice": "t,0,1\nt,0,2\n",
        "far": "t,9,0\n",
    }
    for name, text in inputs.items():
        (tmp_path / f"{name}.csv").write_text(text)
    argv = [a.format(**{n: tmp_path / f"{n}.csv" for n in inputs}) for a in argv]
    before = files(root)
    err = fails(capsys, code, "groups", "reset-offsets", *argv)
    assert re.search(message, err), err
    assert files(root) == before


def test_delete(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = make(root)
    run(capsys, "groups", "delete", "g")
    assert run(capsys, "groups", "list").strip() == ""
    assert _position(log, "g", 0) is None
    assert "unknown consumer group" in fails(capsys, 3, "groups", "delete", "g")


def test_delete_is_refused_while_a_transaction_holds_offsets(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = make(root)
    producer = log.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(9), partition=1)
    producer.send_offsets_to_transaction({("t", 0): 4}, group_id="g")
    before = files(root)
    assert "UnstableOffsetCommitError" in fails(capsys, 75, "groups", "delete", "g")
    err = fails(
        capsys, 75, "groups", "reset-offsets", "g", "--topic", "t", "--to-earliest", "--execute"
    )
    assert "undecided transaction" in err
    assert files(root) == before
    described = json.loads(run(capsys, "groups", "describe", "g", "--output", "json"))
    assert [r["unstable"] for r in described] == [True, False]
    producer.commit_transaction()
    assert _position(log, "g", 0) == 4


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file with its size and modification time (a rewrite shows)."""
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*")}  # fmt: skip


@pytest.mark.parametrize(
    "line",
    ["t,0,4_0", "t,0,\u0661", "t,+0,4", "t,0,\uff14"],
    ids=["underscore", "arabic-indic digit", "plus sign", "fullwidth digit"],
)
def test_from_file_takes_offsets_of_ascii_digits_alone(tmp_path: Path, line: str) -> None:
    """Python's int() reads '4_0' as 40 and '\u0661' as 1: a mangled line moved the
    group where nobody said. Every such line is refused, one line, exit 2, nothing written."""
    import subprocess

    from tests.support.cli import cli, env

    root = tmp_path / "log"
    make(root)
    saved = tmp_path / "offsets.csv"
    saved.write_text(line + "\n", encoding="utf-8")
    before = _snapshot(root)
    done = subprocess.run(
        cli("groups", "reset-offsets", "g", "--from-file", str(saved), "--execute"),
        env=env(ARROWLOG_ROOT=str(root)), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "expected topic,partition,offset" in done.stderr and done.stderr.count("\n") == 1
    assert _snapshot(root) == before


def test_from_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """A spreadsheet saves CSV as UTF-8 with a byte order mark: its first topic
    read as '\\ufefft', an invalid topic name."""
    import subprocess

    from tests.support.cli import cli, env

    root = tmp_path / "log"
    make(root)
    saved = tmp_path / "offsets.csv"
    saved.write_text("t,0,4\r\nt,1,1\r\n", encoding="utf-8-sig")
    done = subprocess.run(
        cli("groups", "reset-offsets", "g", "--from-file", str(saved), "--export"),
        env=env(ARROWLOG_ROOT=str(root)), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "t,0,4\nt,1,1\n"


@pytest.mark.parametrize(
    ("spec", "message"),
    [("t:0,0", "names partition 0 twice"), ("t:", "TOPIC or TOPIC:0,1,2")],
)
def test_topic_partitions_named_twice_or_none_are_refused(
    root: Path, capsys: pytest.CaptureFixture[str], spec: str, message: str
) -> None:
    """--topic t:0,0 printed partition 0 twice (the file form refuses a repeat);
    --topic t: (an empty list) reset every partition."""
    make(root)
    before = files(root)
    argv = ["groups", "reset-offsets", "g", "--topic", spec, "--to-earliest", "--execute"]
    assert message in fails(capsys, 2, *argv)
    assert files(root) == before
