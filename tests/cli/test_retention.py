"""``arrowlog delete-records`` and ``arrowlog vacuum``."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.cli.retention import LIST_AT_MOST
from arrowlog.jobs.commandline import EXIT_NOT_FOUND, EXIT_USAGE
from tests.support.cli import SCHEMA, fails, files, rows, run
from tests.support.schedules import SCHEMA as STAGED_SCHEMA
from tests.support.schedules import rows as staged_rows
from tests.support.staged import append_staged, named_by_commits, stage_orphan, staged_writer


def ten(root: Path) -> arrowlog.ArrowLog:
    log = arrowlog.connect(str(root))
    config = TopicConfig(checkpoint_interval=2, delete_delay_ms=100)
    log.create_topic("t", SCHEMA, partitions=2, config=config)
    for x in range(10):
        log.append("t", rows(x), partition=0)
    log.append("t", rows(100), partition=1)
    return log


def test_delete_records_moves_the_log_start_of_each_partition_named(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ten(root)
    out = run(
        capsys, "delete-records", "t", "--partition", "0", "--before", "6", "--output", "json"
    )
    assert json.loads(out) == [{"topic": "t", "partition": 0, "log_start": 6}]
    got = json.loads(run(capsys, "get-offsets", "t", "--time", "earliest", "--output", "json"))
    assert [r["offset"] for r in got] == [6, 0]
    assert arrowlog.connect(str(root)).read("t", 0).column("x").to_pylist() == [6, 7, 8, 9]


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (
            ["--partition", "0", "--partition", "1", "--before", "5"],
            EXIT_USAGE,
            "past the end of partition 1",
        ),
        (["--partition", "0", "--before", "-1"], EXIT_USAGE, "--before"),
        (["--partition", "0", "--before", "x"], EXIT_USAGE, "--before"),
        (["--before", "3"], EXIT_USAGE, "--partition"),
        (["--partition", "7", "--before", "0"], EXIT_NOT_FOUND, "partition"),
    ],
)
def test_bad_input_fails_in_one_line_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, says: str
) -> None:
    ten(root)
    before = files(root)
    assert says in fails(capsys, code, "delete-records", "t", *args)
    assert files(root) == before


def test_vacuum_dry_run_lists_and_writes_nothing_then_vacuum_removes(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ten(root)
    run(capsys, "delete-records", "t", "--partition", "0", "--before", "6")
    time.sleep(2.3)  # the delay (100 ms), a second of clock grain, a second of truncation
    before = files(root)
    planned = json.loads(run(capsys, "vacuum", "--dry-run", "--output", "json"))
    assert files(root) == before
    assert {r["key"] for r in planned} == {f"t/0/segments/{b:020d}.arrow" for b in range(6)}
    assert all("below the log start 6" in r["reason"] for r in planned)
    assert "removed 6 object(s)" in run(capsys, "vacuum", "t")
    left = files(root) or {}
    assert not [b for b in range(6) if f"t/0/segments/{b:020d}.arrow" in left]
    assert "removed 0 object(s)" in run(capsys, "vacuum")
    assert arrowlog.connect(str(root)).read("t", 0).column("x").to_pylist() == [6, 7, 8, 9]


def test_a_large_vacuum_prints_what_it_removed_grouped_by_reason(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Thousands of lines of keys help no one: past LIST_AT_MOST objects the
    table has one row per kind of reason, with a count (--dry-run and --output
    json still give every object)."""
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=5, delete_delay_ms=100))
    for x in range(LIST_AT_MOST + 5):
        log.append("t", rows(x))
    run(capsys, "delete-records", "t", "--partition", "0", "--before", str(LIST_AT_MOST + 5))
    time.sleep(2.3)  # the delay (100 ms), a second of clock grain, a second of truncation
    planned = run(capsys, "vacuum", "--dry-run")
    listed = planned.count("t/0/segments/")  # each, with its reason
    assert listed > LIST_AT_MOST  # all but the last (it holds the log end)
    out = run(capsys, "vacuum", "t")
    assert out.count("t/0/segments/") == 1  # the example of its group
    assert re.search(rf"{listed} +remove +offsets \[N, N\) are below the log start N", out), out
    assert f"removed {listed} object(s)" in out


