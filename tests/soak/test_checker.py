"""The history checker on hand-made histories: a clean one passes, and each
anomaly class is caught on a history made to contain it (and only it)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.soak.checker import ANOMALIES, Report, check, work_missing
from tests.soak.exports import FEED_TID, check_exports, exp_rid, plain_rid
from tests.soak.history import History, pair, read_dir
from tests.soak.model import declared_rids, out_rid, parse_out_rid, txn_tag

PID = 7  # producer id of copy.0
T = txn_tag("copy.0", "a", 0)  # the committed transaction of the clean history
PARTS = {0: 1, 1: 1}
T0, T1 = out_rid(T, PARTS, 0, 0), out_rid(T, PARTS, 1, 0)
#: the exported topic's committed and aborted transactions, and a plain append
E, EA = txn_tag(FEED_TID, "f", 0), txn_tag(FEED_TID, "f", 1)
E0, EA0, P0 = exp_rid(E, 0, 0), exp_rid(EA, 1, 0), plain_rid("f", 0)


class World:
    """A clean history and final read, built step by step; each test breaks one
    thing. Times advance by one second per operation unless given."""

    def __init__(self) -> None:
        self.lines: list[dict[str, Any]] = []
        self.t = 1000.0
        self.n = 0
        self.final: dict[str, Any] = {
            "segments": {k: [] for k in ("in/0", "in/1", "out/0", "out/1", "out/2")},
            "committed": {}, "end": {}, "lso": {}, "group": {"in/0": 2, "in/1": None},
            "errors": [],
        }  # fmt: skip
        #: the exported topic at the end and the exported tables
        self.exp_final: dict[str, Any] = {"committed": [], "export_errors": [], "log_start": {}}
        self.tables: dict[str, list[str]] = {"delta": [], "iceberg": []}

    # --- histories ----------------------------------------------------------------

    def op(
        self,
        f: str,
        *,
        inst: str = "a",
        status: str = "ok",
        result: dict[str, Any] | None = None,
        error: str | None = None,
        maybe_applied: bool | None = None,
        t0: float | None = None,
        t1: float | None = None,
        **args: Any,
    ) -> None:
        self.n += 1
        op_id = f"op{self.n}"
        t0 = self.tick() if t0 is None else t0
        t1 = t0 + 0.5 if t1 is None else t1
        self.lines.append({"type": "invoke", "id": op_id, "f": f, "t": t0, "slot": "s",
                           "role": "r", "pid": 1, "inst": inst, **args})  # fmt: skip
        if status == "ok":
            self.lines.append({"type": "ok", "id": op_id, "t": t1, "result": result or {}})
        elif status == "fail":
            self.lines.append({"type": "fail", "id": op_id, "t": t1, "error": error,
                               "retriable": False, "maybe_applied": maybe_applied,
                               "message": "boom"})  # fmt: skip

    def event(self, f: str, **fields: Any) -> None:
        self.lines.append({"type": "event", "f": f, "t": self.tick(), "slot": "s", "role": "r",
                           "pid": 1, **fields})  # fmt: skip

    def tick(self) -> float:
        self.t += 1
        return self.t

    # --- the log --------------------------------------------------------------------

    def segment(
        self, key: str, rids: list[str], *, pid: int = PID, epoch: int = 0, seq: int = 0,
        txn: bool = True, src: list[str] | None = None, control: str | None = None,
    ) -> int:  # fmt: skip
        segs = self.final["segments"][key]
        base = segs[-1]["base"] + segs[-1]["count"] if segs else 0
        seg: dict[str, Any] = {"base": base, "count": max(1, len(rids)), "pid": pid,
                               "epoch": epoch, "seq": seq, "txn": txn, "control": control,
                               "tid": "copy.0" if txn else None}  # fmt: skip
        if control is None:
            seg["rids"] = rids
            if key.startswith("out/"):
                seg["src"] = src or [""] * len(rids)
        segs.append(seg)
        return base

    def commit_marker(self, key: str, *, epoch: int = 0, kind: str = "COMMIT") -> None:
        self.segment(key, [], epoch=epoch, control=kind)

    def settle(self) -> None:
        """Final end offsets and LSOs; read_committed = every record of a
        transaction with a COMMIT marker, and every plain record."""
        for key, segs in self.final["segments"].items():
            end = segs[-1]["base"] + segs[-1]["count"] if segs else 0
            self.final["end"].setdefault(key, end)
            self.final["lso"].setdefault(key, end)
            if key in self.final["committed"]:
                continue
            committed = {(s["pid"], s["epoch"]) for s in segs if s["control"] == "COMMIT"}
            self.final["committed"][key] = [
                rid for s in segs if not s["control"]
                and (not s["txn"] or (s["pid"], s["epoch"]) in committed)
                for rid in s["rids"]
            ]  # fmt: skip

    def check(self) -> Report:
        self.settle()
        report = check(copy.deepcopy(self.lines), copy.deepcopy(self.final))
        check_exports(copy.deepcopy(self.lines), self.exp_final, self.tables, report)
        return report


def observe(
    w: World,
    rids: dict[str, list[str]],
    *,
    inst: str = "reader",
    start: dict[str, int] | None = None,
    c1: dict[str, int | None] | None = None,
    c2: dict[str, int | None] | None = None,
    lso: dict[str, int] | None = None,
    views: dict[str, Any] | None = None,
    decisions: dict[str, str] | None = None,
    status: str = "ok",
    error: str | None = None,
) -> None:
    keys = ("out/0", "out/1", "out/2")
    lso = lso or {k: 2 if k != "out/2" else 0 for k in keys}
    t = w.tick()
    result = {
        "lso_before": lso, "lso_before_t": [t, t + 0.1], "start": start or dict.fromkeys(keys, 0),
        "c1": c1 or {"in/0": 2, "in/1": None}, "c1_t": [t + 0.1, t + 0.2],
        "read_t": [t + 0.2, t + 0.3], "rids": {k: rids.get(k, []) for k in keys},
        "views": views or {k: {"hw": lso[k], "open": []} for k in keys},
        "decisions": decisions or {}, "c2": c2 or {"in/0": 2, "in/1": None},
        "c2_t": [t + 0.3, t + 0.4], "lso_after": lso, "lso_after_t": [t + 0.4, t + 0.5],
    }  # fmt: skip
    w.op("observe", inst=inst, status=status, error=error, result=result, t0=t, t1=t + 0.5,
         start=start)  # fmt: skip


def clean() -> World:
    """An idempotent producer appends two input records; copier instance ``a``
    copies them in one transaction to out/0 and out/1 with offset in/0=2 and
    commits; a reader sees all of it; the final log agrees."""
    w = World()
    w.op("append", inst="p", topic="in", partition=0, rids=["p.0", "p.1"],
         result={"base": 0, "count": 2})  # fmt: skip
    w.segment("in/0", ["p.0", "p.1"], pid=5, txn=False)
    w.op("init", tid="copy.0", result={"producer_id": PID, "epoch": 0})
    common: dict[str, Any] = {"tid": "copy.0", "tag": T}
    w.op("begin", epoch=0, producer_id=PID, **common)
    w.op("send", topic="out", partition=0, rids=[T0], result={"base": 0, "count": 1}, **common)
    w.op("send_offsets", group="soak", offsets={"in/0": 2}, **common)
    w.op("send", topic="out", partition=1, rids=[T1], result={"base": 0, "count": 1}, **common)
    w.op("commit", epoch=0, result={"epoch_after": 1, "state_after": "READY"}, **common)
    for key, rid, src in (("out/0", T0, "p.0"), ("out/1", T1, "p.1")):
        w.segment(key, [rid], src=[src])
        w.commit_marker(key)
    observe(w, {"out/0": [T0], "out/1": [T1]})
    # the exported topic: a committed transaction and a plain append, exported to
    # both tables; an aborted transaction, exported nowhere
    for tag, rid, end in ((E, E0, "exp_commit"), (EA, EA0, "exp_abort")):
        w.op("exp_begin", inst="f", tid=FEED_TID, tag=tag)
        w.op("exp_send", inst="f", tid=FEED_TID, tag=tag, partition=0, rids=[rid])
        w.op(end, inst="f", tid=FEED_TID, tag=tag)
    w.op("exp_append", inst="f", partition=1, rids=[P0])
    w.op("export", inst="x", kind="delta", result={"rows": 2, "attempts": 1})
    w.exp_final["committed"] = [E0, P0]
    w.tables = {"delta": [E0, P0], "iceberg": [P0, E0]}
    return w


def aborted(w: World, n: int = 1) -> str:
    """A transaction of instance ``a`` that writes one record to out/2 and is
    aborted; returns its record id."""
    tag = txn_tag("copy.0", "a", n)
    rid = out_rid(tag, {2: 1}, 2, 0)
    common: dict[str, Any] = {"tid": "copy.0", "tag": tag}
    w.op("begin", epoch=n, producer_id=PID, **common)
    w.op("send", topic="out", partition=2, rids=[rid], result={"base": 0, "count": 1}, **common)
    w.op("abort", epoch=n, result={"epoch_after": n + 1, "state_after": "READY"}, **common)
    w.segment("out/2", [rid], epoch=n)
    w.commit_marker("out/2", epoch=n, kind="ABORT")
    return rid


# --- one history per anomaly class ---------------------------------------------------


def lost_acked_append(w: World) -> None:
    w.op("append", inst="p", topic="in", partition=1, rids=["p.2"], result={"base": 0, "count": 1})


def lost_committed_record(w: World) -> None:
    # a committed transaction that copies nothing (as the job's do) is not visible
    tag = txn_tag("copy.0", "a", 1)
    rid = out_rid(tag, {2: 1}, 2, 0)
    common: dict[str, Any] = {"tid": "copy.0", "tag": tag}
    w.op("begin", epoch=1, producer_id=PID, **common)
    w.op("send", topic="out", partition=2, rids=[rid], result={"base": 0, "count": 1}, **common)
    w.op("commit", epoch=1, result={"epoch_after": 2, "state_after": "READY"}, **common)
    w.segment("out/2", [rid], epoch=1)
    w.final["committed"]["out/2"] = []


def phantom(w: World) -> None:
    w.op("append", inst="p", topic="in", partition=1, rids=["p.2"], status="fail",
         error="TransientStoreError", maybe_applied=False)  # fmt: skip
    w.segment("in/1", ["p.2"], pid=5, txn=False, seq=2)


def visible_twice(w: World) -> None:
    w.final["committed"]["out/0"] = [T0, T0]


def copied_twice(w: World) -> None:
    tag = txn_tag("copy.0", "a", 1)
    rid = out_rid(tag, {2: 1}, 2, 0)
    common: dict[str, Any] = {"tid": "copy.0", "tag": tag}
    w.op("begin", epoch=1, producer_id=PID, **common)
    w.op("send", topic="out", partition=2, rids=[rid], result={"base": 0, "count": 1}, **common)
    w.op("commit", epoch=1, result={"epoch_after": 2, "state_after": "READY"}, **common)
    w.segment("out/2", [rid], epoch=1, src=["p.0"])
    w.commit_marker("out/2", epoch=1)


def batch_twice(w: World) -> None:
    w.segment("in/0", ["p.0", "p.1"], pid=5, txn=False)
    w.final["committed"]["in/0"] = ["p.0", "p.1"]


def aborted_visible(w: World) -> None:
    rid = aborted(w)
    w.settle()
    w.final["committed"]["out/2"] = [rid]


def never_committed_seen(w: World) -> None:
    tag = txn_tag("copy.0", "b", 0)
    rid = out_rid(tag, {2: 1}, 2, 0)
    w.op("begin", inst="b", tid="copy.0", tag=tag, epoch=1, producer_id=PID)
    w.op("send", inst="b", tid="copy.0", tag=tag, topic="out", partition=2, rids=[rid],
         result={"base": 0, "count": 1})  # fmt: skip
    w.segment("out/2", [rid], epoch=1)  # and then the client was killed
    observe(w, {"out/2": [rid]}, start={"out/0": 2, "out/1": 2, "out/2": 0},
            lso={"out/0": 2, "out/1": 2, "out/2": 1})  # fmt: skip


def torn_by_view(w: World) -> None:
    # out/1's view was fixed before T's record landed there; T is shown in out/0
    views = {"out/0": {"hw": 2, "open": []}, "out/1": {"hw": 0, "open": []},
             "out/2": {"hw": 0, "open": []}}  # fmt: skip
    observe(w, {"out/0": [T0]}, views=views, c1={"in/0": None, "in/1": None})


def torn_inside_range(w: World) -> None:
    observe(w, {"out/0": [T0]}, c1={"in/0": None, "in/1": None})


def torn_behind_lso(w: World) -> None:
    # out/1 gets another transaction's record first; undecided in the read's
    # snapshot, it holds out/1's LSO below T's record there
    u = txn_tag("copy.1", "c", 0)
    w.final["segments"]["out/1"].insert(0, {"base": 0, "count": 1, "pid": 8, "epoch": 0,
                                            "seq": 0, "txn": True, "control": None,
                                            "tid": "copy.1", "rids": [out_rid(u, {1: 1}, 1, 0)],
                                            "src": [""]})  # fmt: skip
    for i, s in enumerate(w.final["segments"]["out/1"][1:], start=1):
        s["base"] = i
    sent = next(line["id"] for line in w.lines if line.get("rids") == [T1])
    next(line for line in w.lines if line["id"] == sent and line["type"] == "ok")["result"][
        "base"
    ] = 1
    w.final["committed"]["out/1"] = [T1]
    views = {"out/0": {"hw": 2, "open": []}, "out/1": {"hw": 3, "open": [["copy.1", 8, 0, 0]]},
             "out/2": {"hw": 0, "open": []}}  # fmt: skip
    observe(w, {"out/0": [T0]}, views=views, decisions={"copy.1/0": "undecided"},
            c1={"in/0": None, "in/1": None})  # fmt: skip


def torn_at_the_end(w: World) -> None:
    # a transaction whose commit outcome is unknown shows in out/0 only
    tag = txn_tag("copy.0", "a", 1)
    parts = {0: 1, 2: 1}
    r0, r2 = out_rid(tag, parts, 0, 0), out_rid(tag, parts, 2, 0)
    common: dict[str, Any] = {"tid": "copy.0", "tag": tag}
    w.op("begin", epoch=1, producer_id=PID, **common)
    w.op("send", topic="out", partition=0, rids=[r0], result={"base": 2, "count": 1}, **common)
    w.op("send", topic="out", partition=2, rids=[r2], result={"base": 0, "count": 1}, **common)
    w.op("commit", epoch=1, status="unknown", **common)
    w.segment("out/0", [r0], epoch=1)
    w.commit_marker("out/0", epoch=1)
    w.segment("out/2", [r2], epoch=1)


def straggler(w: World) -> None:
    extra = out_rid(T, PARTS, 1, 0, extra=True)
    w.op("send", tid="copy.0", tag=T, topic="out", partition=1, rids=[extra], extra=True,
         result={"base": 2, "count": 1})  # fmt: skip
    w.segment("out/1", [extra], seq=1)  # epoch 0: committed, so visible


def offsets_lag_records(w: World) -> None:
    observe(w, {"out/0": [T0], "out/1": [T1]}, c1={"in/0": None, "in/1": None},
            c2={"in/0": None, "in/1": None})  # fmt: skip


def offsets_without_records(w: World) -> None:
    observe(w, {}, start={"out/0": 0, "out/1": 0, "out/2": 0})


def final_offsets_behind(w: World) -> None:
    w.final["group"]["in/0"] = 1


def lso_goes_back(w: World) -> None:
    observe(w, {}, start={"out/0": 2, "out/1": 2, "out/2": 0},
            lso={"out/0": 1, "out/1": 2, "out/2": 0})  # fmt: skip


def zombie(w: World) -> None:
    w.op("init", inst="b", tid="copy.0", result={"producer_id": PID, "epoch": 2})
    tag = txn_tag("copy.0", "a", 1)
    w.op("begin", epoch=1, producer_id=PID, tid="copy.0", tag=tag)
    w.op("commit", epoch=1, tid="copy.0", tag=tag,
         result={"epoch_after": 2, "state_after": "FENCED"})  # fmt: skip


def same_epoch(w: World) -> None:
    w.op("init", inst="b", tid="copy.0", result={"producer_id": PID, "epoch": 1})


def early_expiry(w: World) -> None:
    tag = txn_tag("copy.0", "a", 1)
    w.op("begin", epoch=1, producer_id=PID, tid="copy.0", tag=tag)
    w.op("expire", inst="x", skew=86400.0, result={"expired": [
        {"tid": "copy.0", "producer_id": PID, "producer_epoch": 3, "state": "COMPLETE_ABORT",
         "txn_epoch": 1, "txn_started_ms": 0, "timeout_ms": 4000}]})  # fmt: skip


def hanging(w: World) -> None:
    w.settle()
    w.final["lso"]["out/0"] = 1


def told_corrupt(w: World) -> None:
    observe(w, {}, status="fail", error="CorruptSegmentError")


def untyped(w: World) -> None:
    w.event("untyped_error", error="KeyError", message="'x'", traceback="...")


def final_failed(w: World) -> None:
    w.final["errors"].append("out/1: CorruptSegmentError: bad")


def exported_twice(w: World) -> None:
    w.tables["delta"].append(E0)


def aborted_exported(w: World) -> None:
    w.tables["iceberg"].append(EA0)


def unknown_exported(w: World) -> None:
    w.tables["delta"].append(exp_rid(txn_tag(FEED_TID, "z", 9), 0, 0))


def skipped_by_export(w: World) -> None:
    w.tables["iceberg"].remove(E0)  # say, after the topic was created again


def final_export_failed(w: World) -> None:
    w.exp_final["export_errors"].append("delta: OffsetOutOfRangeError: gone")


CASES: list[tuple[str, Callable[[World], None]]] = [
    ("lost_write", lost_acked_append),
    ("lost_write", lost_committed_record),
    ("phantom_write", phantom),
    ("duplicate", visible_twice),
    ("duplicate", copied_twice),
    ("duplicate_batch", batch_twice),
    ("aborted_read", aborted_visible),
    ("aborted_read", never_committed_seen),
    ("torn_read", torn_by_view),
    ("torn_read", torn_inside_range),
    ("torn_read_lso", torn_behind_lso),
    ("torn_final", torn_at_the_end),
    ("late_join", straggler),
    ("offsets_atomicity", offsets_lag_records),
    ("offsets_atomicity", offsets_without_records),
    ("offsets_atomicity", final_offsets_behind),
    ("lso_regression", lso_goes_back),
    ("zombie_commit", zombie),
    ("shared_epoch", same_epoch),
    ("premature_expiry", early_expiry),
    ("hanging_transaction", hanging),
    ("corrupt_error", told_corrupt),
    ("untyped_error", untyped),
    ("final_read_error", final_failed),
    ("export_duplicate", exported_twice),
    ("export_aborted", aborted_exported),
    ("export_aborted", unknown_exported),
    ("export_missing", skipped_by_export),
    ("export_final_error", final_export_failed),
]


def test_a_clean_history_has_no_anomaly() -> None:
    w = clean()
    aborted(w)
    report = w.check()
    assert report.ok, report.format()
    assert report.counts["txn_committed"] == 1 and report.counts["txn_aborted"] == 1
    assert report.counts["reads"] == 1 and report.counts["appends_ok"] == 1


def test_every_anomaly_class_has_a_history_that_shows_it() -> None:
    # the Spark writer's classes: tests/soak/test_spark_checker.py
    assert {name for name, _ in CASES} == {k for k in ANOMALIES if not k.startswith("spark_")}


@pytest.mark.parametrize("anomaly,make", CASES, ids=[f"{a}-{m.__name__}" for a, m in CASES])
def test_each_anomaly_is_caught_alone(anomaly: str, make: Callable[[World], None]) -> None:
    w = clean()
    make(w)
    report = w.check()
    found = {name for name, items in report.anomalies.items() if items}
    assert found == {anomaly}, report.format()
    assert anomaly in report.format()


def test_an_unknown_commit_may_go_either_way_but_never_half() -> None:
    w = clean()
    tag = txn_tag("copy.0", "a", 1)
    rid = out_rid(tag, {2: 1}, 2, 0)
    w.op("begin", epoch=1, producer_id=PID, tid="copy.0", tag=tag)
    w.op("send", tid="copy.0", tag=tag, topic="out", partition=2, rids=[rid],
         result={"base": 0, "count": 1})  # fmt: skip
    w.op("commit", epoch=1, tid="copy.0", tag=tag, status="fail", error="TransientStoreError")
    w.segment("out/2", [rid], epoch=1)
    w.commit_marker("out/2", epoch=1)  # it did commit: allowed
    assert w.check().ok


def test_record_ids_name_their_transaction_and_partitions() -> None:
    rec = parse_out_rid(out_rid("copy.1~i~4", {0: 2, 2: 1}, 2, 0))
    assert (rec.tag, rec.tid, rec.parts, rec.partition, rec.index, rec.extra) == (
        "copy.1~i~4",
        "copy.1",
        {0: 2, 2: 1},
        2,
        0,
        False,
    )
    assert parse_out_rid(out_rid("t~i~0", {1: 1}, 1, 3, extra=True)).extra
    assert declared_rids("t~i~0", {0: 1, 1: 2}) == {
        0: ["t~i~0|0:1,1:2|0.0"],
        1: ["t~i~0|0:1,1:2|1.0", "t~i~0|0:1,1:2|1.1"],
    }


def test_histories_pair_invocations_with_outcomes(tmp_path: Path) -> None:
    h = History(tmp_path / "c.jsonl", slot="c", role="copier")
    h.invoke("init", inst="a", tid="copy.0").ok(producer_id=1, epoch=0)
    h.invoke("commit", inst="a", tag="x").fail(ValueError("no"))
    h.invoke("send", inst="a", tag="x")  # killed: no outcome
    h.event("faults", counts={"slowdown": 2})
    h.close()
    with (tmp_path / "c.jsonl").open("a") as f:
        f.write('{"type": "ok", "id": "torn')  # a torn last line is skipped
    ops, events = pair(read_dir(tmp_path))
    assert [(o.f, o.status) for o in ops] == [
        ("init", "ok"),
        ("commit", "fail"),
        ("send", "unknown"),
    ]
    assert ops[0].result == {"producer_id": 1, "epoch": 0} and ops[1].error == "ValueError"
    assert [e["f"] for e in events] == ["faults"]
    assert json.loads(json.dumps(events))[0]["counts"] == {"slowdown": 2}


def test_a_run_lacks_work_until_a_client_saw_each_kind_succeed(tmp_path: Path) -> None:
    """The runner goes on past its seconds while work_missing names something:
    an operation that failed, or whose outcome is unknown, or the parent's own
    final export, does not count; a client that exited by itself is no kill."""
    copier = History(tmp_path / "copier.jsonl", slot="copy.0", role="copier")
    parent = History(tmp_path / "parent.jsonl", slot="parent", role="parent")
    copier.invoke("commit", inst="a", tag="x").fail(ValueError("refused"))
    copier.invoke("commit", inst="a", tag="y")  # killed: no outcome
    copier.invoke("observe", inst="a", start=0).ok()
    parent.invoke("export", inst="parent", kind="delta", final=True).ok(rows=3)
    parent.event("exit", proc=1, client="copy.0", returncode=0, killed=None)
    lacking = ["a committed transaction", "an export", "a client killed"]
    assert work_missing(read_dir(tmp_path)) == lacking
    copier.invoke("commit", inst="b", tag="z").ok()
    copier.invoke("export", inst="b", kind="delta").ok(rows=0)
    parent.event("exit", proc=2, client="copy.0", returncode=-9, killed="timer")
    assert work_missing(read_dir(tmp_path)) == []
