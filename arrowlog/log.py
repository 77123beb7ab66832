"""The entry point: a connection to one arrowlog root in one store."""

from __future__ import annotations

import threading
from collections.abc import Generator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import pyarrow as pa

from arrowlog import admin
from arrowlog.checkpoint import ProducerEntry
from arrowlog.config import LogConfig, TopicConfig
from arrowlog.consumer import Consumer, IsolationLevel, last_stable_offset
from arrowlog.coordinator import TxnResolver
from arrowlog.errors import (
    InvalidConfigError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedStoreError,
)
from arrowlog.partition import AppendResult, PartitionLog
from arrowlog.producer import Producer
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.topic import TOPICS_PREFIX, Topic, check_topic_name, topic_key


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    """What ``describe_topic`` says of one partition."""

    partition: int
    log_start_offset: int
    high_watermark: int
    last_stable_offset: int
    segments: int
    live_producer_ids: int
    open_transactions: int


@dataclass(frozen=True, slots=True)
class TopicDescription:
    topic: Topic
    partitions: tuple[PartitionInfo, ...]


def connect(
    url: str | Store,
    storage_options: dict[str, Any] | None = None,
    *,
    config: LogConfig | None = None,
    allow_unsafe_store: bool = False,
) -> ArrowLog:
    """Connect to the arrowlog root at ``url``.

    Args:
        url: ``memory://``, ``file:///dir`` or a plain path, ``s3://bucket/prefix``;
            or an already opened :class:`~arrowlog.storage.Store`.
        storage_options: passed to the backend (for S3: ``key``, ``secret``,
            ``endpoint_url``, ``client_kwargs``; for a directory: ``fsync``).
        config: client settings (retries, read-ahead).
        allow_unsafe_store: accept a store whose put-if-absent is not atomic.

    Raises:
        UnsupportedStoreError: the store cannot do atomic put-if-absent and
            ``allow_unsafe_store`` is False, or the URL names no known store.
    """
    if isinstance(url, str):
        store = open_store(url, storage_options, allow_unsafe_store=allow_unsafe_store)
    else:
        store = url
        if not store.atomic_put_if_absent and not allow_unsafe_store:
            raise UnsupportedStoreError(
                f"{store.url} has no atomic put-if-absent; "
                "pass allow_unsafe_store=True to use it anyway"
            )
    return ArrowLog(store, config=config or LogConfig())


