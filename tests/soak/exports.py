"""The soak's exports: a topic ``exp`` exported to a Delta table and to an Iceberg
table by two racing exporters of each kind, while a feeder writes committed and
aborted transactions and plain appends into it, a compactor and a vacuum (which
applies the topic's retention) run beside them, and the parent deletes the topic
and creates it again halfway through.

Each exporter process is SIGKILLed on the parent's timer, like every other
client, and its store gets faults (lost replies, failed and slow requests,
listings that miss fresh keys). After the run the parent exports once more
without faults, until nothing is new, and reads both tables. The checker
(:func:`check_exports`) then holds, for each table:

- no record twice;
- no record of an aborted (or never committed) transaction, and no record no
  history wrote;
- every record a read_committed consumer sees in ``exp`` at the end, in the
  table: a re-created topic is exported from its start, never from the old
  topic's offsets.

Records of the deleted incarnation, or removed by retention, before an export
reached them are gone from the log and need not be in a table; those that were
exported are still checked for the first two points.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

import arrowlog
from arrowlog import ProducerState, TopicConfig
from arrowlog.errors import ArrowLogError
from tests.soak import chaos
from tests.soak.checker import Report, Txn
from tests.soak.history import History, Operation, new_instance, pair
from tests.soak.model import TXN_TIMEOUT_MS, tid_of, txn_tag

if TYPE_CHECKING:
    from tests.soak.clients import Client

EXP = "exp"
EXP_PARTITIONS = 2
EXP_SCHEMA = pa.schema([("rid", pa.string())])
FEED_TID = "feed.0"
#: Iceberg table identifier and the Delta table's directory name
ICEBERG_TABLE = "soak.exp"
DELTA_DIR = "delta-exp"
ICEBERG_DIR = "iceberg"
#: Records older than this (on the store's clock) are deleted by the vacuum:
#: long beside an exporter's pace, short beside a soak.
RETENTION_MS = 15_000
#: Deleted and compacted segments are removed this long after (the default is 15 min).
DELETE_DELAY_MS = 2_000
EXPORT_KINDS = ("delta", "iceberg")
#: the topic is re-created mid-run and retention may pass a killed exporter:
#: the exports go on from the new topic's start, and past deleted records
RESUME: dict[str, Any] = {"on_recreated": "restart", "on_data_loss": "skip"}

SEGMENTS_EXP = "exp*/*/segments/*"

PROFILES = {
    "feeder": chaos.Profile(
        lose_ack=0.02, fail_before=0.02, slowdown=0.03, late=(SEGMENTS_EXP, chaos.COORDINATOR),
        hold=(("put_if_absent", chaos.COORDINATOR), ("put_if_absent", SEGMENTS_EXP)),
        hide=(SEGMENTS_EXP,), throttle=(SEGMENTS_EXP,),
    ),
    "compactor": chaos.Profile(fail_before=0.02, slowdown=0.03, hide=(SEGMENTS_EXP,),
                               weights=(0, 0, 1, 0)),
    "vacuum": chaos.Profile(fail_before=0.02, slowdown=0.03, hide=(SEGMENTS_EXP,),
                            weights=(0, 0, 1, 0)),
    "exporter": chaos.Profile(
        fail_before=0.01, slowdown=0.03, hide=(SEGMENTS_EXP,), throttle=(SEGMENTS_EXP,),
        hold=(("list", "exp*"), ("get", chaos.COORDINATOR)), weights=(0, 2, 1, 1),
    ),
}  # fmt: skip
KILL_PATTERNS: dict[str, tuple[str, ...]] = {
    "feeder": (chaos.COORDINATOR, SEGMENTS_EXP),
    "compactor": ("exp*/*/compacted/*",),
    "vacuum": (),
    "exporter": (),
}


def topic_config() -> TopicConfig:
    return TopicConfig(
        checkpoint_interval=12, retention_ms=RETENTION_MS, delete_delay_ms=DELETE_DELAY_MS
    )


def create_topic(log: arrowlog.ArrowLog) -> None:
    log.create_topic(EXP, EXP_SCHEMA, partitions=EXP_PARTITIONS, config=topic_config())


def exp_rid(tag: str, partition: int, index: int) -> str:
    return f"{tag}|{partition}.{index}"


def plain_rid(inst: str, n: int) -> str:
    return f"plain~{inst}~{n}"


# --- clients -------------------------------------------------------------------------


def feeder(c: Client) -> None:
    """Transactions into ``exp`` (committed, or aborted on purpose) and idempotent
    appends; a user's answer to every error (abort, or a new instance)."""
    while not c.stopping():
        log = c.connect()
        inst = new_instance()
        p = log.producer(transactional_id=FEED_TID, transaction_timeout_ms=TXN_TIMEOUT_MS)
        plain = log.producer()
        try:
            c.call("exp_init", p.init_transactions, inst=inst, tid=FEED_TID)
        except ArrowLogError:
            c.pause(0.05, 0.3)
            continue
        k = n = 0
        while not c.stopping():
            if c.rng.random() < 0.3:
                rids = [plain_rid(inst, n + j) for j in range(c.rng.randint(1, 4))]
                n += len(rids)
                q = c.rng.randrange(EXP_PARTITIONS)
                batch = pa.record_batch({"rid": rids}, schema=EXP_SCHEMA)
                try:
                    c.call("exp_append", lambda: plain.send(EXP, batch, partition=q),  # noqa: B023
                           inst=inst, partition=q, rids=rids)  # fmt: skip
                except ArrowLogError as e:
                    if not e.retriable:
                        break
            else:
                tag = txn_tag(FEED_TID, inst, k)
                k += 1
                if not _transaction(c, p, inst, tag):
                    break
            c.pause(0.0, 0.05)


