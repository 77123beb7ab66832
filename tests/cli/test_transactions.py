"""``arrowlog transactions``, ``producers`` and ``metrics``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import arrowlog
from arrowlog.cli.transactions import human_age
from tests.support.cli import SCHEMA, fails, files, rows, run


def stuck(root: Path, timeout_ms: int = 60_000) -> arrowlog.Producer:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", rows(0), partition=1)
    producer = log.producer(transactional_id="stuck", transaction_timeout_ms=timeout_ms)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(1), partition=0)
    return producer


def test_list_describe_find_hanging_and_abort(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    producer = stuck(root, timeout_ms=1_000)
    # the coordinator log has no entry of it before PREPARE: it lists the id's
    # state (EMPTY, after init); the partitions show the transaction
    listed = json.loads(run(capsys, "transactions", "list", "--output", "json"))
    assert [(t["transactional_id"], t["state"], t["partitions"]) for t in listed] == [
        ("stuck", "EMPTY", [])
    ]
    assert (
        json.loads(run(capsys, "transactions", "describe", "stuck", "--output", "json"))["state"]
        == "EMPTY"
    )
    # open but within its timeout: not hanging, shown with --all
    everything = json.loads(
        run(capsys, "transactions", "find-hanging", "--all", "--output", "json")
    )
    [row] = everything
    assert (row["topic"], row["partition"], row["first_offset"], row["hanging"]) == (
        "t",
        0,
        0,
        False,
    )
    assert re.fullmatch(r"\d+(ms|s)", row["age"]), row["age"]  # human readable, not epoch ms
    import time

    time.sleep(2.1)  # past the 1 s timeout (and S3's one-second clock grain)
    [row] = json.loads(run(capsys, "transactions", "find-hanging", "--output", "json"))
    assert row["hanging"] is True and row["timeout"] == "1s"
    assert "HANGING" in run(capsys, "transactions", "find-hanging")
    aborted = json.loads(run(capsys, "transactions", "abort", "stuck", "--output", "json"))
    assert aborted[0]["state"] == "COMPLETE_ABORT"
    assert (
        json.loads(run(capsys, "transactions", "find-hanging", "--all", "--output", "json")) == []
    )
    with pytest.raises(arrowlog.ProducerFencedError):
        producer.commit_transaction()


def test_expire(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stuck(root, timeout_ms=1_000)
    assert json.loads(run(capsys, "transactions", "expire", "--output", "json")) == []
    import time

    time.sleep(2.1)
    [done] = json.loads(run(capsys, "transactions", "expire", "--output", "json"))
    assert done["state"] == "COMPLETE_ABORT"


@pytest.mark.parametrize("tid", ["stuk", "nope", "bad/../id", ""])
def test_abort_of_an_unknown_or_mistyped_id_creates_nothing(
    root: Path, capsys: pytest.CaptureFixture[str], tid: str
) -> None:
    stuck(root)
    before = files(root)
    code = 3 if tid in ("stuk", "nope") else 2
    err = fails(capsys, code, "transactions", "abort", tid)
    assert ("unknown transactional id" if code == 3 else "invalid transactional id") in err
    assert fails(capsys, code, "transactions", "describe", tid)
    assert files(root) == before


def test_producers_of_every_partition(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    producer = stuck(root)
    idempotent = arrowlog.connect(str(root)).producer()
    idempotent.send("t", rows(5, 6), partition=1)
    out = json.loads(run(capsys, "producers", "t", "--output", "json"))
    got = sorted((r["partition"], r["producer_id"], r["last_sequence"]) for r in out)
    assert got == [(0, producer.producer_id, 0), (1, idempotent.producer_id, 1)]
    assert all("timestamp_ms" not in r and r["age"] for r in out)
    only = json.loads(run(capsys, "producers", "t", "--partition", "1", "--output", "json"))
    assert [r["partition"] for r in only] == [1]
    assert "not 2" in fails(capsys, 3, "producers", "t", "--partition", "2")


def test_metrics(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stuck(root)
    values = json.loads(run(capsys, "metrics", "t", "--output", "json"))
    assert values["partitions"]["t/0"]["last_stable_offset"] == 0
    assert values["active_transactional_ids"] == ["stuck"]
    assert "active transactional ids: stuck" in run(capsys, "metrics")


def test_human_age() -> None:
    assert [human_age(v) for v in (None, 5, 1_500, 61_000, 3_600_000 * 27 + 5_000)] == [
        "-", "5ms", "1s", "1m 1s", "1d 3h",
    ]  # fmt: skip


def test_describe_shows_state_partitions_and_times_as_dates_and_ages(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As kafka-transactions describe: no epoch milliseconds, no write ids;
    the raw coordinator entry is --output json's."""
    log = arrowlog.connect(str(root))
    log.create_topic("d", SCHEMA, partitions=2)
    p = log.producer(transactional_id="etl")
    p.init_transactions()
    with p.transaction():
        p.send("d", rows(1), partition=0)
        p.send("d", rows(2), partition=1)
    p.close()
    out = run(capsys, "transactions", "describe", "etl")
    fields = dict(line.split(None, 1) for line in out.strip().splitlines()[1:])
    assert fields["state"].strip() == "COMPLETE_COMMIT"
    assert fields["partitions"].strip() == "d/0, d/1"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", fields["started"].strip())
    assert re.fullmatch(r"\d+(ms|s)", fields["lasted"].strip())
    assert "write_id" not in fields and "txn_started_ms" not in fields
    raw = json.loads(run(capsys, "transactions", "describe", "etl", "--output", "json"))
    assert isinstance(raw["txn_started_ms"], int) and raw["write_id"]
