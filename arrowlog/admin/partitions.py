"""What an operator reads of partitions: the producers with state in them,
and the metrics KIP-98 names (live producer ids, last stable offsets, open
transactions, active transactional ids)."""

from __future__ import annotations

from typing import Any

from arrowlog.admin.transactions import list_transactions
from arrowlog.format.checkpoint import Decision, ProducerEntry
from arrowlog.read.visibility import last_stable_offset
from arrowlog.txn.view import LogView


def list_producers(log: LogView, topic: str, partition: int) -> list[ProducerEntry]:
    """The producers with state in a partition: the latest batch of each."""
    _, state = log.partition(topic, partition).state()
    return sorted(state.producers.values(), key=lambda e: e.producer_id)


def metrics(log: LogView, topics: list[str] | None = None) -> dict[str, Any]:
    """KIP-98's metrics: live producer ids and LSO per partition, open
    transactions per partition, and the active transactional ids: those with
    an unfinished entry, and those with undecided records in these partitions
    (a transaction writes its first entry at PREPARE)."""
    decide = log.resolver.snapshot()
    partitions = {}
    active = {t.transactional_id for t in list_transactions(log) if not t.state.is_complete}
    for topic in topics if topics is not None else log.list_topics():
        for p in range(log.topic(topic).partitions):
            part = log.partition(topic, p)
            hw, state = part.state()
            lso = last_stable_offset(hw, state, decide, log_start=part.start_offset())
            partitions[f"{topic}/{p}"] = {
                "high_watermark": hw,
                "last_stable_offset": lso,
                "live_producer_ids": len(state.producers),
                "open_transactions": len(state.open_txns),
            }
            active.update(
                t.transactional_id
                for t in state.open_txns.values()
                if decide(t) is Decision.UNDECIDED
            )
    return {"partitions": partitions, "active_transactional_ids": sorted(active)}


def list_topic_producers(
    log: LogView, topic: str, partitions: list[int] | None = None
) -> list[tuple[int, ProducerEntry]]:
    """``(partition, entry)`` for the producers with state in each partition of
    ``topic`` (every partition by default)."""
    wanted = range(log.topic(topic).partitions) if partitions is None else partitions
    return [(p, e) for p in wanted for e in list_producers(log, topic, p)]
