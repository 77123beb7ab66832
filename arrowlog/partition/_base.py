"""What every part of a :class:`~arrowlog.partition.PartitionLog` shares: the
store, the topic, and what is known of the log so far."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TypeVar

from arrowlog.checkpoint import (
    Checkpoint,
    Decision,
    OpenTxn,
    PartitionState,
    ProducerEntry,
    SegmentSummary,
)
from arrowlog.config import LogConfig
from arrowlog.storage import Store
from arrowlog.topic import Topic, segment_key

T = TypeVar("T")


class PartitionBase:
    """The state of one partition's log, as this process knows it; the listing,
    checkpoint, read and append layers above it all work on these fields."""

    def __init__(
        self,
        store: Store,
        topic: Topic,
        partition: int,
        config: LogConfig,
        *,
        decide: Callable[[OpenTxn], Decision] | None = None,
    ) -> None:
        self._store = store
        self._topic = topic
        self._partition = topic.check_partition(partition)
        self._config = config
        self._decide = decide
        self._interval = topic.config.checkpoint_interval
        self._lock = threading.RLock()
        self._opened = False
        self._log_start = 0
        # Everything known about the log since the newest known checkpoint: the
        # next checkpoint window starts at _window_start, where the partition state
        # was _base_state; _tail holds (base, size) of every segment from there to
        # _end, in order (a chain: each starts where the one before ends);
        # _summaries the header of each of those segments, read or written.
        self._window_start = 0
        self._base_state = PartitionState()
        self._tail: list[tuple[int, int]] = []
        self._summaries: dict[int, SegmentSummary] = {}
        self._end = 0
        self._last_base: int | None = None
        self._last_checkpoint: Checkpoint | None = None
        # The latest batch of each producer that wrote through this object, and the
        # producers whose last append ended with an unknown outcome.
        self._own: dict[int, ProducerEntry] = {}
        self._in_doubt: set[int] = set()
        #: Counters since this object was made: appends, lost races (conflicts),
        #: replies lost or failed writes resolved by reading back (ambiguous).
        self.stats: collections.Counter[str] = collections.Counter()

    @property
    def topic(self) -> Topic:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    def _retry(self, call: Callable[[], T]) -> T:
        """Run a read-only request, retrying transient failures until the deadline."""
        return self._config.retry.call(call)

    def _key(self, offset: int) -> str:
        return segment_key(self._topic.name, self._partition, offset)

    @property
    def _name(self) -> str:
        return f"{self._topic.name}/{self._partition}"