def test_retention_is_set_at_creation_and_altered_later(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schema = "x: int64 not null, s: string"
    run(capsys, "topics", "create", "r", "--schema", schema, "--config", "retention_bytes=100000")
    assert arrowlog.connect(str(root)).topic("r").config.retention_bytes == 100_000
    out = run(capsys, "topics", "alter", "r", "--config", "retention_ms=3600000",
              "--config", "retention_bytes=none")  # fmt: skip
    assert "retention_bytes=None, retention_ms=3600000" in out
    config = arrowlog.connect(str(root)).topic("r").config
    assert (config.retention_ms, config.retention_bytes) == (3_600_000, None)


def test_config_values_take_units_at_creation_and_alteration(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As ``vacuum --retain 7d`` does: durations in ms, s, m, h, d; sizes in
    B, KiB, MiB, GiB (a plain number is still milliseconds or bytes)."""
    run(capsys, "topics", "create", "u", "--schema", "x: int64",
        "--config", "retention_bytes=10GiB", "--config", "delete_delay_ms=30m")  # fmt: skip
    config = arrowlog.connect(str(root)).topic("u").config
    assert (config.retention_bytes, config.delete_delay_ms) == (10 << 30, 1_800_000)
    out = run(capsys, "topics", "alter", "u", "--config", "retention_ms=7d",
              "--config", "retention_bytes=512 MiB")  # fmt: skip
    assert "retention_bytes=536870912, retention_ms=604800000" in out


def test_delete_delay_at_alteration_is_refused_saying_why(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ten(root)
    before = files(root)
    err = fails(capsys, EXIT_USAGE, "topics", "alter", "t", "--config", "delete_delay_ms=1h")
    assert "not delete_delay_ms: how long writers trust their view of the log end" in err
    assert files(root) == before


def test_compact_shows_a_bar_of_partitions_done(
    root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    from arrowlog.cli import main

    ten(root)  # two partitions
    assert main(["compact"]) == 0
    err = capfd.readouterr().err
    assert re.search(r"partitions .* 2/2 +100%", err), err
    assert main(["compact", "--no-progress"]) == 0
    assert "partitions" not in capfd.readouterr().err


@pytest.mark.parametrize(
    "args",
    [
        ["--config", "compression=none"],
        ["--config", "retention_ms=0"],
        ["--config", "retention_ms=soon"],
        ["--config", "retention_ms=7 days"],
        ["--config", "retention_bytes=5TB"],
        ["--partitions", "4", "--config", "retention_ms=-5"],
        [],
    ],
)
def test_bad_alterations_fail_in_one_line_and_write_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    ten(root)
    before = files(root)
    assert fails(capsys, EXIT_USAGE, "topics", "alter", "t", *args)
    assert files(root) == before


def twenty(root: Path) -> arrowlog.ArrowLog:
    log = arrowlog.connect(str(root))
    config = TopicConfig(checkpoint_interval=4, delete_delay_ms=100)
    log.create_topic("t", SCHEMA, config=config)
    for x in range(20):
        log.append("t", rows(x))
    return log


def test_compact_then_vacuum_leaves_the_records_in_fewer_objects(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    twenty(root)
    before = files(root)
    planned = json.loads(run(capsys, "compact", "--dry-run", "--output", "json"))
    assert files(root) == before  # a dry run writes nothing
    assert [(r["start"], r["end"], r["segments"], r["key"]) for r in planned] == [(0, 16, 16, None)]
    done = json.loads(run(capsys, "compact", "t", "--target-bytes", "1MiB", "--output", "json"))
    assert [(r["start"], r["end"], r["records"]) for r in done] == [(0, 16, 16)]
    assert "compacted/" in done[0]["key"]
    time.sleep(2.2)
    out = json.loads(run(capsys, "vacuum", "--output", "json"))
    assert sum("compacted object" in r["reason"] for r in out) == 16
    after = files(root)
    assert before is not None and after is not None and len(after) < len(before)
    assert arrowlog.connect(str(root)).read("t", 0).column("x").to_pylist() == list(range(20))
    assert json.loads(run(capsys, "compact", "--output", "json")) == []  # nothing left


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["--target-bytes", "1KiB"], EXIT_USAGE, "--target-bytes"),
        (["--target-bytes", "lots"], EXIT_USAGE, "not a size"),
        (["--target-bytes", "2GiB"], EXIT_USAGE, "--target-bytes"),
        (["nope"], EXIT_NOT_FOUND, "nope"),
    ],
)
def test_bad_compact_input_fails_in_one_line_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], args: list[str], code: int, says: str
) -> None:
    twenty(root)
    before = files(root)
    assert says in fails(capsys, code, "compact", *args)
    assert files(root) == before


def test_vacuum_cleans_up_old_bookkeeping_only_without_topics_and_lists_why(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ten(root)
    staged = root / "_arrowlog" / "staging" / "q"
    staged.mkdir(parents=True)
    (staged / "old.arrow").write_bytes(b"old")
    (staged / "young.arrow").write_bytes(b"young")
    eight_days_ago = time.time() - 8 * 24 * 3600
    os.utime(staged / "old.arrow", (eight_days_ago, eight_days_ago))
    old_key = "_arrowlog/staging/q/old.arrow"
    before = files(root)
    planned = json.loads(run(capsys, "vacuum", "--dry-run", "--retain", "2h", "--output", "json"))
    assert files(root) == before
    assert [r["key"] for r in planned] == [old_key]
    assert "more than retain_ms ago" in planned[0]["reason"]
    assert "removed 0 object(s)" in run(capsys, "vacuum", "t")  # named topics: not shared things
    assert "removed 0 object(s)" in run(capsys, "vacuum", "--retain", "9d")
    assert "removed 1 object(s)" in run(capsys, "vacuum")  # 7 days by default
    assert sorted(p.name for p in staged.iterdir()) == ["young.arrow"]


@pytest.mark.parametrize("retain", ["5m", "0", "-1d", "7x", "1.5d", "", "11000d"])
def test_a_bad_retain_fails_in_one_line_and_writes_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], retain: str
) -> None:
    ten(root)
    before = files(root)
    assert "retain" in fails(capsys, EXIT_USAGE, "vacuum", "--retain", retain)
    assert files(root) == before


def test_vacuum_lists_an_orphaned_staged_object_and_leaves_it(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A staged object that no commit names (its writer was killed between
    its upload and its commit), older than the delay: listed with action
    "leave", said so, and never removed; with a commit's staged object
    removed with it."""
    log = arrowlog.connect(str(root))
    log.create_topic("t", STAGED_SCHEMA, config=TopicConfig(checkpoint_interval=2))
    append_staged(log.store, staged_writer(log.store), 1, 0)  # 0 plain, 1 a commit
    for v in range(2, 5):
        log.append("t", staged_rows(v))
    (named,) = named_by_commits(log.store).values()
    orphan = stage_orphan(log.store, 99)
    log.delete_records("t", 0, 2)
    hour_ago = time.time() - 3600  # everything written longer ago than the delay (15 min)
    for path in root.rglob("*"):
        os.utime(path, (hour_ago, hour_ago))
    before = files(root)

    planned = json.loads(run(capsys, "vacuum", "--dry-run", "--output", "json"))

    assert files(root) == before
    actions = {r["key"]: r["action"] for r in planned}
    assert actions[orphan] == "leave" and actions[named[0]] == "remove"
    assert "left in place" in next(r["reason"] for r in planned if r["key"] == orphan)
    out = run(capsys, "vacuum", "t")
    assert "left 1 orphaned staged object(s) in place" in out
    left = files(root) or {}
    assert orphan in left and named[0] not in left
    assert arrowlog.connect(str(root)).read("t", 0).column("v").to_pylist() == [2, 3, 4]
