"""Producer ids: each claimed once, anywhere, with put-if-absent."""

from __future__ import annotations

from arrowlog.partition.producer_ids import MAX_PRODUCER_ID, claim_producer_id
from arrowlog.txn.view import LogView

__all__ = ["MAX_PRODUCER_ID", "allocate_producer_id"]


def allocate_producer_id(log: LogView, transactional_id: str | None) -> int:
    """A producer id no other producer has, anywhere (see
    :func:`~arrowlog.partition.producer_ids.claim_producer_id`)."""
    return claim_producer_id(log.store, transactional_id, log.config.retry)
