"""What producers, consumers, transactions, maintenance and the admin use of a log.

They are handed an :class:`~arrowlog.log.client.ArrowLog`, but need only these few of
its parts; naming them here lets those packages sit below ``arrowlog.log`` instead
of importing it back.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Protocol

from arrowlog.config import LogConfig
from arrowlog.errors import ArrowLogError, UnknownTopicOrPartitionError
from arrowlog.format.topic import Topic
from arrowlog.partition import PartitionLog
from arrowlog.storage import Store
from arrowlog.txn.resolver import TxnResolver


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

    def iter_partitions(self, topic: str) -> Iterator[PartitionLog]: ...


def incarnation_of(log: LogView) -> Callable[[str], int | None]:
    """A topic's current incarnation as ``log`` knows it (None: deleted or
    unknown), for reading group offsets (see :func:`arrowlog.txn.groups.offset_key`)."""

    def of(name: str) -> int | None:
        try:
            return log.topic(name).incarnation
        except UnknownTopicOrPartitionError:
            return None

    return of


CLOCK_PREFIX = "_arrowlog/clock/"


def store_now_ms(log: LogView) -> int:
    """The store's current time: write a probe object, read its time, remove
    it. Falls back to this client's clock where the store keeps no times."""
    key = f"{CLOCK_PREFIX}{uuid.uuid4().hex}"
    retry = log.config.retry
    retry.call(lambda: _put_probe(log, key))
    try:
        modified = retry.call(lambda: log.store.head(key)).modified_ms
    finally:
        with contextlib.suppress(ArrowLogError, FileNotFoundError):
            log.store.delete(key)
    return int(time.time() * 1000) if modified is None else modified


def _put_probe(log: LogView, key: str) -> None:
    with contextlib.suppress(FileExistsError):  # our own earlier attempt landed
        log.store.put_if_absent(key, b"")
