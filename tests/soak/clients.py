"""The soak's client processes: ``python -m tests.soak.clients ROLE ...``.

Each process opens its own store from a URL, wraps it in its faults
(:mod:`tests.soak.chaos`), and writes what it is told to its own history
(:mod:`tests.soak.history`). Errors a user would handle are handled the way a
user would (abort, or start a new instance on a new connection) and logged as
outcomes; any other exception is logged as ``untyped_error`` and ends the
process with exit code 3.

Roles:

- ``producer``: an idempotent producer appending to ``in``; after an unknown
  outcome it flushes, which settles the batch.
- ``crowd``: an idempotent producer as ``producer``, one of
  :data:`~tests.soak.model.CROWD` that all append to partition 0 of ``in``
  with staged appends (a batch that loses the race for the end is staged and
  committed by whichever of them wins).
- ``copier``: consume-transform-produce of input partition ``i`` (transactional
  id ``copy.i``) into a random subset of the ``out`` partitions, with the input
  offset committed in the transaction; sometimes aborts on purpose. Twins
  (``--max-txns``) share the id with the main copier: their inits race it.
- ``job``: a writer begins a transaction and sends; a driver resumes it in
  another instance (``resume_transaction``) and commits; then the writer, a
  straggler, sometimes sends once more.
- ``expirer``: ``expire_transactions`` in a loop, with its clock skewed.
- ``reader``: LSO, ``committed()``, one ``read_many`` over every ``out``
  partition, ``committed()`` and LSO again, over and over.
- ``feeder``, ``compactor``, ``vacuum``, ``exporter``: the topic ``exp`` and its
  exports to Delta and Iceberg (:mod:`tests.soak.exports`).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import os
import random
import sys
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa

import arrowlog
from arrowlog import LogConfig, ProducerState, RetryPolicy
from arrowlog.errors import AppendOutcomeUnknownError, ArrowLogError
from arrowlog.format.checkpoint import PartitionState
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.txn.groups import GroupOffsets
from arrowlog.txn.resolver import Outcome, Snapshot
from arrowlog.txn.view import incarnation_of
from tests.soak import chaos, exports, spark_writer
from tests.soak.chaos import (
    COORDINATOR,
    GROUPS,
    SEGMENTS_IN,
    SEGMENTS_OUT,
    STAGED_IN,
    Chaos,
    KillPoint,
)
from tests.soak.history import History, new_instance, now
from tests.soak.model import (
    GROUP,
    IN,
    IN_PARTITIONS,
    IN_SCHEMA,
    JOB_TID,
    OUT,
    OUT_PARTITIONS,
    OUT_SCHEMA,
    TXN_TIMEOUT_MS,
    in_rid,
    out_rid,
    tp,
    txn_tag,
)

T = TypeVar("T")

#: Short deadlines: faults must turn into unknown outcomes and retriable errors
#: within a soak of seconds, not minutes.
#: A topic is trusted for 3 s, so that the parent re-creates ``exp`` within a
#: short soak (every client of a bucket must share the value).
CLIENT_CONFIG = LogConfig(
    retry=RetryPolicy(initial_backoff=0.005, max_backoff=0.1, deadline=1.5),
    metadata_max_age_ms=3_000,
)

PROFILES = {
    "producer": chaos.Profile(
        lose_ack=0.03, fail_before=0.02, slowdown=0.03, late=(SEGMENTS_IN,),
        hold=(("put_if_absent", SEGMENTS_IN), ("list", "in/*")),
        hide=(SEGMENTS_IN,), throttle=(SEGMENTS_IN,),
    ),
    "crowd": chaos.Profile(
        lose_ack=0.03, fail_before=0.02, slowdown=0.03, late=(SEGMENTS_IN, STAGED_IN),
        hold=(("put_if_absent", SEGMENTS_IN), ("put_if_absent", STAGED_IN), ("list", "in/*")),
        hide=(SEGMENTS_IN, STAGED_IN), throttle=(SEGMENTS_IN, STAGED_IN),
    ),
    "copier": chaos.Profile(
        lose_ack=0.02, fail_before=0.02, slowdown=0.03, late=(SEGMENTS_OUT, COORDINATOR, GROUPS),
        hold=(("put_if_absent", COORDINATOR), ("put_if_absent", SEGMENTS_OUT),
              ("put_if_absent", GROUPS), ("list", "out/*"), ("list", "_arrowlog/coordinator/*")),
        hide=(SEGMENTS_OUT, SEGMENTS_IN), throttle=(SEGMENTS_OUT, COORDINATOR),
    ),
    "job": chaos.Profile(
        lose_ack=0.02, fail_before=0.02, slowdown=0.03, late=(SEGMENTS_OUT, COORDINATOR),
        hold=(("put_if_absent", COORDINATOR), ("put_if_absent", SEGMENTS_OUT)),
        hide=(SEGMENTS_OUT,), throttle=(SEGMENTS_OUT,),
    ),
    "expirer": chaos.Profile(
        lose_ack=0.02, fail_before=0.02, slowdown=0.03, late=(COORDINATOR, SEGMENTS_OUT),
        hold=(("put_if_absent", COORDINATOR),),
    ),
    "reader": chaos.Profile(
        fail_before=0.01, slowdown=0.03,
        hold=(("list", "out/*"), ("get", COORDINATOR), ("list", "_arrowlog/groups/*")),
        hide=(SEGMENTS_OUT,), every=(0.5, 2.0), weights=(0, 3, 1, 0),
    ),
    "spark": chaos.Profile(),  # its faults are kills: the JVM does not use this store
    **exports.PROFILES,
}  # fmt: skip

#: Where a role may be SIGKILLed by its own store (pattern of the n-th write).
KILL_PATTERNS = {
    "producer": (SEGMENTS_IN, "_arrowlog/producer-ids/*"),
    "crowd": (SEGMENTS_IN, STAGED_IN),
    "copier": (COORDINATOR, SEGMENTS_OUT, GROUPS),
    "job": (COORDINATOR, SEGMENTS_OUT),
    "expirer": (COORDINATOR, SEGMENTS_OUT),
    "reader": (),
    "spark": spark_writer.STEPS,  # steps, not keys: see tests.soak.spark_writer.plan
    **exports.KILL_PATTERNS,
}
#: roles that say READY themselves, once they are up (a Spark session takes seconds)
LATE_READY = frozenset({"spark"})


@dataclass
class Client:
    args: argparse.Namespace
    history: History
    store: Store
    rng: random.Random

    def stopping(self) -> bool:
        return os.path.exists(self.args.stop_file)

    def ready(self) -> None:
        """Tell the parent this client is up: its kill timer starts now. Every
        client shares the zygote's stdout: one write() of one line, as print()
        under PYTHONUNBUFFERED=1 writes the text and its newline separately and
        two clients' lines interleave ("READY 1READY 2")."""
        os.write(1, f"READY {os.getpid()}\n".encode())

    def connect(self, *, staged: bool = False) -> arrowlog.ArrowLog:
        config = dataclasses.replace(CLIENT_CONFIG, staged_appends=staged)
        return arrowlog.connect(self.store, config=config)

    def pause(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))

    def call(
        self,
        f: str,
        fn: Callable[[], T],
        result: Callable[[T], dict[str, Any]] | None = None,
        **args: Any,
    ) -> T:
        """Run one operation, logging its invocation and its outcome."""
        op = self.history.invoke(f, **args)
        try:
            value = fn()
        except Exception as e:
            op.fail(e)
            raise
        op.ok(**(result(value) if result is not None else {}))
        return value


