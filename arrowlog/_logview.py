"""What producers, consumers, transactions and the admin use of a log.

They are handed an :class:`~arrowlog.log.ArrowLog`, but need only these few of
its parts; naming them here lets those modules sit below ``log.py`` instead of
importing it back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from arrowlog.config import LogConfig
from arrowlog.coordinator import TxnResolver
from arrowlog.errors import UnknownTopicOrPartitionError
from arrowlog.partition import PartitionLog
from arrowlog.storage import Store
from arrowlog.topic import Topic


class LogView(Protocol):
    """The store, the config, the topics and partitions, and how transactions ended."""

    resolver: TxnResolver

    @property
    def store(self) -> Store: ...

    @property
    def config(self) -> LogConfig: ...

    def topic(self, name: str, *, refresh: bool = False) -> Topic: ...

    def list_topics(self) -> list[str]: ...

    def partition(self, topic: str, partition: int) -> PartitionLog: ...


def incarnation_of(log: LogView) -> Callable[[str], int | None]:
    """A topic's current incarnation as ``log`` knows it (None: deleted or
    unknown), for reading group offsets (see :func:`arrowlog.groups.offset_key`)."""

    def of(name: str) -> int | None:
        try:
            return log.topic(name).incarnation
        except UnknownTopicOrPartitionError:
            return None

    return of
