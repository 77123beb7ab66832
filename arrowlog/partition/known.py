"""The state part of a :class:`~arrowlog.partition.PartitionLog`: what this
process knows of the log (its floor, the newest known checkpoint, the tail
after it). The other parts read these fields, under the partition's lock, and
change them only through the methods here; none of them does I/O."""

from __future__ import annotations

import collections
from collections.abc import Iterable

from arrowlog.format.checkpoint import Checkpoint, PartitionState, SegmentSummary, advance
from arrowlog.format.topic import parse_segment_key
from arrowlog.storage import ObjectInfo


class KnownLog:
    """One partition's log as this process knows it; guarded by the
    partition's lock (``Shared.lock``), except that read-ahead threads read
    ``log_start`` and ``compacted`` without it."""

    def __init__(self) -> None:
        self.log_start = 0
        # the compaction mark: the records below it are in compacted objects,
        # and their segments may be removed (docs/protocol.md, "Compaction")
        self.compacted = 0
        # Everything known about the log since the newest known checkpoint: the
        # next checkpoint window starts at window_start, where the partition state
        # was base_state; tail holds (base, size) of every segment from there to
        # end, in order (a chain: each starts where the one before ends);
        # summaries the header of each of those segments, read or written.
        self.window_start = 0
        self.base_state = PartitionState()
        self.tail: list[tuple[int, int]] = []
        self.summaries: dict[int, SegmentSummary] = {}
        self.end = 0
        # when (_clock.elapsed(): time suspended counts) the request began that
        # last showed end to be the log end: a listing, or this object's own
        # append there. A writer lists again before trusting it longer than
        # half the topic's delete_delay_ms (docs/protocol.md, "Deleting records").
        self.end_known_at = 0.0
        # base -> when (on the store's clock: its LastModified) the object at
        # that key of the tail was written, for the tail segments a listing or
        # a HEAD showed: they date producer state (see Checkpoints._date_producers)
        self.stored: dict[int, int] = {}
        self.last_base: int | None = None
        self.last_checkpoint: Checkpoint | None = None
        self.committed = CommittedIndex()
        # base_state advanced by the tail (see tail_state), kept as the tail grows
        self._tail_state: PartitionState | None = None

    def forget(self) -> None:
        """Know nothing (an opening starts over)."""
        self.tail = []
        self.summaries = {}
        self.last_checkpoint = None
        self.last_base = None
        self.base_state = PartitionState()
        self.window_start = self.end = self.log_start = self.compacted = 0
        self.stored = {}
        self.committed = CommittedIndex()
        self._tail_state = None

    def open_from(self, cp: Checkpoint) -> None:
        """Know the log up to the end of the checkpoint ``cp`` (an opening)."""
        self.last_checkpoint = cp
        self.log_start = cp.log_start
        self.window_start = self.end = cp.end
        self.base_state = cp.state.copy()
        self.last_base = cp.segments[-1].base
        self.committed = CommittedIndex()
        self._tail_state = None

    @property
    def floor(self) -> int:
        """Below this offset, segments may have been removed and their keys
        freed: the log start, or the compaction mark if higher."""
        return max(self.log_start, self.compacted)

    def learn_marks(self, starts: Iterable[int], marks: Iterable[int]) -> None:
        """Raise the log start and the compaction mark to the highest of
        ``starts`` and ``marks`` (they never move back)."""
        self.log_start = max([self.log_start, *starts])
        self.compacted = max([self.compacted, *marks])

    def end_seen(self, began: float) -> None:
        """A request that began at ``began`` showed the log ending at :attr:`end`."""
        self.end_known_at = began

    def extend_tail(self, summary: SegmentSummary) -> None:
        """The segment ``summary`` describes now ends the known log."""
        self.tail.append((summary.base, summary.size))
        self.summaries[summary.base] = summary
        self.end = summary.end
        self.last_base = summary.base
        self.committed.add(summary)
        if self._tail_state is not None:
            self._tail_state.apply(summary)

    def tail_summaries(self, upto: int | None = None) -> list[SegmentSummary]:
        """Summaries of the tail segments (the first ``upto``). All are known: a
        sync reads the header of every segment it adds to the chain."""
        wanted = self.tail if upto is None else self.tail[:upto]
        return [self.summaries[base] for base, _ in wanted]

    def tail_state(self) -> PartitionState:
        """The partition state at :attr:`end`: :attr:`base_state` advanced by
        the tail. Kept as the tail grows (a writer waiting for its staged
        batch asks on every look at the log); the caller must not change it
        (copy it to)."""
        if self._tail_state is None:
            self._tail_state = advance(self.base_state, self.tail_summaries())
        return self._tail_state

    def pass_window(self, segments: int, cp: Checkpoint, state: PartitionState) -> None:
        """The first ``segments`` of the tail are the checkpoint ``cp``'s (the
        newest known), with the partition state ``state`` at its end: the tail
        starts after them."""
        for base, _ in self.tail[:segments]:
            self.summaries.pop(base, None)
        del self.tail[:segments]
        self.last_checkpoint = cp
        self.window_start = cp.end
        self.base_state = state
        self._tail_state = None
        self.stored = {b: ms for b, ms in self.stored.items() if b >= self.window_start}

    def learn_stored(self, found: Iterable[ObjectInfo]) -> None:
        """When, on the store's clock, the listed segments of the tail were
        written. A segment at a later offset was written after every one
        before it (its writer saw them), so each time is also an upper bound
        for the batches below it."""
        for info in found:
            base = parse_segment_key(info.key)
            if base is not None and base >= self.window_start and info.modified_ms is not None:
                self.stored[base] = info.modified_ms

    def store_time(self, base: int, modified_ms: int) -> None:
        """When the segment at ``base`` was written, on the store's clock."""
        self.stored[base] = modified_ms

    def stored_by(self, offset: int) -> int | None:
        """A time on the store's clock by which the batch at ``offset`` had
        been written (that of the first segment at or after it whose time is
        known), or None."""
        later = [base for base in self.stored if base >= offset]
        return self.stored[min(later)] if later else None


class CommittedIndex:
    """The staged data objects committed by the objects this process has
    seen join the chain, one after another, since it opened the partition:
    ``at`` -> the offset its batch got, for the commits of the last
    :data:`KEPT` objects, from offset :attr:`since` on. A writer waiting for
    its staged batch finds it here without a request; below :attr:`since`
    it reads the chain (docs/protocol.md, "Staged appends")."""

    KEPT = 4096

    def __init__(self) -> None:
        self.at: dict[str, int] = {}
        #: (base of a chain object, the ``at`` of the batches it commits)
        self._objects: collections.deque[tuple[int, tuple[str, ...]]] = collections.deque()
        self.since: int | None = None

    def add(self, summary: SegmentSummary) -> None:
        """``summary`` (an object that continues the chain) joined it."""
        if self.since is None:
            self.since = summary.base
        held = tuple(r.at for r in summary.refs if r.at is not None)
        for r in summary.refs:
            if r.at is not None:
                self.at[r.at] = r.base
        self._objects.append((summary.base, held))
        if len(self._objects) > self.KEPT:
            for _ in range(self.KEPT // 2):
                _, gone = self._objects.popleft()
                for at in gone:
                    self.at.pop(at, None)
            self.since = self._objects[0][0]