def _transaction(c: Client, p: arrowlog.Producer, inst: str, tag: str) -> bool:
    common: dict[str, Any] = {"inst": inst, "tid": FEED_TID, "tag": tag}
    try:
        c.call("exp_begin", p.begin_transaction, **common)
        for q in sorted(c.rng.sample(range(EXP_PARTITIONS), c.rng.randint(1, EXP_PARTITIONS))):
            rids = [exp_rid(tag, q, j) for j in range(c.rng.randint(1, 4))]
            batch = pa.record_batch({"rid": rids}, schema=EXP_SCHEMA)
            c.call("exp_send", lambda: p.send(EXP, batch, partition=q),  # noqa: B023
                   partition=q, rids=rids, **common)  # fmt: skip
        commit = c.rng.random() >= 0.15
        c.call("exp_commit" if commit else "exp_abort",
               p.commit_transaction if commit else p.abort_transaction, **common)  # fmt: skip
    except ArrowLogError as e:
        if p.state in (ProducerState.IN_TRANSACTION, ProducerState.ABORTABLE_ERROR):
            try:
                c.call("exp_abort", p.abort_transaction, **common)
            except ArrowLogError:
                return False
        return e.retriable and p.state is ProducerState.READY
    return p.state is ProducerState.READY


def compactor(c: Client) -> None:
    from arrowlog.maintenance.compaction import MIN_TARGET_BYTES

    log = c.connect()
    while not c.stopping():
        try:
            c.call("exp_compact",
                   lambda: len(log.maintenance.compact([EXP], target_bytes=MIN_TARGET_BYTES)),  # noqa: B023
                   lambda n: {"compacted": n})  # fmt: skip
        except ArrowLogError as e:
            if not e.retriable:
                log = c.connect()
        c.pause(0.3, 1.5)


def vacuum(c: Client) -> None:
    """Retention (the topic's ``retention_ms``) and removal of what compaction and
    deletion left behind."""
    log = c.connect()
    while not c.stopping():
        try:
            c.call(
                "exp_vacuum",
                lambda: len(log.maintenance.vacuum([EXP])),  # noqa: B023
                lambda n: {"removed": n},
            )
        except ArrowLogError as e:
            if not e.retriable:
                log = c.connect()
        c.pause(0.3, 1.5)


def exporter(c: Client) -> None:
    """Export ``exp`` to the table of ``--kind`` over and over, racing its twin."""
    kind, tables = c.args.kind, Path(c.args.tables)
    log = c.connect()
    inst = new_instance()
    while not c.stopping():
        try:
            c.call("export", lambda: export_once(kind, log, tables),  # noqa: B023
                   lambda r: r, inst=inst, kind=kind)  # fmt: skip
        except ArrowLogError as e:
            if not e.retriable:
                log = c.connect()
        c.pause(0.0, 0.3)


def export_once(kind: str, log: arrowlog.ArrowLog, tables: Path) -> dict[str, int]:
    """One export run of ``exp`` into the table of ``kind`` under ``tables``: the
    rows it exported and the commits it tried (more than one: it lost a race)."""
    if kind == "iceberg":
        from arrowlog.jobs.export_iceberg import CatalogConfig
        from arrowlog.jobs.export_iceberg import export as to_iceberg

        catalog = CatalogConfig.sqlite(str(tables / ICEBERG_DIR))
        done = to_iceberg(log, EXP, ICEBERG_TABLE, catalog=catalog, **RESUME)
        return {"rows": done.rows, "attempts": done.attempts}
    from arrowlog.jobs.export_delta import run_export as to_delta

    run = to_delta(log, EXP, str(tables / DELTA_DIR), **RESUME)
    return {"rows": run.rows, "attempts": run.attempts}


def read_tables(tables: Path) -> dict[str, list[str]]:
    """The record ids each table holds (empty: never created)."""
    out: dict[str, list[str]] = {}
    from arrowlog.jobs.export_delta import read_delta
    from arrowlog.jobs.export_iceberg import CatalogConfig, read_iceberg

    delta = tables / DELTA_DIR
    out["delta"] = _rids(read_delta(str(delta))) if delta.exists() else []
    try:
        iceberg = read_iceberg(CatalogConfig.sqlite(str(tables / ICEBERG_DIR)), ICEBERG_TABLE)
        out["iceberg"] = _rids(iceberg)
    except Exception:  # noqa: BLE001 - the table was never created
        out["iceberg"] = []
    return out