# --- the idempotent producer ---------------------------------------------------------


def producer(c: Client, *, crowd: bool = False) -> None:
    while not c.stopping():
        inst = new_instance()
        log = c.connect(staged=crowd)
        p = log.producer()
        c.history.event("producer", inst=inst)
        n = 0
        healthy = True
        while healthy and not c.stopping():
            partition = 0 if crowd else c.rng.randrange(IN_PARTITIONS)
            rids = [in_rid(inst, n + j) for j in range(c.rng.randint(1, 5))]
            n += len(rids)
            batch = pa.record_batch({"rid": rids}, schema=IN_SCHEMA)
            try:
                c.call("append", lambda: p.send(IN, batch, partition=partition),  # noqa: B023
                       lambda r: {"base": r.base_offset, "count": r.record_count},
                       inst=inst, topic=IN, partition=partition, rids=rids)  # fmt: skip
            except AppendOutcomeUnknownError:
                healthy = _settle(c, p, inst, rids)
            except ArrowLogError as e:
                healthy = e.retriable
            c.pause(0.005, 0.06)


def _settle(c: Client, p: arrowlog.Producer, inst: str, rids: list[str]) -> bool:
    """After an unknown outcome, flush until the batch is settled (then it is in
    the log exactly once); give up the producer if that keeps failing."""
    for _ in range(5):
        try:
            c.call("flush", p.flush, inst=inst, rids=rids)
            return True
        except ArrowLogError as e:
            if not e.retriable:
                return False
            c.pause(0.05, 0.3)
    return False


