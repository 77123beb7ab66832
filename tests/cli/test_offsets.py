"""``arrowlog get-offsets`` and ``arrowlog dump``."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

import arrowlog
from arrowlog.config import TopicConfig
from tests.support.cli import SCHEMA, build_mixed_log, fails, rows, run
from tests.support.clocks import ClockStore
from tests.support.schedules import SCHEMA as STAGED_SCHEMA
from tests.support.schedules import rows as staged_rows
from tests.support.staged import TwoWriters, named_by_commits


def test_get_offsets_by_time(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", rows(0, 1), partition=0)
    time.sleep(0.01)
    middle = int(time.time() * 1000)
    time.sleep(0.01)
    log.append("t", rows(2), partition=0)
    producer = log.producer(transactional_id="open")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(3), partition=0)

    def offsets(*argv: str) -> list[int]:
        out = run(capsys, "get-offsets", "t", "--output", "json", *argv)
        return [r["offset"] for r in json.loads(out)]

    assert offsets() == [4, 0]
    assert offsets("--isolation-level", "read_committed") == [3, 0]
    assert offsets("--time", "earliest") == [0, 0]
    assert offsets("--time", str(middle)) == [2, 0]
    assert offsets("--time", "2000-01-01T00:00:00+00:00", "--partition", "0") == [0]
    assert offsets("--time", str(middle + 3_600_000)) == [4, 0]
    assert "TOPIC" in run(capsys, "get-offsets", "t")
    assert "neither milliseconds" in fails(capsys, 2, "get-offsets", "t", "--time", "noon")


def test_dump_a_segment_and_a_checkpoint(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_mixed_log(str(root))
    segment = json.loads(run(capsys, "dump", "--topic", "t", "--offset", "7", "--output", "json"))
    assert segment["checksum"] == "ok"
    assert segment["key"] == "t/0/segments/00000000000000000006.arrow"
    header = segment["header"]
    assert (header["base_offset"], header["record_count"], header["transactional"]) == (6, 2, True)
    assert header["transactional_id"] == "txn" and header["producer_id"] >= 0
    assert [r["offset"] for r in segment["rows"]] == [6, 7]
    marker = json.loads(
        run(capsys, "dump", "t/0/segments/00000000000000000005.arrow", "--output", "json")
    )
    assert marker["header"]["control_type"] == "ABORT" and "rows" not in marker
    text = run(capsys, "dump", str(root / "t/0/segments/00000000000000000000.arrow"), "--rows", "2")
    assert "checksum: ok" in text and "base_offset: 0" in text and "r1" in text and "r2" not in text
    # a flipped byte: the verdict says so, and the exit code is 4
    bad = tmp_path / "00000000000000000000.arrow"
    shutil.copy(root / "t/0/segments/00000000000000000000.arrow", bad)
    data = bytearray(bad.read_bytes())
    data[-40] ^= 0xFF
    bad.write_bytes(bytes(data))
    assert main_code(["dump", str(bad)]) == 4
    out = capsys.readouterr().out
    assert "checksum: MISMATCH" in out and "base_offset: 0" in out  # the header has its own CRC
    # a checkpoint
    log.create_topic("c", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    for i in range(3):
        log.append("c", rows(i))
    [key] = [info.key for info in log.store.list("c/0/checkpoints/")]
    cp = json.loads(run(capsys, "dump", key, "--output", "json"))
    assert cp["checksum"] == "ok"
    assert (cp["header"]["window_start"], cp["header"]["window_end"]) == (0, 2)
    assert [s["base"] for s in cp["rows"]] == [0, 1]
    assert "unreadable object" in run_fail_json(capsys, tmp_path, key, root)


def main_code(argv: list[str]) -> int:
    from arrowlog.cli import main

    return main(argv)


def run_fail_json(capsys: pytest.CaptureFixture[str], tmp_path: Path, key: str, root: Path) -> str:
    bad = tmp_path / key.rsplit("/", 1)[-1]
    bad.write_bytes((root / key).read_bytes()[:-5])
    assert main_code(["dump", str(bad), "--output", "json"]) == 4
    return str(json.loads(capsys.readouterr().out)["checksum"])


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["dump"], 2, "give FILE, KEY, or --topic"),
        (["dump", "x", "--topic", "t"], 2, "not both"),
        (["dump", "t/0/segments/00000000000000000099.arrow"], 3, "FileNotFoundError"),
        (["dump", "--topic", "t", "--offset", "99"], 1, "outside the log"),
        (["dump", "_arrowlog/topics/t.json"], 2, "not a segment"),
    ],
)
def test_dump_errors(
    root: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    build_mixed_log(str(root))
    assert message in fails(capsys, code, *argv)


def log_with_a_commit(root: Path) -> dict[int, list[str]]:
    """Topic t (windows of 2): 0, 1 and 3 plain segments, at 2 a commit object
    of one staged batch (value 2), then at 4 a commit object naming two staged
    batches, [4, 6) (values 5 and 4), then 6 plain.
    Returns the commit's base -> its staged objects' keys."""
    log = arrowlog.connect(str(root), config=arrowlog.LogConfig(staged_appends=False))
    log.create_topic("t", STAGED_SCHEMA, config=TopicConfig(checkpoint_interval=2))
    log.append("t", staged_rows(0))
    clock = ClockStore(log.store)
    TwoWriters(clock).commit_two((1, 2, 3), (4, 5))
    log.append("t", staged_rows(6))
    return named_by_commits(log.store)


def test_dump_shows_a_commit_object_its_staged_batches_and_a_staged_object(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    named = log_with_a_commit(root)
    assert {b: len(k) for b, k in named.items()} == {2: 1, 4: 2}

    commit = json.loads(run(capsys, "dump", "t/0/segments/00000000000000000004.arrow",
                            "--output", "json"))  # fmt: skip
    assert commit["checksum"] == "ok" and "rows" not in commit
    assert commit["header"]["record_count"] == 2 and "2 staged" in commit["header"]["commits"]
    refs = [(r["base_offset"], r["record_count"], r["key"]) for r in commit["refs"]]
    assert refs == [(4, 1, named[4][0]), (5, 1, named[4][1])]

    held = json.loads(run(capsys, "dump", "--topic", "t", "--offset", "5", "--output", "json"))
    assert held["key"] == named[4][1]
    header = held["header"]
    assert (header["base_offset"], header["staged"]) == (5, True)
    assert header["committed_by"] == "t/0/segments/00000000000000000004.arrow"
    assert [(r["offset"], r["v"]) for r in held["rows"]] == [(5, 4)]

    alone = json.loads(run(capsys, "dump", named[4][0], "--output", "json"))
    assert alone["header"]["base_offset"] == "given by the commit that names it"
    assert [(r["row"], r["v"]) for r in alone["rows"]] == [(0, 5)]

    window = json.loads(run(capsys, "dump", "t/0/checkpoints/99999999999999999995.json",
                            "--output", "json"))  # fmt: skip
    assert [(r["base"], r.get("refs")) for r in window["rows"]] == [(4, 2), (6, None)]
    assert [(r["commit"], r["base"], f"t/0/{r['at']}") for r in window["refs"]] == [
        (4, 4, named[4][0]), (4, 5, named[4][1])
    ]  # fmt: skip
    text = run(capsys, "dump", "t/0/segments/00000000000000000004.arrow")
    assert "refs:" in text and named[4][1] in text
