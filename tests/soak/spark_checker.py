"""The checker of the Spark writer's topic ``sp`` (:mod:`tests.soak.spark_writer`).

It compares the ``spark_write`` operations of every Spark instance's history
with ``sp`` read twice at the end: before the parent's recovery (what the
clients left) and after it. It holds that, under read_committed:

- every version's rows appear exactly once or not at all (``spark_torn``,
  ``duplicate``);
- every acknowledged version's rows appear (``lost_write``);
- no row of a job that failed on purpose, or of a version no history
  attempted, appears (``aborted_read``);
- each row is in the partition ``send_keyed``'s hash gives its key
  (``spark_misrouted``);
- ``sp``'s LSO is not held: right after each acknowledged job (nothing else
  writes ``sp``: its LSO is its high watermark once the job's markers are
  written), before the parent's recovery (the last instance ended cleanly)
  and after it (``spark_lso_held``, ``hanging_transaction``).
"""

from __future__ import annotations

import collections
from collections.abc import Iterable, Mapping
from typing import Any

import arrowlog
from arrowlog.errors import ArrowLogError
from arrowlog.producer import key_partitions
from tests.soak.checker import Report
from tests.soak.history import Operation, pair
from tests.soak.model import SP, SP_PARTITIONS, parse_sp_rid, sp_count, sp_key, tp


def final_read(log: arrowlog.ArrowLog) -> dict[str, Any]:
    """``sp`` as the checker needs it: the records read_committed returns,
    end offsets and LSOs, and how many records sit in staged objects (written
    by the JVM writer) or in plain segments (the Python sink's)."""
    out: dict[str, Any] = {"committed": {}, "end": {}, "lso": {}, "staged_rows": 0,
                           "plain_rows": 0, "errors": []}  # fmt: skip
    consumer = log.consumer()
    for q in range(SP_PARTITIONS):
        key = tp(SP, q)
        try:
            partition = log.partition(SP, q)
            out["committed"][key] = consumer.read(SP, q).column("rid").to_pylist()
            out["end"][key] = partition.end_offset()
            out["lso"][key] = consumer.stable_offset(SP, q)
            for header, _ in partition.iter_segments():
                if not header.identity.control:
                    kind = "staged_rows" if header.staged else "plain_rows"
                    out[kind] += header.record_count
        except ArrowLogError as e:
            out["errors"].append(f"{key}: {type(e).__name__}: {e}")
    return out


def check_spark(
    events: Iterable[Mapping[str, Any]], final: Mapping[str, Any], report: Report
) -> None:
    """Add the counts and anomalies of ``sp`` to ``report``."""
    ops, plain = pair(dict(e) for e in events)
    writes = [op for op in ops if op.f == "spark_write"]
    after = final["after_recovery"]
    _count(writes, plain, after, report)
    for error in after["errors"] + final["before_recovery"]["errors"]:
        report.add("final_read_error", error)
    _check_rows(writes, after["committed"], report)
    _check_lso(writes, plain, final, report)


def _count(
    writes: list[Operation], plain: list[dict[str, Any]], after: Mapping[str, Any], report: Report
) -> None:
    c = report.counts
    visible = {parse_sp_rid(rid)[0] for rids in after["committed"].values() for rid in rids}
    c["spark_versions_committed"] = len(visible)
    c["spark_versions_acked"] = len({op.args["version"] for op in writes if op.ok})
    c["spark_jobs_failed_on_purpose"] = sum(
        op.args["failing"] and op.status == "fail" for op in writes
    )
    c["spark_jobs_failed"] = sum(not op.args["failing"] and op.status == "fail" for op in writes)
    c["spark_jobs_unknown"] = sum(op.status == "unknown" for op in writes)
    attempts = collections.Counter(op.args["version"] for op in writes if not op.args["failing"])
    c["spark_reruns"] = sum(n - 1 for n in attempts.values())
    c["spark_rows_staged"] = after["staged_rows"]
    c["spark_rows_plain"] = after["plain_rows"]
    ups = [e for e in plain if e["f"] == "spark_up"]
    c["spark_instances"] = len(ups)
    c["spark_startup_s"] = round(max((e["seconds"] for e in ups), default=0))
    for e in plain:
        if e["f"] == "exit" and e.get("client_role") == "spark":
            if e.get("killed") in ("timer", "point"):
                c["spark_kills"] = c.get("spark_kills", 0) + 1
        elif e["f"] == "die" and e.get("slot") == "spark":
            name = f"spark_kills_at_{e.get('step')}_{e.get('when')}"
            c[name] = c.get(name, 0) + 1
        elif e["f"] == "spawn" and e.get("client_role") == "spark" and e.get("alone"):
            c["spark_kills_alone_planned"] = c.get("spark_kills_alone_planned", 0) + 1
        elif e["f"] == "orphans" and e.get("killed") and e.get("seconds", 0) > 0.2:
            c["spark_orphans_lived"] = c.get("spark_orphans_lived", 0) + 1
            report.note("a killed Spark client's JVM or planner outlived it",
                        f"{e.get('client')} pid {e.get('proc')} ({e.get('killed')}): "
                        f"{e.get('seconds')} s{' then killed: ' if e.get('alive') else ''}"
                        f"{e.get('alive') or ''}")  # fmt: skip
    if after["plain_rows"]:
        report.note("sp rows written by the Python sink, not the JVM writer",
                    str(after["plain_rows"]))  # fmt: skip