# --- the transactional copier --------------------------------------------------------


def copier(c: Client) -> None:
    tid = c.args.tid
    source = int(tid.rsplit(".", 1)[1])
    budget = c.args.max_txns or 10**9
    while not c.stopping() and budget > 0:
        log = c.connect()
        inst = new_instance()
        p = log.producer(transactional_id=tid, transaction_timeout_ms=TXN_TIMEOUT_MS)
        try:
            _init(c, p, inst)
        except ArrowLogError:
            c.pause(0.05, 0.3)
            continue
        consumer = log.consumer(group_id=GROUP)
        k = 0
        while not c.stopping() and budget > 0:
            try:
                position = consumer.committed(IN, source) or 0
                end = consumer.end_offset(IN, source)
                if position >= end:
                    c.pause(0.02, 0.1)
                    continue
                upto = min(position + c.rng.randint(1, 8), end)
                table = consumer.read(IN, source, position, upto)
                srcs = [str(rid) for rid in table.column("rid").to_pylist()]
            except ArrowLogError as e:
                c.history.event(
                    "input_error", inst=inst, error=type(e).__name__, message=str(e)[:300]
                )
                if not e.retriable:
                    break  # a new connection
                c.pause(0.02, 0.2)
                continue
            tag = txn_tag(tid, inst, k)
            k += 1
            budget -= 1
            if not _copy(c, p, inst, tag, source, upto, srcs):
                break
            c.pause(0.0, 0.03)


def _init(c: Client, p: arrowlog.Producer, inst: str) -> None:
    c.call("init", p.init_transactions,
           lambda _: {"producer_id": p.producer_id, "epoch": p.epoch},
           inst=inst, tid=p.transactional_id)  # fmt: skip


def _spread(c: Client, count: int) -> dict[int, list[int]]:
    """Record indexes by output partition: a random subset, round robin."""
    chosen = sorted(c.rng.sample(range(OUT_PARTITIONS), c.rng.randint(1, OUT_PARTITIONS)))
    chosen = chosen[:count]
    spread: dict[int, list[int]] = {q: [] for q in chosen}
    for j in range(count):
        spread[chosen[j % len(chosen)]].append(j)
    return spread


def _copy(
    c: Client,
    p: arrowlog.Producer,
    inst: str,
    tag: str,
    source: int,
    upto: int,
    srcs: list[str],
) -> bool:
    """One transaction; False when the instance cannot go on."""
    spread = _spread(c, len(srcs))
    parts = {q: len(js) for q, js in spread.items()}
    actions: list[tuple[str, int, list[int]]] = []
    for q, js in spread.items():
        cut = c.rng.randint(1, len(js) - 1) if len(js) > 1 and c.rng.random() < 0.5 else len(js)
        actions += [("send", q, js[:cut])] + ([("send", q, js[cut:])] if cut < len(js) else [])
    c.rng.shuffle(actions)
    actions.insert(c.rng.randint(0, len(actions)), ("offsets", source, []))
    if c.rng.random() < 0.3:
        actions.insert(0, ("add", -1, []))
    common: dict[str, Any] = {"inst": inst, "tid": p.transactional_id, "tag": tag}
    try:
        c.call("begin", p.begin_transaction, epoch=p.epoch, producer_id=p.producer_id, **common)
        for action, q, js in actions:
            if action == "add":
                c.call("add_partitions", lambda: p.add_partitions([(OUT, q) for q in parts]),
                       partitions=sorted(parts), **common)  # fmt: skip
            elif action == "offsets":
                c.call("send_offsets",
                       lambda: p.send_offsets_to_transaction({(IN, source): upto}, GROUP),
                       group=GROUP, offsets={tp(IN, source): upto}, **common)  # fmt: skip
            else:
                rids = [out_rid(tag, parts, q, spread[q].index(j)) for j in js]
                batch = pa.record_batch(
                    {"rid": rids, "src": [srcs[j] for j in js]}, schema=OUT_SCHEMA
                )
                c.call("send", lambda: p.send(OUT, batch, partition=q),  # noqa: B023
                       lambda r: {"base": r.base_offset, "count": r.record_count},
                       topic=OUT, partition=q, rids=rids, **common)  # fmt: skip
        _end(c, p, commit=c.rng.random() >= 0.08, **common)
    except ArrowLogError as e:
        # Abort if possible; after anything but a retriable error, a user starts
        # over with a new instance on a new connection.
        return _recover(c, p, **common) and e.retriable
    return p.state is ProducerState.READY


