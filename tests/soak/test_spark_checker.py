"""The checker of the Spark writer's topic on hand-made histories: a clean one
passes, and each anomaly is caught on a history made to contain it."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from arrowlog.producer import key_partitions
from tests.soak.checker import Report
from tests.soak.model import SP, SP_PARTITIONS, sp_count, sp_key, sp_rid, tp
from tests.soak.spark_checker import check_spark


def _write(n: int, version: int, status: str, *, failing: bool = False) -> list[dict[str, Any]]:
    """A ``spark_write`` invoked, and its outcome (``unknown``: none)."""
    base = {"slot": "spark", "role": "spark", "pid": 1, "inst": "i"}
    lines = [{"type": "invoke", "id": f"o{n}", "f": "spark_write", "t": float(n), **base,
              "version": version, "rows": sp_count(version), "failing": failing}]  # fmt: skip
    state = {tp(SP, q): [9, 9] for q in range(SP_PARTITIONS)}
    if status == "ok":
        lines.append({"type": "ok", "id": f"o{n}", "t": n + 0.5, "result": {"after": state}})
    elif status == "fail":
        lines.append({"type": "fail", "id": f"o{n}", "t": n + 0.5, "error": "SparkException"})
    return lines


def _exit(t: float, killed: str | None) -> dict[str, Any]:
    code = -9 if killed else 0
    return {"type": "event", "f": "exit", "t": t, "slot": "parent", "role": "parent",
            "client_role": "spark", "killed": killed, "returncode": code}  # fmt: skip


def _rows(version: int, *, failed: bool = False) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {tp(SP, q): [] for q in range(SP_PARTITIONS)}
    for i in range(sp_count(version)):
        q = key_partitions([sp_key(version, i)], SP_PARTITIONS)[0]
        out[tp(SP, q)].append(sp_rid(version, i, failed=failed))
    return out


def _read(committed: dict[str, list[str]]) -> dict[str, Any]:
    ends = {tp(SP, q): 9 for q in range(SP_PARTITIONS)}
    return {"committed": committed, "end": ends, "lso": dict(ends), "staged_rows": 1,
            "plain_rows": 0, "errors": []}  # fmt: skip


def _clean() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Version 0 acknowledged; version 1 killed mid-job, then rerun and
    acknowledged after a job of it failed on purpose; version 2 killed, never
    rerun, not committed."""
    events = [*_write(1, 0, "ok"), *_write(2, 1, "unknown"), _exit(3, "point"),
              *_write(4, 1, "fail", failing=True), *_write(5, 1, "ok"),
              *_write(6, 2, "unknown"), _exit(7, "timer")]  # fmt: skip
    committed = _rows(0)
    for key, rids in _rows(1).items():
        committed[key] += rids
    read = _read(committed)
    return events, {"before_recovery": read, "after_recovery": copy.deepcopy(read)}


def _check(events: list[dict[str, Any]], final: dict[str, Any]) -> Report:
    report = Report()
    check_spark(events, final, report)
    return report


def test_a_clean_history_has_no_anomaly() -> None:
    report = _check(*_clean())
    assert report.ok, report.format()
    assert report.counts["spark_versions_committed"] == 2
    assert report.counts["spark_versions_acked"] == 2
    assert report.counts["spark_reruns"] == 1
    assert report.counts["spark_jobs_failed_on_purpose"] == 1
    assert report.counts["spark_kills"] == 2


def _drop_one_row(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    f["after_recovery"]["committed"][tp(SP, 0)].pop()


def _twice(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    rows = f["after_recovery"]["committed"][tp(SP, 0)]
    rows.append(rows[0])


def _lost(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    f["after_recovery"]["committed"] = _rows(1)  # version 0 (acknowledged) gone


def _failed_job_visible(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    for key, rids in _rows(1, failed=True).items():
        f["after_recovery"]["committed"][key] += rids


def _never_run(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    for key, rids in _rows(7).items():
        f["after_recovery"]["committed"][key] += rids


def _misrouted(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    committed = f["after_recovery"]["committed"]
    committed[tp(SP, 1)].append(committed[tp(SP, 0)].pop())


def _held_after_ack(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    e[1]["result"]["after"][tp(SP, 2)] = [3, 9]


def _held_after_clean_end(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    e.append(_exit(8, None))
    f["before_recovery"]["lso"][tp(SP, 1)] = 4


def _hanging(e: list[dict[str, Any]], f: dict[str, Any]) -> None:
    f["after_recovery"]["lso"][tp(SP, 1)] = 4


@pytest.mark.parametrize(
    ("breaks", "anomaly"),
    [
        (_drop_one_row, "spark_torn"),
        (_twice, "duplicate"),
        (_lost, "lost_write"),
        (_failed_job_visible, "aborted_read"),
        (_never_run, "aborted_read"),
        (_misrouted, "spark_misrouted"),
        (_held_after_ack, "spark_lso_held"),
        (_held_after_clean_end, "spark_lso_held"),
        (_hanging, "hanging_transaction"),
    ],
)
def test_each_anomaly_is_caught(
    breaks: Callable[[list[dict[str, Any]], dict[str, Any]], None], anomaly: str
) -> None:
    events, final = _clean()
    breaks(events, final)
    report = _check(events, final)
    assert report.count(anomaly) > 0, report.format()
    others = {k: v for k, v in report.anomalies.items() if v and k != anomaly}
    assert not others or breaks in (_misrouted, _drop_one_row), others


def test_held_when_the_last_instance_was_killed_is_a_note() -> None:
    events, final = _clean()
    final["before_recovery"]["lso"][tp(SP, 1)] = 4
    report = _check(events, final)
    assert report.ok, report.format()
    assert "sp open when the Spark writer was stopped" in report.notes
