"""What every part of a :class:`~arrowlog.partition.PartitionLog` shares: the
store, the topic, the partition's lock."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

from arrowlog.config import LogConfig
from arrowlog.format.checkpoint import Decision, OpenTxn
from arrowlog.format.topic import Topic, segment_key
from arrowlog.partition.ahead import CheckpointLookAhead
from arrowlog.partition.prefetch import Reading
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


class Shared:
    """Where one partition's log lives and how to reach it, given to every
    part: the store, the configuration, the partition's lock, and the topic as
    last learnt.

    ``topic`` and ``interval`` change only under ``lock``: :meth:`learn_version`
    (a listing showed a later version of the same topic) and
    :meth:`reincarnate` (an opening found the topic created anew).
    """

    def __init__(
        self,
        store: Store,
        topic: Topic,
        partition: int,
        config: LogConfig,
        *,
        decide: Callable[[OpenTxn], Decision] | None = None,
        refresh_topic: RefreshTopic | None = None,
        ahead: CheckpointLookAhead | None = None,
    ) -> None:
        self.store = store
        self.config = config
        self.partition = topic.check_partition(partition)
        #: asks the coordinator log how a transaction ended
        self.decide = decide
        self.refresh_topic = refresh_topic
        #: the one lock of the partition: see the package docstring for what
        #: it guards
        self.lock = threading.RLock()
        self.topic = topic
        #: the topic's checkpoint interval, as of the incarnation opened
        self.interval = topic.config.checkpoint_interval
        #: the reads into tables under way, and what their listings fetched
        #: whole for them (:mod:`arrowlog.partition.prefetch`)
        self.reading = Reading()
        #: the newest checkpoint's LIST, started with the topic's lookup
        #: (:mod:`arrowlog.partition.ahead`); the first opening takes it
        self._ahead = ahead

    def take_ahead(self) -> CheckpointLookAhead | None:
        """The look-ahead of the first opening, once."""
        ahead, self._ahead = self._ahead, None
        return ahead

    def learn_version(self, latest: Topic) -> None:
        """A later version of the same topic (more partitions)."""
        self.topic = latest

    def reincarnate(self, topic: Topic) -> None:
        """The topic created anew, opened instead of the deleted one."""
        topic.check_partition(self.partition)
        self.topic = topic
        self.interval = topic.config.checkpoint_interval

    def retry(self, call: Callable[[], T]) -> T:
        """Run a read-only request, retrying transient failures until the deadline."""
        return self.config.retry.call(call)

    def key(self, offset: int) -> str:
        """The key of the segment that starts at ``offset``."""
        return segment_key(self.topic.prefix, self.partition, offset)

    def put_once(self, key: str, data: bytes | memoryview) -> None:
        """Put a marker (or a compacted object) that other calls may have put
        first with the same meaning: theirs stands."""
        with contextlib.suppress(FileExistsError):
            self.config.retry.call(lambda: self.store.put_if_absent(key, data))

    @property
    def name(self) -> str:
        return f"{self.topic.name}/{self.partition}"