def _end(c: Client, p: arrowlog.Producer, *, commit: bool, **common: Any) -> None:
    epoch = p.epoch
    c.call("commit" if commit else "abort",
           p.commit_transaction if commit else p.abort_transaction,
           lambda _: {"epoch_after": p.epoch, "state_after": p.state.value},
           epoch=epoch, **common)  # fmt: skip


def _recover(c: Client, p: arrowlog.Producer, **common: Any) -> bool:
    """A user's answer to an error inside a transaction: abort it if the producer
    still can; any failure there means a new instance."""
    if p.state in (ProducerState.IN_TRANSACTION, ProducerState.ABORTABLE_ERROR):
        try:
            _end(c, p, commit=False, **common)
        except ArrowLogError:
            return False
    return p.state is ProducerState.READY


# --- the job: a transaction resumed and committed by another instance --------------


def job(c: Client) -> None:
    while not c.stopping():
        writer_log, driver_log = c.connect(), c.connect()
        inst = new_instance()
        w = writer_log.producer(transactional_id=JOB_TID, transaction_timeout_ms=TXN_TIMEOUT_MS)
        tag = txn_tag(JOB_TID, inst, 0)
        common: dict[str, Any] = {"inst": inst, "tid": JOB_TID, "tag": tag}
        try:
            _init(c, w, inst)
            spread = _spread(c, c.rng.randint(1, 6))
            parts = {q: len(js) for q, js in spread.items()}
            c.call("begin", w.begin_transaction, epoch=w.epoch, producer_id=w.producer_id, **common)
            # a transaction another instance resumes registers its partitions
            c.call("add_partitions", lambda: w.add_partitions((OUT, q) for q in spread),  # noqa: B023
                   **common)  # fmt: skip
            for q, js in spread.items():
                rids = [out_rid(tag, parts, q, i) for i in range(len(js))]
                _send(c, w, q, rids, **common)
        except ArrowLogError:
            _recover(c, w, **common)
            c.pause(0.05, 0.3)
            continue
        driver = new_instance()
        d = driver_log.producer(transactional_id=JOB_TID, transaction_timeout_ms=TXN_TIMEOUT_MS)
        dcommon = {**common, "inst": driver}
        epoch = w.epoch
        try:
            c.call("resume", lambda: d.resume_transaction(epoch),  # noqa: B023
                   lambda _: {"producer_id": d.producer_id, "epoch": d.epoch},  # noqa: B023
                   epoch=epoch, **dcommon)  # fmt: skip
            _end(c, d, commit=True, **dcommon)
        except ArrowLogError:
            _recover(c, w, **common)
            c.pause(0.05, 0.3)
            continue
        if c.rng.random() < 0.5:  # a straggler task writes once more, after the commit
            q = c.rng.choice(sorted(parts))
            extra = [out_rid(tag, parts, q, i, extra=True) for i in range(c.rng.randint(1, 2))]
            with contextlib.suppress(ArrowLogError):
                _send(c, w, q, extra, extra=True, **common)
        c.pause(0.05, 0.4)


def _send(c: Client, p: arrowlog.Producer, q: int, rids: list[str], **common: Any) -> None:
    batch = pa.record_batch({"rid": rids, "src": [""] * len(rids)}, schema=OUT_SCHEMA)
    c.call("send", lambda: p.send(OUT, batch, partition=q),
           lambda r: {"base": r.base_offset, "count": r.record_count},
           topic=OUT, partition=q, rids=rids, **common)  # fmt: skip


