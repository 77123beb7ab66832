"""Helpers of the cleanup schedules: time spans, topics with windows of 2 segments,
what read_committed sees, the coordinator entries of a transactional id, and
producers that initialise or commit one record."""

from __future__ import annotations

from typing import Any

import arrowlog
from arrowlog import TopicConfig
from arrowlog.txn.coordinator import COORDINATOR_PREFIX
from tests.support.schedules import FAST, SCHEMA, rows

MIN = 60_000
HOUR = 60 * MIN
DAY = 24 * HOUR
#: past the default retain_ms (7 days) and its grain
WEEK_AND_A_DAY = 8 * DAY


def connect(store: Any) -> arrowlog.ArrowLog:
    return arrowlog.connect(store, config=FAST)


def make_topic(store: Any, name: str = "t", partitions: int = 1) -> arrowlog.ArrowLog:
    log = connect(store)
    log.create_topic(name, SCHEMA, partitions=partitions, config=TopicConfig(checkpoint_interval=2))
    return log


def committed_values(log: arrowlog.ArrowLog, topic: str = "t", partition: int = 0) -> list[int]:
    col = log.consumer(isolation_level="read_committed").read(topic, partition)
    return [v for v in col.column("v").to_pylist() if isinstance(v, int)]


def keys(store: Any, prefix: str) -> set[str]:
    return {i.key for i in store.list(prefix)}


def entry_numbers(store: Any, tid: str) -> list[int]:
    from arrowlog.txn.coordinator import parse_entry_key

    found = [parse_entry_key(k) for k in keys(store, f"{COORDINATOR_PREFIX}{tid}/")]
    return sorted(n for n in found if n is not None)


def reinit(store: Any, tid: str, times: int) -> arrowlog.Producer:
    """``times`` new instances of ``tid`` initialise one after another (each
    writes one fencing entry); the last is returned."""
    p = None
    for _ in range(times):
        p = connect(store).producer(transactional_id=tid)
        p.init_transactions()
    assert p is not None
    return p


def commit_one(p: arrowlog.Producer, value: int, topic: str = "t", partition: int = 0) -> None:
    p.begin_transaction()
    p.send(topic, rows(value), partition=partition)
    p.commit_transaction()
    p.flush()
