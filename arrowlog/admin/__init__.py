"""Operator tools over any :class:`~arrowlog.txn.view.LogView`: transactions
(list, describe, abort, expire, find the open ones), the producers and
metrics of partitions, and consumer groups' lag. ``log.admin`` hands out an
:class:`Admin`; the modules below hold the work, one per concern."""

from __future__ import annotations

from typing import Any

from arrowlog.admin import groups as _groups
from arrowlog.admin import partitions as _partitions
from arrowlog.admin import transactions as _transactions
from arrowlog.admin.groups import PartitionLag
from arrowlog.admin.transactions import OpenTransaction, TransactionInfo
from arrowlog.format.checkpoint import ProducerEntry
from arrowlog.txn.view import LogView

__all__ = ["Admin", "OpenTransaction", "PartitionLag", "TransactionInfo"]


class Admin:
    """What an operator does to a log, apart from its topics: Kafka's
    kafka-transactions, kafka-consumer-groups --describe and the metrics of
    KIP-98. Holds nothing but the log; any client may use it."""

    def __init__(self, log: LogView) -> None:
        self._log = log

    # --- transactions -------------------------------------------------------------

    def transactional_ids(self) -> list[str]:
        """Every transactional id that has a coordinator log."""
        return _transactions.transactional_ids(self._log)

    def list_transactions(self) -> list[TransactionInfo]:
        """The current or last transaction of every transactional id."""
        return _transactions.list_transactions(self._log)

    def describe_transaction(self, transactional_id: str) -> dict[str, Any]:
        """The latest coordinator entry of ``transactional_id``, as JSON-friendly data.

        Raises:
            UnknownTopicOrPartitionError: no such transactional id.
        """
        return _transactions.describe_transaction(self._log, transactional_id)

    def abort_transaction(self, transactional_id: str) -> TransactionInfo:
        """Fence the id's live instance and finish its transaction now; see
        :func:`arrowlog.admin.transactions.abort_transaction`.

        Raises:
            UnknownTopicOrPartitionError: no such transactional id.
        """
        return _transactions.abort_transaction(self._log, transactional_id)

    def expire_transactions(
        self, *, now_ms: int | None = None, topics: list[str] | None = None
    ) -> list[TransactionInfo]:
        """Abort (or finish) every transaction older than its timeout, timed on
        the store's clock; see :func:`arrowlog.admin.transactions.expire_transactions`."""
        return _transactions.expire_transactions(self._log, now_ms=now_ms, topics=topics)

    def open_transactions(self, topics: list[str] | None = None) -> list[OpenTransaction]:
        """Every undecided transaction holding back the LSO of a partition of
        ``topics`` (default: every topic). Reads only."""
        return _transactions.open_transactions(self._log, topics)

    # --- partitions and groups ----------------------------------------------------

    def list_producers(self, topic: str, partition: int) -> list[ProducerEntry]:
        """The producers with state in a partition: the latest batch of each."""
        return _partitions.list_producers(self._log, topic, partition)

    def list_topic_producers(
        self, topic: str, partitions: list[int] | None = None
    ) -> list[tuple[int, ProducerEntry]]:
        """``(partition, entry)`` for the producers with state in each partition
        of ``topic`` (every partition by default)."""
        return _partitions.list_topic_producers(self._log, topic, partitions)

    def metrics(self, topics: list[str] | None = None) -> dict[str, Any]:
        """Live producer ids, LSO and open transactions per partition of
        ``topics`` (default: every topic); active transactional ids."""
        return _partitions.metrics(self._log, topics)

    def describe_group(self, group_id: str) -> list[PartitionLag]:
        """The group's position and lag in every partition of the topics it
        has offsets for.

        Raises:
            UnknownTopicOrPartitionError: no such group.
        """
        return _groups.describe_group(self._log, group_id)