# --- the expirer ---------------------------------------------------------------------


def expirer(c: Client) -> None:
    inst = new_instance()
    log = c.connect()
    while not c.stopping():
        try:
            c.call("expire", lambda: log.admin.expire_transactions(),  # noqa: B023
                   lambda infos: {"expired": [_info(i) for i in infos]},
                   inst=inst, skew=c.args.clock_skew)  # fmt: skip
        except ArrowLogError as e:
            if not e.retriable:
                log = c.connect()
        c.pause(0.3, 1.5)


def _info(info: arrowlog.TransactionInfo) -> dict[str, Any]:
    return {"tid": info.transactional_id, "producer_id": info.producer_id,
            "producer_epoch": info.producer_epoch, "state": info.state.value,
            "txn_epoch": info.txn_epoch, "txn_started_ms": info.txn_started_ms,
            "timeout_ms": info.timeout_ms}  # fmt: skip


# --- the reader ----------------------------------------------------------------------


def reader(c: Client) -> None:
    inst = new_instance()
    log = c.connect()
    views: Views | None = None
    start: dict[str, int] | None = None
    while not c.stopping():
        op = c.history.invoke("observe", inst=inst, start=start)
        try:
            views = views or Views(log)
            result = _observe(log, views, start)
        except ArrowLogError as e:
            op.fail(e)
            if not e.retriable:
                log, views = c.connect(), None  # a user reconnects; its position stays
            c.pause(0.02, 0.2)
            continue
        op.ok(**result)
        # from the LSO seen before this read (reads overlap), or from where the
        # read ended if its snapshot ended lower (it cuts before a transaction it
        # could only show in part): never past what it returned
        start = {k: min(v, result["ends"][k]) for k, v in result["lso_before"].items()}
        c.pause(0.0, 0.1)


class Views:
    """Records, without changing anything, what one ``read_many`` decided on:
    the view of each partition its plan used (high watermark, transactions
    open in it) and the answer of its decision snapshot for each transaction.
    The checker uses them to tell why a read left records out."""

    def __init__(self, log: arrowlog.ArrowLog) -> None:
        self.views: dict[str, Any] | None = None
        self.decisions: dict[str, str] | None = None
        for q in range(OUT_PARTITIONS):
            part = log.partition(OUT, q)
            part.state = self._recording_state(tp(OUT, q), part.state)  # type: ignore[method-assign]
        snapshot = log.resolver.snapshot

        def recording_snapshot() -> Snapshot:
            snap = snapshot()
            record = self.decisions
            if record is None:
                return snap
            real = snap.outcome

            def recording(transactional_id: str, txn_epoch: int) -> Outcome:
                found = real(transactional_id, txn_epoch)
                record[f"{transactional_id}/{txn_epoch}"] = found.decision.value
                return found

            snap.outcome = recording  # type: ignore[method-assign]
            return snap

        log.resolver.snapshot = recording_snapshot  # type: ignore[method-assign]

    def _recording_state(
        self, key: str, state: Callable[..., tuple[int, PartitionState]]
    ) -> Callable[..., tuple[int, PartitionState]]:
        def recording(*args: Any, **kwargs: Any) -> tuple[int, PartitionState]:
            hw, st = state(*args, **kwargs)
            # the last view of a read is the one its plan used (read_many fixes
            # views twice: see arrowlog.read.visibility.plan_snapshot)
            if self.views is not None:
                self.views[key] = {
                    "hw": hw,
                    "open": [[t.transactional_id, t.producer_id, t.producer_epoch, t.first_offset]
                             for t in st.open_txns.values()],
                }  # fmt: skip
            return hw, st

        return recording

    def read_many(self, consumer: arrowlog.Consumer, ranges: Any) -> dict[str, Any]:
        self.views, self.decisions = {}, {}
        try:
            read = consumer.read_snapshot(ranges)
            return {
                "rids": {
                    tp(t, q): table.column("rid").to_pylist()
                    for (t, q), table in read.tables.items()
                },
                "ends": {tp(t, q): end for (t, q), end in read.ends.items()},
                "views": self.views,
                "decisions": self.decisions,
            }
        finally:
            self.views = self.decisions = None