class ArrowLog:
    """Topics and partitions under one root. Thread-safe."""

    def __init__(self, store: Store, *, config: LogConfig) -> None:
        self._store = store
        self._config = config
        self._topics: dict[str, Topic] = {}
        self._partitions: dict[tuple[str, int], PartitionLog] = {}
        self._lock = threading.Lock()
        self.resolver = TxnResolver(store, config.retry)

    @property
    def store(self) -> Store:
        return self._store

    @property
    def config(self) -> LogConfig:
        return self._config

    def __enter__(self) -> ArrowLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._store.close()

    # --- topics -------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        schema: pa.Schema,
        partitions: int = 1,
        *,
        config: TopicConfig | None = None,
    ) -> Topic:
        """Create a topic. Exactly one of several concurrent creators succeeds.

        Raises:
            InvalidNameError: the name is not allowed.
            InvalidConfigError: bad schema, partition count or config.
            TopicExistsError: the topic exists already.
        """
        if config is not None and not isinstance(config, TopicConfig):
            raise InvalidConfigError("config must be a TopicConfig")
        topic = Topic(
            name=name, schema=schema, partitions=partitions, config=config or TopicConfig()
        )
        try:
            self._store.put_if_absent(topic_key(name), topic.to_json())
        except FileExistsError:
            raise TopicExistsError(f"topic {name!r} already exists") from None
        with self._lock:
            self._topics[name] = topic
        return topic

    def topic(self, name: str) -> Topic:
        """The stored definition of a topic (cached: topics are immutable).

        Raises:
            UnknownTopicOrPartitionError: no such topic.
        """
        check_topic_name(name)
        with self._lock:
            cached = self._topics.get(name)
        if cached is not None:
            return cached
        key = topic_key(name)
        try:
            topic = Topic.from_json(self._config.retry.call(lambda: self._store.get(key)), key=key)
        except FileNotFoundError:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}") from None
        with self._lock:
            return self._topics.setdefault(name, topic)

    def list_topics(self) -> list[str]:
        names = []
        for info in self._config.retry.call(lambda: list(self._store.list(TOPICS_PREFIX))):
            name = info.key[len(TOPICS_PREFIX) :]
            if name.endswith(".json") and "/" not in name:
                names.append(name[: -len(".json")])
        return names

    def describe_topic(self, name: str) -> TopicDescription:
        topic = self.topic(name)
        decide = self.resolver.snapshot()
        infos = []
        for p in range(topic.partitions):
            log = self.partition(name, p)
            end, state = log.state()
            infos.append(
                PartitionInfo(
                    partition=p,
                    log_start_offset=log.start_offset(),
                    high_watermark=end,
                    last_stable_offset=last_stable_offset(end, state, decide),
                    segments=len(log.segments(end=end)),
                    live_producer_ids=len(state.producers),
                    open_transactions=len(state.open_txns),
                )
            )
        return TopicDescription(topic, tuple(infos))

    # --- partitions ---------------------------------------------------------------

    def partition(self, topic: str, partition: int) -> PartitionLog:
        """The (cached) log of one partition.

        Raises:
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        t = self.topic(topic)
        t.check_partition(partition)
        with self._lock:
            log = self._partitions.get((topic, partition))
            if log is None:
                log = PartitionLog(
                    self._store, t, partition, self._config, decide=self.resolver.decide
                )
                self._partitions[(topic, partition)] = log
            return log

    def append(
        self,
        topic: str,
        batch: pa.RecordBatch | pa.Table,
        *,
        partition: int = 0,
        expected_offset: int | None = None,
    ) -> AppendResult:
        """Append one batch as one segment; see :meth:`PartitionLog.append`."""
        return self.partition(topic, partition).append(batch, expected_offset=expected_offset)

    def read(
        self, topic: str, partition: int = 0, start: int | None = None, end: int | None = None
    ) -> pa.Table:
        """Offsets ``[start, end)`` of one partition as a table."""
        return self.partition(topic, partition).read(start, end)

    def iter_batches(
        self, topic: str, partition: int = 0, start: int | None = None, end: int | None = None
    ) -> Generator[pa.RecordBatch, None, None]:
        """Offsets ``[start, end)`` as a stream of record batches; ``close()`` it
        to stop early."""
        return self.partition(topic, partition).iter_batches(start, end)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """High watermark of every partition."""
        t = self.topic(topic)
        return {p: self.partition(topic, p).end_offset() for p in range(t.partitions)}

    def start_offsets(self, topic: str) -> dict[int, int]:
        """Log start offset of every partition."""
        t = self.topic(topic)
        return {p: self.partition(topic, p).start_offset() for p in range(t.partitions)}

    def stable_offsets(self, topic: str) -> dict[int, int]:
        """Last stable offset (LSO) of every partition: read_committed reads end
        there."""
        consumer = self.consumer()
        decide = self.resolver.snapshot()
        t = self.topic(topic)
        return {p: consumer.stable_offset(topic, p, decide=decide) for p in range(t.partitions)}

    # --- producers and consumers --------------------------------------------------

    def producer(
        self, *, transactional_id: str | None = None, transaction_timeout_ms: int = 60_000
    ) -> Producer:
        """An idempotent producer, or a transactional one with ``transactional_id``
        (call ``init_transactions`` first)."""
        return Producer(
            self, transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms
        )

    def consumer(
        self, *, group_id: str | None = None, isolation_level: IsolationLevel = "read_committed"
    ) -> Consumer:
        """A reader at one isolation level, optionally for a consumer group."""
        return Consumer(self, group_id=group_id, isolation_level=isolation_level)

    # --- operators ----------------------------------------------------------------

    def list_transactions(self) -> list[admin.TransactionInfo]:
        """The current or last transaction of every transactional id."""
        return admin.list_transactions(self)

    def describe_transaction(self, transactional_id: str) -> dict[str, Any]:
        return admin.describe_transaction(self, transactional_id)

    def abort_transaction(self, transactional_id: str) -> admin.TransactionInfo:
        """Fence the id's live instance and finish its transaction now."""
        return admin.abort_transaction(self, transactional_id)

    def expire_transactions(self, *, now_ms: int | None = None) -> list[admin.TransactionInfo]:
        """Abort every transaction older than its timeout."""
        return admin.expire_transactions(self, now_ms=now_ms)

    def list_producers(self, topic: str, partition: int) -> list[ProducerEntry]:
        return admin.list_producers(self, topic, partition)

    def metrics(self, topics: list[str] | None = None) -> dict[str, Any]:
        """Live producer ids, LSO and open transactions per partition; active
        transactional ids."""
        return admin.metrics(self, topics)