def _rids(table: pa.Table) -> list[str]:
    return [str(rid) for rid in table.column("rid").to_pylist()]


# --- the parent's part -----------------------------------------------------------------


def recreate(log: arrowlog.ArrowLog, history: History) -> None:
    """Delete ``exp`` and create it again (waiting out ``metadata_max_age_ms``)."""
    op = history.invoke("exp_recreate")
    try:
        log.delete_topic(EXP)
        create_topic(log)
    except ArrowLogError as e:
        op.fail(e)
        return
    op.ok(incarnation=log.topic(EXP, refresh=True).incarnation)


def final_export(log: arrowlog.ArrowLog, tables: Path, history: History) -> list[str]:
    """Export each kind without faults until nothing is new; the errors met."""
    errors = []
    for kind in EXPORT_KINDS:
        for _ in range(10):
            op = history.invoke("export", inst="parent", kind=kind, final=True)
            try:
                rows = export_once(kind, log, tables)["rows"]
            except ArrowLogError as e:
                op.fail(e)
                if not e.retriable:
                    errors.append(f"{kind}: {type(e).__name__}: {e}")
                    break
                time.sleep(0.2)
                continue
            op.ok(rows=rows)
            if rows == 0:
                break
    return errors


def final_read(log: arrowlog.ArrowLog) -> dict[str, Any]:
    """The record ids a read_committed consumer sees in ``exp`` at the end."""
    consumer = log.consumer()
    committed: list[str] = []
    for q in range(EXP_PARTITIONS):
        committed += _rids(consumer.read(EXP, q))
    return {"committed": committed, "log_start": log.start_offsets(EXP)}


# --- the checker -----------------------------------------------------------------------


def check_exports(
    events: Iterable[Mapping[str, Any]],
    final: Mapping[str, Any],
    tables: Mapping[str, list[str]],
    report: Report,
) -> None:
    """Add the export anomalies and counts to ``report`` (see the module doc)."""
    ops, _ = pair(dict(e) for e in events)
    txns = _transactions(ops)
    plain = {rid for op in ops if op.f == "exp_append" for rid in op.args["rids"]}
    for error in final.get("export_errors", []):
        report.add("export_final_error", error)
    at_end = set(final.get("committed", []))
    counts = report.counts
    counts["exp_txn_committed"] = sum(t.outcome == "committed" for t in txns.values())
    counts["exp_txn_aborted"] = sum(t.never_visible for t in txns.values())
    counts["exp_at_end"] = len(at_end)
    exports = [op for op in ops if op.f == "export" and op.inst != "parent"]
    counts["exports_ok"] = sum(op.ok for op in exports)
    counts["exports_rows"] = sum(int(op.result.get("rows", 0)) for op in exports if op.ok)
    counts["exports_lost_race"] = sum(
        int(op.result.get("attempts", 1)) - 1 for op in exports if op.ok
    ) + sum(op.error == "ExportConflictError" for op in exports)
    counts["exp_recreated"] = sum(op.ok for op in ops if op.f == "exp_recreate")
    counts["exp_compacted"] = sum(
        int(op.result.get("compacted", 0)) for op in ops if op.f == "exp_compact" and op.ok
    )
    counts["exp_removed"] = sum(
        int(op.result.get("removed", 0)) for op in ops if op.f == "exp_vacuum" and op.ok
    )
    counts["exp_deleted_at_end"] = sum(int(o) for o in final.get("log_start", {}).values())
    for kind, rids in sorted(tables.items()):
        counts[f"{kind}_rows"] = len(rids)
        for rid, n in collections.Counter(rids).items():
            if n > 1:
                report.add("export_duplicate", f"{kind}: {rid} {n} times")
        for rid in set(rids):
            if rid in plain:
                continue
            tag = rid.split("|", 1)[0]
            txn = txns.get(tag)
            if txn is None or txn.never_visible:
                outcome = "unknown to every history" if txn is None else txn.outcome
                report.add("export_aborted", f"{kind}: {rid} ({outcome})")
        missing = sorted(at_end - set(rids))
        if missing:
            report.add("export_missing", f"{kind}: {len(missing)} records, e.g. {missing[:5]}")


def _transactions(ops: list[Operation]) -> dict[str, Txn]:
    txns: dict[str, Txn] = {}
    for op in ops:
        tag = op.args.get("tag")
        if tag is None or not op.f.startswith("exp_"):
            continue
        txn = txns.setdefault(tag, Txn(tag, tid_of(tag), op.inst or "?"))
        if op.f == "exp_send":
            txn.sends.append(op)
        elif op.f == "exp_commit":
            txn.commits.append(op)
        elif op.f == "exp_abort":
            txn.aborts.append(op)
    return txns
