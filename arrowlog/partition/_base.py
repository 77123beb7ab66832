"""What every part of a :class:`~arrowlog.partition.PartitionLog` shares: the
store, the topic, and what is known of the log so far."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TypeVar

from arrowlog.config import LogConfig
from arrowlog.errors import UnknownTopicOrPartitionError
from arrowlog.format.checkpoint import (
    Checkpoint,
    Decision,
    OpenTxn,
    PartitionState,
    ProducerEntry,
    SegmentSummary,
)
from arrowlog.format.topic import Topic, segment_key
from arrowlog.storage import Store

T = TypeVar("T")

#: Given by the ArrowLog: the topic's latest version, reading the chain of
#: versions if the one it knows is older than the argument; raises
#: UnknownTopicOrPartitionError if the topic was deleted.
RefreshTopic = Callable[[int], Topic]


class _Reincarnated(Exception):
    """Raised while opening: the topic was deleted and created anew, and this
    partition had no state yet, so it opens the new topic instead."""

    def __init__(self, topic: Topic) -> None:
        super().__init__(topic.name)
        self.topic = topic


class _Stale(Exception):
    """Raised while opening: the chain from the checkpoint opened from ends
    below the log start (a vacuum removed segments meanwhile, or the newest
    checkpoint was unusable): open again."""


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
        refresh_topic: RefreshTopic | None = None,
    ) -> None:
        self._store = store
        self._topic = topic
        self._refresh_topic = refresh_topic
        self._opening = False
        self._partition = topic.check_partition(partition)
        self._config = config
        self._decide = decide
        self._interval = topic.config.checkpoint_interval
        self._lock = threading.RLock()
        self._opened = False
        self._log_start = 0
        # the compaction mark: the records below it are in compacted objects,
        # and their segments may be removed (docs/protocol.md, "Compaction")
        self._compacted = 0
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
        # when (_clock.elapsed(): time suspended counts) the request began that
        # last showed _end to be the log end: a listing, or this object's own
        # append there. A writer lists again before trusting it longer than
        # half the topic's delete_delay_ms (docs/protocol.md, "Deleting records").
        self._end_known_at = 0.0
        # base -> when (on the store's clock: its LastModified) the object at
        # that key of the tail was written, for the tail segments a listing or
        # a HEAD showed: they date producer state (see Checkpoints._date_producers)
        self._stored: dict[int, int] = {}
        self._last_base: int | None = None
        self._last_checkpoint: Checkpoint | None = None
        self._checkpoint_cache: collections.OrderedDict[str, Checkpoint] = collections.OrderedDict()
        # The latest batch of each producer that wrote through this object, and the
        # producers whose last append ended with an unknown outcome.
        self._own: dict[int, ProducerEntry] = {}
        # producer id -> the lowest offset where a batch of it whose outcome was
        # unknown may have landed: a retry looks for it there by its identity
        self._in_doubt: dict[int, int] = {}
        #: Counters since this object was made: appends, lost races (conflicts),
        #: replies lost or failed writes resolved by reading back (ambiguous).
        self.stats: collections.Counter[str] = collections.Counter()

    @property
    def topic(self) -> Topic:
        return self._topic

    @property
    def partition(self) -> int:
        return self._partition

    def _topic_announced(self, version: int) -> None:
        """A listing showed that version ``version`` of the topic is (being)
        claimed: learn it. More partitions change nothing here; a delete makes
        every call on this partition raise from now on."""
        if self._refresh_topic is not None and version > self._topic.version:
            self._adopt(self._refresh_topic(version))

    def _check_alive(self) -> None:
        """An object the log knew of is gone. Raises UnknownTopicOrPartitionError
        if that is because the topic was deleted; returns if it was not (the
        caller then reports the loss)."""
        if self._refresh_topic is not None:
            self._adopt(self._refresh_topic(self._topic.version + 1))

    def _adopt(self, latest: Topic) -> None:
        if latest.incarnation == self._topic.incarnation:
            self._topic = latest  # a later version of the same topic: more partitions
            return
        if self._opening:
            raise _Reincarnated(latest)
        raise UnknownTopicOrPartitionError(
            f"topic {self._topic.name!r} was deleted and created anew: partition "
            f"{self._partition} of the old topic is gone (look the partition up again)"
        )

    def _retry(self, call: Callable[[], T]) -> T:
        """Run a read-only request, retrying transient failures until the deadline."""
        return self._config.retry.call(call)

    def _key(self, offset: int) -> str:
        return segment_key(self._topic.prefix, self._partition, offset)

    def segment_key(self, base: int) -> str:
        """The key of the segment that starts at offset ``base``."""
        return self._key(base)

    @property
    def _name(self) -> str:
        return f"{self._topic.name}/{self._partition}"
