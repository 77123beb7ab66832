"""The history checker: a pure function of the clients' histories and one final
read of the whole log, that names every way the two disagree.

It trusts nothing the library says except what clients were told (their
histories) and what is in the store at the end (every segment with its header,
read with no isolation, plus what a read_committed consumer returns partition by
partition). Each anomaly class below is detected as described in its
docstring-like entry of :data:`ANOMALIES`; ``tests/soak/test_checker.py`` shows
each one caught on a hand-made history.

Time: every history line carries the true wall clock before and after its
call; the fencing and expiry checks compare those times across processes (one
machine, one clock).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.soak.history import Operation, pair
from tests.soak.model import (
    IN,
    OUT,
    OutRecord,
    declared_rids,
    parse_out_rid,
    tag_of,
    tid_of,
)

#: Every anomaly class, with what it means (0 of each expected).
ANOMALIES: dict[str, str] = {
    "lost_write": "an acknowledged append (or send) missing from the final log or not where "
    "its ack said; a record of a transaction whose commit was acknowledged not visible under "
    "read_committed at the end",
    "phantom_write": "a write whose failure said nothing was written is in the log",
    "duplicate": "a record visible twice under read_committed (at the end, or within one "
    "read), or one input record copied twice into the committed output",
    "duplicate_batch": "an idempotent batch (producer id, epoch, sequence), or a record id, "
    "twice in the log (read_uncommitted)",
    "aborted_read": "a record of an aborted or never-committed transaction seen by a "
    "read_committed reader (live or at the end)",
    "torn_read": "one read_many returned part of a transaction: some of its records, but "
    "not others inside the range it read, or past the view it fixed of a partition "
    "(the view predates them), or below its start and never returned by an earlier read",
    "torn_read_lso": "one read_many returned part of a transaction because an earlier "
    "transaction, undecided in the read's snapshot, held back another partition's LSO: "
    "Kafka's per-partition LSO, but not the all-or-nothing read that read_many promises",
    "torn_final": "after recovery, a read_committed consumer reading partition by "
    "partition sees some of a transaction but not every record it declared",
    "late_join": "a record written after its transaction had committed is visible as part of it",
    "offsets_atomicity": "a read shows a transaction's records but committed() after the "
    "read lacks its offsets; committed() before a read has offsets whose transaction the "
    "read does not show; at the end, the group's offsets differ from what was copied",
    "lso_regression": "a reader saw a partition's last stable offset go back",
    "zombie_commit": "a commit succeeded after a newer instance of its transactional id "
    "(whose init began after this one's ended) had finished its init, or after the "
    "transaction had been expired",
    "shared_epoch": "two producer instances held the same (producer id, epoch)",
    "premature_expiry": "an expiry aborted a transaction before it had run for its timeout "
    "in real time",
    "hanging_transaction": "after every client stopped and every transactional id was "
    "recovered, a partition's LSO is still below its high watermark",
    "corrupt_error": "a client was told an object is corrupt, yet the final read found "
    "every object intact",
    "untyped_error": "the library raised an exception outside the ArrowLogError hierarchy",
    "final_read_error": "the final read of the log failed",
    # the exports of topic exp (tests.soak.exports)
    "export_duplicate": "a record in an exported table more than once",
    "export_aborted": "a record of an aborted or never-committed transaction, or one no "
    "history wrote, in an exported table",
    "export_missing": "a record a read_committed consumer sees in the exported topic at the "
    "end is missing from a table after the final export (skipped, e.g. after the topic was "
    "created again)",
    "export_final_error": "the final export (no faults, no races) failed",
    # the Spark writer's topic sp (tests.soak.spark_checker)
    "spark_torn": "some but not all rows of a Spark job's version visible under read_committed",
    "spark_misrouted": "a row a Spark job wrote is not in the partition send_keyed gives its key",
    "spark_lso_held": "sp's LSO below its high watermark right after a Spark job was "
    "acknowledged, or when the last Spark instance had ended cleanly",
}

#: Errors after which a write certainly did not happen.
NOT_WRITTEN = frozenset({
    "OutOfOrderSequenceError", "DuplicateSequenceError", "ProducerFencedError",
    "InvalidTxnStateError", "SchemaMismatchError", "InvalidBatchError",
    "RecordBatchTooLargeError", "OffsetMismatchError",
})  # fmt: skip
#: Errors of commit_transaction that mean the transaction did not commit.
COMMIT_REFUSED = frozenset(
    {"ProducerFencedError", "TransactionTimeoutError", "InvalidTxnStateError"}
)
CORRUPT = frozenset({"CorruptObjectError", "CorruptSegmentError", "CorruptCheckpointError"})


@dataclass
class Report:
    """Counts of what happened, and every anomaly found, by class."""

    counts: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    anomalies: dict[str, list[str]] = field(default_factory=lambda: {k: [] for k in ANOMALIES})
    #: what the checker could not decide (not anomalies)
    notes: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def count(self, anomaly: str) -> int:
        return len(self.anomalies[anomaly])

    def add(self, anomaly: str, example: str) -> None:
        self.anomalies[anomaly].append(example)

    def note(self, kind: str, example: str) -> None:
        self.notes.setdefault(kind, []).append(example)

    def format(self, examples: int = 3) -> str:
        c = self.counts
        lines = [
            "transactions: committed {} / aborted {} / never committed (killed or failed "
            "before commit) {} / outcome unknown {}".format(
                c.get("txn_committed", 0), c.get("txn_aborted", 0), c.get("txn_unfinished", 0),
                c.get("txn_unknown", 0),
            ),
            "kills: {} (timer {}, at a protocol point {}); clients started {}, crashed {}".format(
                c.get("kills", 0), c.get("kills_timer", 0), c.get("kills_point", 0),
                c.get("spawns", 0), c.get("crashes", 0),
            ),
            f"faults injected: {sum(self.faults.values())} "
            + ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())),
            "reads: {} read_many ({} failed); appends acknowledged {}; inits {}; expiries {} "
            "({} transactions)".format(
                c.get("reads", 0), c.get("reads_failed", 0), c.get("appends_ok", 0),
                c.get("inits_ok", 0), c.get("expire_calls", 0), c.get("expired", 0),
            ),
            "exports: {} runs ok ({} rows), {} lost a race; topic exp re-created {}, {} "
            "ranges compacted, {} objects vacuumed, {} offsets deleted by retention at the end; "
            "delta {} rows, iceberg {} rows, topic {} records ({} transactions committed, "
            "{} aborted)".format(
                c.get("exports_ok", 0), c.get("exports_rows", 0), c.get("exports_lost_race", 0),
                c.get("exp_recreated", 0), c.get("exp_compacted", 0), c.get("exp_removed", 0),
                c.get("exp_deleted_at_end", 0), c.get("delta_rows", 0), c.get("iceberg_rows", 0),
                c.get("exp_at_end", 0), c.get("exp_txn_committed", 0), c.get("exp_txn_aborted", 0),
            ),
            "spark: {} instances (slowest up in {} s), {} killed ({}); versions acknowledged {}, "
            "committed {}; reruns {}; jobs failed on purpose {}, otherwise {}, unknown {}; "
            "rows in staged objects {}".format(
                c.get("spark_instances", 0), c.get("spark_startup_s", 0), c.get("spark_kills", 0),
                ", ".join(f"{k[len('spark_kills_'):]} {v}" for k, v in sorted(c.items())
                          if k.startswith("spark_kills_")) or "-",
                c.get("spark_versions_acked", 0), c.get("spark_versions_committed", 0),
                c.get("spark_reruns", 0), c.get("spark_jobs_failed_on_purpose", 0),
                c.get("spark_jobs_failed", 0), c.get("spark_jobs_unknown", 0),
                c.get("spark_rows_staged", 0),
            ),
            "errors told to clients: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.errors.items())) or "none"),
            "anomalies (0 expected):",
        ]  # fmt: skip
        for name in ANOMALIES:
            found = self.anomalies[name]
            lines.append(f"  {name:<20} {len(found)}")
            lines += [f"      e.g. {e}" for e in found[:examples]]
        for kind, items in sorted(self.notes.items()):
            lines.append(f"note: {kind}: {len(items)}")
            lines += [f"      e.g. {e}" for e in items[:examples]]
        lines.append("RESULT: " + ("no anomalies" if self.ok else "ANOMALIES FOUND"))
        return "\n".join(lines)


@dataclass
class Txn:
    """One transaction attempt, as its clients were told."""

    tag: str
    tid: str
    inst: str
    epoch: int | None = None
    producer_id: int | None = None
    begin: Operation | None = None
    sends: list[Operation] = field(default_factory=list)
    offsets: list[Operation] = field(default_factory=list)
    commits: list[Operation] = field(default_factory=list)
    aborts: list[Operation] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        """committed | aborted (told so) | unknown | unfinished (never committed)."""
        if any(c.ok for c in self.commits):
            return "committed"
        if any(a.ok for a in self.aborts):
            return "aborted"  # an abort after a failed commit: that commit never prepared
        if any(c.status == "unknown" or c.error not in COMMIT_REFUSED for c in self.commits):
            return "unknown"
        return "aborted" if self.commits else "unfinished"

    @property
    def never_visible(self) -> bool:
        return self.outcome in ("aborted", "unfinished")


def check(events: Iterable[Mapping[str, Any]], final: Mapping[str, Any]) -> Report:
    """Check histories (raw JSON lines of every process) against the final read
    (see :func:`tests.soak.runner.final_read`)."""
    return _Checker([dict(e) for e in events], final).run()


#: The work that makes a run worth checking, as (what, the operation's ``f``
#: that a client must have seen succeed at least once, the roles that do it);
#: and a client killed by its plan (any role). See :func:`work_missing`.
WORK = (
    ("a committed transaction", "commit", ("copier", "job")),
    ("a read", "observe", ("reader",)),
    ("an export", "export", ("exporter",)),
)
KILLED = "a client killed"


def work_missing(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """What the run has not done yet of :data:`WORK`, nor a client killed by
    its plan: the runner goes on past its seconds until this is empty (a slow
    machine may kill every transaction of a short run before its commit)."""
    ops, plain = pair(dict(e) for e in events)
    done = {op.f for op in ops if op.ok and op.inst != "parent"}
    missing = [what for what, f, _ in WORK if f not in done]
    if not any(e["f"] == "exit" and e.get("killed") in ("timer", "point") for e in plain):
        missing.append(KILLED)
    return missing


class _Checker:
    def __init__(self, events: list[dict[str, Any]], final: Mapping[str, Any]) -> None:
        self.ops, self.events = pair(events)
        self.final = final
        self.report = Report()
        self._index_history()
        self._index_final()

    # --- indexes ------------------------------------------------------------------

    def _index_history(self) -> None:
        self.by_f: dict[str, list[Operation]] = collections.defaultdict(list)
        for op in self.ops:
            self.by_f[op.f].append(op)
        self.txns: dict[str, Txn] = {}
        for op in self.ops:
            tag = op.args.get("tag")
            if tag is None or op.f.startswith("exp_"):
                continue  # the exported topic's transactions: tests.soak.exports
            txn = self.txns.get(tag)
            if txn is None:
                txn = self.txns[tag] = Txn(tag, tid_of(tag), op.inst or "?")
            if op.f == "begin":
                txn.begin = op
                txn.epoch = op.args.get("epoch")
                txn.producer_id = op.args.get("producer_id")
            elif op.f == "send":
                txn.sends.append(op)
            elif op.f == "send_offsets":
                txn.offsets.append(op)
            elif op.f == "commit":
                txn.commits.append(op)
            elif op.f == "abort":
                txn.aborts.append(op)
        # when each transactional id's epochs were fenced, by inits and expiries
        self.inits: dict[str, list[Operation]] = collections.defaultdict(list)
        for op in self.by_f["init"]:
            if op.ok:
                self.inits[op.args["tid"]].append(op)
        self.expiries: list[tuple[Operation, dict[str, Any]]] = [
            (op, e) for f in ("expire", "recover") for op in self.by_f[f] if op.ok
            for e in op.result.get("expired", [])
        ]  # fmt: skip
        self._by_offset: dict[tuple[str, int], list[Txn]] | None = None

    def _index_final(self) -> None:
        final = self.final
        self.segments: dict[str, list[dict[str, Any]]] = final.get("segments", {})
        #: rid -> [(partition key, offset)] of every copy in the log
        self.locs: dict[str, list[tuple[str, int]]] = collections.defaultdict(list)
        #: partition key -> offset -> rid
        self.at: dict[str, dict[int, str]] = collections.defaultdict(dict)
        #: tag -> partition key -> [(rid, offset)] (declared records, first copies)
        self.tag_recs: dict[str, dict[str, list[tuple[str, int]]]] = {}
        self.src: dict[str, str] = {}  # out rid -> the input rid it copies
        for key, segs in self.segments.items():
            for s in segs:
                for j, rid in enumerate(s.get("rids", [])):
                    self.locs[rid].append((key, s["base"] + j))
                    self.at[key][s["base"] + j] = rid
                    if key.startswith(OUT + "/"):
                        self.src[rid] = s["src"][j]
        for rid, where in self.locs.items():
            key, offset = where[0]
            if key.startswith(OUT + "/") and not parse_out_rid(rid).extra:
                self.tag_recs.setdefault(tag_of(rid), {}).setdefault(key, []).append((rid, offset))
        self.committed: dict[str, list[str]] = final.get("committed", {})
        self.visible_final: dict[str, set[str]] = {k: set(v) for k, v in self.committed.items()}

    def min_offset(self, rid: str) -> int | None:
        where = self.locs.get(rid)
        return min(o for _, o in where) if where else None

    # --- the run ------------------------------------------------------------------

    def run(self) -> Report:
        self.count()
        self.check_appends()
        self.check_duplicates()
        self.check_committed_transactions()
        self.check_visibility()
        self.check_reads()
        self.check_final_offsets()
        self.check_fencing()
        self.check_expiry()
        self.check_end_state()
        return self.report

    def count(self) -> None:
        c: collections.Counter[str] = collections.Counter()
        for txn in self.txns.values():
            c[f"txn_{txn.outcome}"] += 1
        c["appends_ok"] = sum(op.ok for op in self.by_f["append"])
        c["staged_batches"] = sum(
            1 for segs in self.segments.values() for s in segs if s.get("staged")
        )
        c["inits_ok"] = sum(op.ok for op in self.by_f["init"])
        c["reads"] = sum(op.ok for op in self.by_f["observe"])
        c["reads_failed"] = sum(op.status == "fail" for op in self.by_f["observe"])
        c["expire_calls"] = sum(op.ok for op in self.by_f["expire"])
        c["expired"] = sum(1 for op, _ in self.expiries if op.f == "expire")
        faults: dict[tuple[str, int], dict[str, int]] = {}
        for e in self.events:
            if e["f"] == "faults":
                faults[(e.get("slot", "?"), e.get("pid", 0))] = e["counts"]
            elif e["f"] == "spawn":
                c["spawns"] += 1
            elif e["f"] == "exit":
                killed = e.get("killed")
                if killed in ("timer", "point"):
                    c["kills"] += 1
                    c[f"kills_{killed}"] += 1
                elif e.get("returncode") not in (0, -9) and killed != "stop":
                    c["crashes"] += 1
        total: collections.Counter[str] = collections.Counter()
        for counts in faults.values():
            total.update(counts)
        errors = collections.Counter(op.error for op in self.ops if op.error is not None)
        self.report.counts = dict(c)
        self.report.faults = dict(total)
        self.report.errors = {str(k): v for k, v in errors.items()}

    # --- writes -------------------------------------------------------------------

    def check_appends(self) -> None:
        """Every acknowledged append (idempotent or transactional, committed or
        not: the log never forgets) is where its ack said; settled (flushed)
        batches are present; refused ones are absent."""
        r = self.report
        for op in self.by_f["append"] + self.by_f["send"]:
            rids = op.args["rids"]
            key = f"{op.args['topic']}/{op.args['partition']}"
            if op.ok:
                base = op.result["base"]
                found = [self.at[key].get(base + j) for j in range(len(rids))]
                if found != rids:
                    where = {rid: self.locs.get(rid) for rid in rids}
                    r.add("lost_write", f"{op.describe()} acked {key}@{base} {rids}; the log has "
                                        f"{found} there; the records are at {where}")  # fmt: skip
        for op in self.by_f["flush"]:
            if op.ok:
                absent = [rid for rid in op.args["rids"] if rid not in self.locs]
                if absent:
                    r.add("lost_write", f"{op.describe()} settled a batch; {absent} not in the log")
        for op in self.by_f["append"] + self.by_f["send"]:
            refused = op.status == "fail" and (
                op.error in NOT_WRITTEN
                or (op.error == "TransientStoreError" and op.maybe_applied is False)
            )
            if refused:
                present = [rid for rid in op.args["rids"] if rid in self.locs]
                if present:
                    r.add("phantom_write", f"{op.describe()} ({op.message}); yet {present} "
                                           f"are at {[self.locs[p] for p in present]}")  # fmt: skip

    def check_duplicates(self) -> None:
        r = self.report
        batches: collections.Counter[tuple[str, int, int, int]] = collections.Counter()
        first: dict[tuple[str, int, int, int], int] = {}
        for key, segs in self.segments.items():
            for s in segs:
                if s.get("control") or s["pid"] < 0:
                    continue
                ident = (key, s["pid"], s["epoch"], s["seq"])
                batches[ident] += 1
                first.setdefault(ident, s["base"])
        explained: set[str] = set()  # records of batches reported as duplicates
        for ident, n in batches.items():
            if n > 1:
                key = ident[0]
                segs = [s for s in self.segments[key] if not s.get("control")
                        and (key, s["pid"], s["epoch"], s["seq"]) == ident]  # fmt: skip
                r.add("duplicate_batch", f"batch (producer {ident[1]}, epoch {ident[2]}, "
                                         f"sequence {ident[3]}) {n} times in {key}, at "
                                         f"{[s['base'] for s in segs]}")  # fmt: skip
                explained.update(rid for s in segs for rid in s.get("rids", []))
        for rid, where in self.locs.items():
            if len(where) > 1 and rid not in explained:
                r.add("duplicate_batch", f"record {rid} {len(where)} times: {where}")
        seen: collections.Counter[str] = collections.Counter()
        for rids in self.committed.values():
            seen.update(rids)
        for rid, n in seen.items():
            if n > 1:
                r.add("duplicate", f"{rid} visible {n} times at the end (at {self.locs.get(rid)})")
        copies: collections.defaultdict[str, list[str]] = collections.defaultdict(list)
        for key, rids in self.committed.items():
            if key.startswith(OUT + "/"):
                for rid in set(rids):
                    if self.src.get(rid):
                        copies[self.src[rid]].append(rid)
        for src, rids in copies.items():
            if len(rids) > 1:
                r.add("duplicate", f"input record {src} copied {len(rids)} times: {sorted(rids)}")

    def check_committed_transactions(self) -> None:
        """Every record of a transaction whose commit was acknowledged is visible."""
        for txn in self.txns.values():
            if txn.outcome != "committed":
                continue
            for op in txn.sends:
                if not op.ok or op.args.get("extra"):
                    continue
                key = f"{op.args['topic']}/{op.args['partition']}"
                missing = [
                    rid for rid in op.args["rids"] if rid not in self.visible_final.get(key, ())
                ]
                if missing:
                    state = "in the log but not visible" if missing[0] in self.locs else "absent"
                    self.report.add(
                        "lost_write",
                        f"transaction {txn.tag} committed ({txn.commits[0].describe()}); "
                        f"{op.describe()} records {missing} {state}",
                    )

    def check_visibility(self) -> None:
        """At the end and in every live read: nothing of an aborted or never
        committed transaction, nothing written after a commit, and (at the end)
        every declared record of any transaction that shows at all."""
        r = self.report
        wrong: dict[str, list[str]] = collections.defaultdict(list)
        late: dict[str, list[str]] = collections.defaultdict(list)
        sources: list[tuple[str, Mapping[str, Iterable[str]]]] = [
            ("the final read", self.committed)
        ]
        sources += [(op.describe(), op.result["rids"]) for op in self.by_f["observe"] if op.ok]
        for where, by_key in sources:
            for key, rids in by_key.items():
                if not key.startswith(OUT + "/"):
                    continue
                for rid in rids:
                    rec = parse_out_rid(rid)
                    if rec.extra:
                        late[rec.tag].append(f"{rid} in {where}")
                        continue
                    txn = self.txns.get(rec.tag)
                    if txn is None or txn.never_visible:
                        outcome = "unknown to every history" if txn is None else txn.outcome
                        wrong[rec.tag].append(f"{rid} ({outcome}) in {where}")
        for tag, items in wrong.items():
            r.add("aborted_read", f"{tag}: {len(items)} sightings, first {items[0]}")
        for tag, items in late.items():
            r.add("late_join", f"{tag}: {len(items)} sightings of records sent after its commit "
                               f"returned; first {items[0]}")  # fmt: skip
        shown: dict[str, OutRecord] = {}
        for key, rids in self.committed.items():
            if key.startswith(OUT + "/"):
                for rid in rids:
                    rec = parse_out_rid(rid)
                    if not rec.extra:
                        shown.setdefault(rec.tag, rec)
        for tag, rec in shown.items():
            txn = self.txns.get(tag)
            if txn is None or txn.never_visible or txn.outcome == "committed":
                continue  # reported above, or as lost writes
            missing = [
                rid for q, rids in declared_rids(tag, rec.parts).items() for rid in rids
                if rid not in self.visible_final.get(f"{OUT}/{q}", ())
            ]  # fmt: skip
            if missing:
                r.add("torn_final", f"{tag} ({txn.outcome}) partly visible at the end: "
                                    f"{missing} missing")  # fmt: skip

    # --- live reads ---------------------------------------------------------------

    def check_reads(self) -> None:
        by_reader: dict[str, list[Operation]] = collections.defaultdict(list)
        for op in self.by_f["observe"]:
            by_reader[op.inst or "?"].append(op)
        for ops in by_reader.values():
            self._check_reader(ops)

    def _check_reader(self, ops: list[Operation]) -> None:
        r = self.report
        seen: set[str] = set()
        first_start: dict[str, int] | None = None
        lso: dict[str, tuple[int, str]] = {}
        for op in ops:
            if op.status == "fail" and op.error == "OffsetOutOfRangeError":
                r.add("lso_regression", f"{op.describe()}: read_many from {op.args.get('start')}, "
                                        f"LSOs this reader saw earlier: {op.message}")  # fmt: skip
            if not op.ok:
                continue
            res = op.result
            for phase in ("lso_before", "lso_after"):
                for key, value in res[phase].items():
                    prev = lso.get(key)
                    if prev is not None and value < prev[0]:
                        r.add("lso_regression", f"{key}: LSO {value} in {op.describe()} "
                                                f"({phase}) after {prev[0]} in "
                                                f"{prev[1]}")  # fmt: skip
                    lso[key] = (value, f"{op.describe()} ({phase})")
            if first_start is None:
                first_start = dict(res["start"])
            rids: dict[str, list[str]] = res["rids"]
            everything = [rid for v in rids.values() for rid in v]
            for rid, n in collections.Counter(everything).items():
                if n > 1:
                    r.add("duplicate", f"{rid} returned {n} times by {op.describe()}")
            seen.update(everything)
            read = _Read.of(op, first_start, seen)
            tags = {tag_of(rid) for rid in everything if not parse_out_rid(rid).extra}
            for tag in sorted(tags):
                txn = self.txns.get(tag)
                if txn is not None and txn.never_visible:
                    continue  # an aborted read, reported as such
                missing = self._unseen(read, tag)
                shown = sorted(
                    k for k, v in read.visible.items() if any(tag_of(x) == tag for x in v)
                )
                certain = [m for kind, m in missing if kind != "lso"]
                if certain:
                    r.add("torn_read", f"{op.describe()} shows {tag} in {shown} but not "
                                       f"{certain[:4]}")  # fmt: skip
                elif missing:
                    r.add("torn_read_lso", f"{op.describe()} shows {tag} in {shown} but not "
                                           f"{[m for _, m in missing][:4]}")  # fmt: skip
            self._check_offsets(read, res)

    def _unseen(self, read: _Read, tag: str) -> list[tuple[str, str]]:
        """Records of ``tag`` that ``read`` did not return although it returned
        others, each with why: ``unread`` (below the read's start, and no read of
        this reader ever returned it), ``hidden`` (inside the range the read
        covered), ``view`` (past the partition's view: the view was fixed before
        the record landed, or a listing missed it), ``lso`` (behind the LSO of a
        transaction that the read's snapshot had not decided)."""
        out = []
        for key, recs in self.tag_recs.get(tag, {}).items():
            end, hw = read.ends.get(key), read.hws.get(key)
            for rid, offset in recs:
                if rid in read.visible.get(key, ()) or offset < read.first_start.get(key, 0):
                    continue
                where = f"{rid}@{offset}"
                if offset < read.start.get(key, 0):
                    if rid not in read.seen:
                        out.append(("unread", f"{where} below the read's start, never read"))
                elif end is None or hw is None:
                    out.append(("hidden", f"{where} (no view recorded for {key})"))
                elif offset < end:
                    out.append(("hidden", f"{where} inside the range read ({key} up to {end})"))
                elif offset >= hw:
                    out.append(("view", f"{where} past {key}'s view (high watermark {hw})"))
                else:
                    out.append(("lso", f"{where} behind {key}'s LSO {end} (view to {hw})"))
        return out

    def _check_offsets(self, read: _Read, res: Mapping[str, Any]) -> None:
        """Records visible => their offsets in committed() after the read;
        offsets in committed() before the read => their records visible (unless
        behind the LSO of a transaction still undecided)."""
        r = self.report
        c1: dict[str, int | None] = res["c1"]
        c2: dict[str, int | None] = res["c2"]
        tags = {tag_of(rid) for v in read.visible.values() for rid in v}
        for tag in sorted(tags):
            txn = self.txns.get(tag)
            if txn is None or txn.never_visible:
                continue
            for op in txn.offsets:
                for key, u in op.args["offsets"].items():
                    after = c2.get(key)
                    if after is None or after < u:
                        r.add("offsets_atomicity", f"{read.op.describe()} shows {tag}, which "
                                                   f"commits {key}={u}, but committed() after the "
                                                   f"read says {after}")  # fmt: skip
        for key, u in c1.items():
            if not u:
                continue
            for txn in self._committing(key, u):
                missing = [m for kind, m in self._unseen(read, txn.tag) if kind != "lso"]
                if missing:
                    r.add("offsets_atomicity", f"committed() before {read.op.describe()} has "
                                               f"{key}={u} from {txn.tag}, but the read lacks "
                                               f"{missing[:3]}")  # fmt: skip

    def _committing(self, key: str, u: int) -> list[Txn]:
        """Transactions that sent offset ``u`` for ``key`` and show at the end."""
        if self._by_offset is None:
            self._by_offset = collections.defaultdict(list)
            for txn in self.txns.values():
                shows = any(
                    rid in self.visible_final.get(k, ())
                    for k, recs in self.tag_recs.get(txn.tag, {}).items()
                    for rid, _ in recs
                )
                if shows:
                    for op in txn.offsets:
                        for k, offset in op.args["offsets"].items():
                            self._by_offset[(k, offset)].append(txn)
        return self._by_offset.get((key, u), [])

    def check_final_offsets(self) -> None:
        """The group's final offset of input partition i is exactly what the
        committed output copies of it: offsets 0..u-1, once each."""
        r = self.report
        group: dict[str, int | None] = dict(self.final.get("group", {}))
        copied: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
        for key, rids in self.committed.items():
            if not key.startswith(OUT + "/"):
                continue
            for rid in set(rids):
                src = self.src.get(rid)
                if src and src in self.locs:
                    src_key, offset = self.locs[src][0]
                    copied[src_key][offset] += 1
        for key in sorted(set(group) | set(copied)):
            if not key.startswith(IN + "/"):
                continue
            u = group.get(key) or 0
            have = copied.get(key, collections.Counter())
            missing = [o for o in range(u) if o not in have]
            ahead = sorted(o for o in have if o >= u)
            if missing:
                r.add("offsets_atomicity", f"{key}: the group committed {u} but input offsets "
                                           f"{_ranges(missing)} were never copied")  # fmt: skip
            if ahead:
                r.add("offsets_atomicity", f"{key}: input offsets {_ranges(ahead)} were copied "
                                           f"but the group committed only {u}")  # fmt: skip

    # --- fencing and expiry -------------------------------------------------------

    def check_fencing(self) -> None:
        r = self.report
        began: dict[str, Operation] = {}  # instance -> its init (or resume)
        for op in self.by_f["init"] + self.by_f["resume"]:
            if op.ok and op.inst is not None:
                began[op.inst] = op
        for op in self.by_f["commit"]:
            if not op.ok:
                continue
            mine = began.get(op.inst or "")
            tid = op.args["tid"]
            if mine is not None and mine.t1 is not None:
                for other in self.inits[tid]:
                    if (other.inst != op.inst and other.t0 > mine.t1 and other.t1 is not None
                            and other.t1 < op.t0):  # fmt: skip
                        epoch = other.result.get("epoch")
                        r.add("zombie_commit", f"{op.describe()} of {op.args['tag']} committed; "
                                               f"{other.describe()} (epoch {epoch}) had fenced "
                                               "it")  # fmt: skip
                        break
            for exp, e in self.expiries:
                if (e["tid"] == tid and e["txn_epoch"] == op.args.get("epoch")
                        and e["state"] == "COMPLETE_ABORT" and exp.t1 is not None
                        and exp.t1 < op.t0):  # fmt: skip
                    r.add("zombie_commit", f"{op.describe()} of {op.args['tag']} committed after "
                                           f"{exp.describe()} had aborted it")  # fmt: skip
        holders: dict[tuple[int, int], set[str]] = collections.defaultdict(set)
        for op in self.by_f["init"]:
            if op.ok:
                holders[(op.result["producer_id"], op.result["epoch"])].add(op.inst or "?")
        for op in self.by_f["commit"] + self.by_f["abort"]:
            txn = self.txns.get(op.args.get("tag", ""))
            held = op.ok and op.result.get("state_after") == "READY"
            if held and txn is not None and txn.producer_id is not None:
                holders[(txn.producer_id, op.result["epoch_after"])].add(op.inst or "?")
        for (pid, epoch), insts in holders.items():
            if len(insts) > 1:
                r.add(
                    "shared_epoch",
                    f"producer {pid} epoch {epoch} held by instances {sorted(insts)}",
                )

    def check_expiry(self) -> None:
        """An expiry may abort a transaction only after it has run for its timeout,
        measured in real time from its begin."""
        begun: dict[tuple[str, int], float] = {}
        for txn in self.txns.values():
            if txn.begin is not None and txn.epoch is not None:
                k = (txn.tid, txn.epoch)
                begun[k] = min(begun.get(k, math.inf), txn.begin.t0)
        for op, e in self.expiries:
            if op.f != "expire" or e["state"] != "COMPLETE_ABORT" or op.t1 is None:
                continue
            t_begin = begun.get((e["tid"], e["txn_epoch"]))
            if t_begin is None:
                continue
            age = op.t1 - t_begin
            if age < e["timeout_ms"] / 1000:
                self.report.add(
                    "premature_expiry",
                    f"{op.describe()} (clock skew {op.args.get('skew')} s) aborted {e['tid']} "
                    f"epoch {e['txn_epoch']} {age:.2f} s after it began; timeout "
                    f"{e['timeout_ms'] / 1000:g} s",
                )

    def check_end_state(self) -> None:
        r = self.report
        for key, lso in self.final.get("lso", {}).items():
            end = self.final.get("end", {}).get(key)
            if end is not None and lso < end:
                r.add(
                    "hanging_transaction", f"{key}: LSO {lso} < high watermark {end} after recovery"
                )
        for error in self.final.get("errors", []):
            r.add("final_read_error", error)
        if not self.final.get("errors"):
            for op in self.ops:
                if op.error in CORRUPT:
                    r.add("corrupt_error", f"{op.describe()}: {op.message}")
            for e in self.events:
                if e["f"] == "input_error" and e.get("error") in CORRUPT:
                    r.add("corrupt_error", f"reading input in {e.get('slot')}: {e.get('message')}")
        for e in self.events:
            if e["f"] == "client_bug":
                r.note("client_bug (an arrowlog error the soak client did not handle)",
                       f"{e.get('slot')}: {e.get('error')}: {e.get('message')}")  # fmt: skip
            if e["f"] == "untyped_error":
                tb = str(e.get("traceback", "")).strip().splitlines()
                r.add("untyped_error", f"{e.get('slot')}: {e.get('error')}: {e.get('message')} "
                                       f"(at {tb[-3:] if tb else '?'})")  # fmt: skip


@dataclass
class _Read:
    """One successful read_many, with what the checker needs around it."""

    op: Operation
    start: dict[str, int]
    first_start: dict[str, int]
    visible: dict[str, set[str]]
    #: every record this reader has returned so far
    seen: set[str]
    #: per partition: where the read ended (the LSO of its view under its
    #: decisions), and the high watermark of its view
    ends: dict[str, int]
    hws: dict[str, int]

    @classmethod
    def of(cls, op: Operation, first_start: dict[str, int], seen: set[str]) -> _Read:
        res = op.result
        decisions: dict[str, str] = res.get("decisions", {})
        ends, hws = {}, {}
        for key, view in res.get("views", {}).items():
            undecided = [
                first for tid, pid, epoch, first in view["open"]
                if decisions.get(f"{tid}/{epoch}", "undecided") == "undecided"
            ]  # fmt: skip
            hws[key] = view["hw"]
            ends[key] = min(undecided, default=view["hw"])
        # where the read really ended (below the LSO where it cut before a
        # transaction it could only have shown in part)
        ends.update(res.get("ends", {}))
        visible = {k: set(v) for k, v in res["rids"].items()}
        return cls(op, dict(res["start"]), first_start, visible, seen, ends, hws)


def _ranges(offsets: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``0-2,5``."""
    out: list[str] = []
    for o in sorted(offsets):
        if out and out[-1].split("-")[-1] == str(o - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{o}"
        else:
            out.append(str(o))
    text = ",".join(out)
    return text if len(text) < 120 else text[:117] + "..."
