"""``arrowlog transactions`` (kafka-transactions), ``arrowlog producers`` and
``arrowlog metrics``."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import click

import arrowlog
from arrowlog.admin import TransactionInfo
from arrowlog.cli._common import partitions_option
from arrowlog.cli.console import iso
from arrowlog.jobs.commandline import Session, leaf, with_examples
from arrowlog.txn.coordinator import check_id


def human_age(ms: int | None) -> str:
    """``3d 4h``, ``12m 5s``, ``840ms``: an age a person reads at a glance."""
    if ms is None:
        return "-"
    if ms < 1000:
        return f"{max(ms, 0)}ms"
    seconds = ms // 1000
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


def _now_ms() -> int:
    # Ages are for display only; deciding expiry uses the store's clock alone
    # (`transactions expire`).
    return int(time.time() * 1000)


@click.group("transactions")
@with_examples(
    "arrowlog transactions list",
    "arrowlog transactions find-hanging",
    "arrowlog transactions abort etl.events.0",
)
def transactions() -> None:
    """Transactional ids: list, describe, abort, find hanging ones, expire."""


def _txn_row(info: TransactionInfo, now: int) -> dict[str, Any]:
    return {
        "transactional_id": info.transactional_id,
        "producer_id": info.producer_id,
        "producer_epoch": info.producer_epoch,
        "state": info.state.value,
        "partitions": [f"{t}/{p}" for t, p in info.partitions],
        "started": iso(info.txn_started_ms) if info.txn_started_ms else None,
        "age": human_age(now - info.txn_started_ms)
        if info.txn_started_ms and not info.state.is_complete
        else None,
        "timeout": human_age(info.timeout_ms),
    }


@transactions.command("list")
@leaf(read_only=True)
@with_examples("arrowlog transactions list", "arrowlog transactions list --output json")
def list_(session: Session) -> None:
    """Every transactional id with the state of its current or last transaction."""
    now = _now_ms()
    session.table([_txn_row(t, now) for t in session.connect().admin.list_transactions()])


@transactions.command("describe")
@click.argument("transactional_id")
@leaf(read_only=True)
@with_examples("arrowlog transactions describe etl.events.0")
def describe(session: Session, transactional_id: str) -> None:
    """The latest coordinator entry of TRANSACTIONAL_ID."""
    entry = session.connect().admin.describe_transaction(
        check_id("transactional id", transactional_id)
    )
    if session.output == "json":
        session.json(entry)
    else:
        session.table([{"field": k, "value": v} for k, v in _described(entry, _now_ms()).items()])


def _described(entry: dict[str, Any], now: int) -> dict[str, Any]:
    """A coordinator entry as kafka-transactions describe shows one: its state,
    producer, partitions and offsets, times as UTC dates and ages (the raw
    entry is ``--output json``'s)."""
    started = entry.get("txn_started_ms")
    written = entry.get("written_ms")
    state = str(entry.get("state", ""))
    ongoing = state in ("ONGOING", "PREPARE_COMMIT", "PREPARE_ABORT")
    out: dict[str, Any] = {
        "transactional_id": entry.get("transactional_id"),
        "state": state,
        "producer_id": entry.get("producer_id"),
        "producer_epoch": entry.get("producer_epoch"),
        "timeout": human_age(int(entry["timeout_ms"])) if "timeout_ms" in entry else None,
        "started": iso(int(started)) if started else None,
        "age" if ongoing else "lasted": (
            human_age(now - int(started))
            if ongoing and started
            else human_age(int(written) - int(started))
            if started and written
            else None
        ),
        "last_written": iso(int(written)) if written else None,
        "partitions": ", ".join(f"{t}/{p}" for t, p in entry.get("partitions") or []) or None,
        "group_offsets": json.dumps(entry["offsets"]) if entry.get("offsets") else None,
        "reason": entry.get("reason"),
    }
    return {k: v for k, v in out.items() if v is not None}


@transactions.command("abort")
@click.argument("transactional_id")
@leaf(read_only=False)
@with_examples("arrowlog transactions abort etl.events.0")
def abort(session: Session, transactional_id: str) -> None:
    """Fence TRANSACTIONAL_ID's live producer and finish its transaction now.

    An ongoing transaction is aborted; a prepared one is carried through. An
    unknown id is an error and creates nothing.
    """
    info = session.connect().admin.abort_transaction(check_id("transactional id", transactional_id))
    session.table([_txn_row(info, _now_ms())])


@transactions.command("expire")
@leaf(read_only=False)
@with_examples("arrowlog transactions expire")
def expire(session: Session) -> None:
    """Abort (or finish) every transaction older than its timeout, timed on the
    store's clock."""
    now = _now_ms()
    done = session.connect().admin.expire_transactions()
    session.table([_txn_row(t, now) for t in done])
    session.message(f"expired {len(done)} transaction(s)")


@transactions.command("find-hanging")
@click.option("--topic", "topics", multiple=True, help="Only these topics (repeatable).")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every open transaction, not only those past their timeout.",
)
@leaf(read_only=True)
@with_examples(
    "arrowlog transactions find-hanging", "arrowlog transactions find-hanging --topic events --all"
)
def find_hanging(session: Session, topics: tuple[str, ...], show_all: bool) -> None:
    """Undecided transactions holding back a partition's last stable offset
    past their timeout (with --all: every undecided one).

    Abort one with `arrowlog transactions abort ID`, or all expired ones with
    `arrowlog transactions expire`.
    """
    now = _now_ms()
    rows = []
    for t in session.connect().admin.open_transactions(list(topics) or None):
        age = None if t.started_ms is None else now - t.started_ms
        hanging = age is not None and t.timeout_ms is not None and age > t.timeout_ms
        if hanging or show_all:
            rows.append(
                {
                    "topic": t.topic,
                    "partition": t.partition,
                    "transactional_id": t.transactional_id,
                    "producer_id": t.producer_id,
                    "producer_epoch": t.producer_epoch,
                    "first_offset": t.first_offset,
                    "started": None if t.started_ms is None else iso(t.started_ms),
                    "age": human_age(age),
                    "timeout": human_age(t.timeout_ms),
                    "hanging": hanging,
                }
            )
    session.table(rows)