def _observe(log: arrowlog.ArrowLog, views: Views, start: dict[str, int] | None) -> dict[str, Any]:
    """LSO, committed offsets, one atomic read of every ``out`` partition from
    ``start`` (the LSO before the previous read) to the LSO, committed offsets
    and LSO again; each step with its times."""
    consumer = log.consumer(group_id=GROUP)
    out: dict[str, Any] = {}

    def timed(name: str, fn: Callable[[], Any]) -> Any:
        t0 = now()
        value = fn()
        out[name] = value
        out[f"{name}_t"] = [t0, now()]
        return value

    def lso() -> dict[str, int]:
        return {tp(OUT, q): consumer.stable_offset(OUT, q) for q in range(OUT_PARTITIONS)}

    def committed() -> dict[str, int | None]:
        # With an undecided transaction pending, committed() raises for its
        # partitions; the position with every decided transaction applied is
        # still a lower bound, which is all the checker needs.
        groups = GroupOffsets(log.store, GROUP, log.config.retry)
        position, _ = groups.position(log.resolver, incarnation_of(log))
        return {tp(IN, i): position.get((IN, i)) for i in range(IN_PARTITIONS)}

    before = timed("lso_before", lso)
    frm = start if start is not None else before
    out["start"] = frm
    timed("c1", committed)
    ranges = {(OUT, q): (frm[tp(OUT, q)], None) for q in range(OUT_PARTITIONS)}
    out.update(timed("read", lambda: views.read_many(consumer, ranges)))
    del out["read"]
    timed("c2", committed)
    timed("lso_after", lso)
    return out


# --- the process ---------------------------------------------------------------------

ROLES: dict[str, Callable[[Client], None]] = {
    "producer": producer, "crowd": functools.partial(producer, crowd=True),
    "copier": copier, "job": job, "expirer": expirer, "reader": reader,
    "feeder": exports.feeder, "compactor": exports.compactor, "vacuum": exports.vacuum,
    "exporter": exports.exporter, "spark": spark_writer.spark_writer,
}  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=sorted(ROLES))
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--history", required=True, help="directory of history files")
    parser.add_argument("--slot", required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--stop-file", required=True)
    parser.add_argument("--tid")
    parser.add_argument("--max-txns", type=int, default=0)
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--clock-skew", type=float, default=0.0, help="seconds added to time.time")
    parser.add_argument("--kind", choices=exports.EXPORT_KINDS, help="an exporter's table")
    parser.add_argument("--tables", help="the directory of the exported tables")
    parser.add_argument("--die-at", help="PATTERN:N:before|after (see chaos.KillPoint)")
    parser.add_argument("--no-faults", action="store_true")
    args = parser.parse_args(argv)

    path = Path(args.history) / f"{args.slot}-{os.getpid()}-{uuid.uuid4().hex[:6]}.jsonl"
    history = History(path, slot=args.slot, role=args.role)
    if args.clock_skew:
        real = time.time
        skew = args.clock_skew
        time.time = lambda: real() + skew  # every library call now reads the skewed clock
    history.event("start", seed=args.seed, die_at=args.die_at, skew=args.clock_skew, tid=args.tid)
    profile = chaos.Profile() if args.no_faults else PROFILES[args.role]
    # the Spark writer's kill points are steps its JVM and planner take
    kill = KillPoint.parse(args.die_at) if args.die_at and args.role != "spark" else None
    faults = Chaos(
        open_store(args.url, json.loads(args.options)), profile, args.seed, history, kill
    )
    faults.start()
    client = Client(args, history, faults.store, random.Random(args.seed))
    if args.role not in LATE_READY:
        client.ready()
    delay = args.start_at - now()
    if delay > 0:
        time.sleep(delay)  # twins start together, so that their inits race
    try:
        ROLES[args.role](client)
    except Exception as e:  # noqa: BLE001 - reported, then the exit code
        # An ArrowLogError here is one the client failed to handle (a bug of the
        # soak's); anything else is outside arrowlog's error hierarchy.
        kind = "client_bug" if isinstance(e, ArrowLogError) else "untyped_error"
        history.event(kind, error=type(e).__name__, message=str(e)[:500],
                      traceback=traceback.format_exc()[-4000:])  # fmt: skip
        faults.stop()
        sys.exit(3)
    faults.stop()
    history.event("done")


if __name__ == "__main__":
    main()