def _check_rows(
    writes: list[Operation], committed: Mapping[str, list[str]], report: Report
) -> None:
    attempted = {op.args["version"] for op in writes if not op.args["failing"]}
    acked = {op.args["version"] for op in writes if op.ok and not op.args["failing"]}
    rows: dict[int, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    for key, rids in committed.items():
        partition = int(key.rsplit("/", 1)[1])
        for rid in rids:
            version, i, failed = parse_sp_rid(rid)
            if failed:
                report.add("aborted_read", f"{rid} of a job that failed on purpose, in {key}")
                continue
            if version not in attempted:
                report.add("aborted_read", f"{rid} of version {version}, which no history "
                                           f"attempted, in {key}")  # fmt: skip
            rows[version][i] += 1
            want = key_partitions([sp_key(version, i)], SP_PARTITIONS)[0]
            if want != partition:
                report.add("spark_misrouted", f"{rid} (key {sp_key(version, i)!r}) in {key}; "
                                              f"send_keyed puts it in {tp(SP, want)}")  # fmt: skip
    for version, seen in sorted(rows.items()):
        twice = sorted(i for i, n in seen.items() if n > 1)
        if twice:
            report.add("duplicate", f"sp version {version}: rows {twice[:8]} visible twice or more")
        missing = sorted(set(range(sp_count(version))) - set(seen))
        if missing:
            report.add("spark_torn", f"sp version {version}: {len(seen)} of {sp_count(version)} "
                                     f"rows visible, missing {missing[:8]}")  # fmt: skip
    for version in sorted(acked - set(rows)):
        ack = next(op for op in writes if op.ok and op.args["version"] == version)
        report.add("lost_write", f"sp version {version} acknowledged ({ack.describe()}) but "
                                 "none of its rows is visible")  # fmt: skip


def _check_lso(
    writes: list[Operation],
    plain: list[dict[str, Any]],
    final: Mapping[str, Any],
    report: Report,
) -> None:
    for op in writes:
        state = op.result.get("after", {}) if op.ok else {}
        for q in range(SP_PARTITIONS):
            lso, end = state.get(tp(SP, q), (0, 0))
            if lso < end:
                report.add("spark_lso_held", f"{op.describe()} of version {op.args['version']} "
                                             f"acknowledged; then {tp(SP, q)}'s LSO {lso} < "
                                             f"high watermark {end}")  # fmt: skip
    exits = [e for e in plain if e["f"] == "exit" and e.get("client_role") == "spark"]
    clean = bool(exits) and exits[-1].get("killed") is None and exits[-1].get("returncode") == 0
    before = final["before_recovery"]
    for key, lso in before["lso"].items():
        end = before["end"].get(key, lso)
        if lso < end:
            where = f"{key}: LSO {lso} < high watermark {end} when the last Spark instance ended"
            if clean:
                report.add("spark_lso_held", where + " cleanly")
            else:
                report.note("sp open when the Spark writer was stopped", where)
    after = final["after_recovery"]
    for key, lso in after["lso"].items():
        end = after["end"].get(key, lso)
        if lso < end:
            report.add("hanging_transaction", f"{key}: LSO {lso} < high watermark {end} after "
                                              "recovery")  # fmt: skip