@click.command("producers")
@click.argument("topic")
@partitions_option
@leaf(read_only=True)
@with_examples("arrowlog producers events", "arrowlog producers events --partition 0 --output json")
def producers(session: Session, topic: str, partitions: tuple[int, ...]) -> None:
    """The producers with state in TOPIC's partitions: the latest batch of each
    (kafka-transactions describe-producers)."""
    log = session.connect()
    for p in partitions:
        log.topic(topic).check_partition(p)
    now = _now_ms()
    entries = log.admin.list_topic_producers(topic, list(partitions) or None)
    session.table(
        [
            {
                "topic": topic,
                "partition": p,
                **_without_raw_time(dataclasses.asdict(e)),
                "last_sequence": e.last_sequence,
                "last_append": iso(e.timestamp_ms),
                "age": human_age(now - e.timestamp_ms),
            }
            for p, e in entries
        ]
    )


def _without_raw_time(row: dict[str, Any]) -> dict[str, Any]:
    row.pop("timestamp_ms", None)  # shown as LAST-APPEND and AGE instead
    return row


@click.command("metrics")
@click.argument("topics", nargs=-1)
@leaf(read_only=True)
@with_examples("arrowlog metrics", "arrowlog metrics events --output json")
def metrics(session: Session, topics: tuple[str, ...]) -> None:
    """KIP-98's metrics: high watermark, LSO, live producer ids and open
    transactions per partition; the active transactional ids."""
    log: arrowlog.ArrowLog = session.connect()
    values = log.admin.metrics(list(topics) or None)
    if session.output == "json":
        session.json(values)
        return
    session.table([{"partition": k, **v} for k, v in values["partitions"].items()])
    session.message(
        "active transactional ids: " + (", ".join(values["active_transactional_ids"]) or "none")
    )
