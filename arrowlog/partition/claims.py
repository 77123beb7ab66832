"""Claims: putting an object at the log end with put-if-absent, and deciding
who holds an offset after a lost race or a lost reply, by reading back what
sits there; and whether an object put on a stale view of the log is in it.
Appends and staged appends (their commit objects) claim offsets through it.
See docs/protocol.md, "Appending" and "Deleting records".
"""

from __future__ import annotations

import enum
from dataclasses import replace

from arrowlog import _clock
from arrowlog.errors import (
    AppendOutcomeUnknownError,
    ArrowLogError,
    CorruptCheckpointError,
    TransientStoreError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.topic import (
    MARKS_AFTER,
    checkpoint_key,
    checkpoint_prefix,
    parse_announcement_key,
    parse_checkpoint_key,
    segment_prefix,
)
from arrowlog.partition._base import Shared
from arrowlog.partition.checkpoints import Checkpoints, _warn_skipped
from arrowlog.partition.indexes import CompactedIndexes
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing


class Owner(enum.Enum):
    """Who holds an offset, as read back after an ambiguous write."""

    OURS = "ours"
    THEIRS = "theirs"
    NOBODY = "nobody"


class Claims:
    """The claiming part: one put-if-absent at an offset and who holds it
    afterwards. It owns no fields; it runs with the partition's lock held by
    its caller."""

    def __init__(
        self,
        shared: Shared,
        known: KnownLog,
        listing: Listing,
        checkpoints: Checkpoints,
        indexes: CompactedIndexes,
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._indexes = indexes

    def try_put(self, offset: int, data: memoryview, append_id: str) -> tuple[Owner, bool]:
        """One put-if-absent attempt, and who holds the offset afterwards.

        Returns the owner (NOBODY means: try again) and whether this attempt
        may have been applied without our knowing.
        """
        key = self._shared.key(offset)
        try:
            self._shared.store.put_if_absent(key, data)
        except FileExistsError:
            # Ours if an earlier attempt of this very append landed unseen (the S3
            # client retries internally too, so always read back).
            return self.owner(offset, append_id), False
        except TransientStoreError as e:
            if not e.maybe_applied:
                return Owner.NOBODY, False
            return self.owner(offset, append_id), True
        return Owner.OURS, False

    def owner(self, offset: int, append_id: str) -> Owner:
        """Read back what sits at ``offset``.

        Raises:
            AppendOutcomeUnknownError: the store stayed unavailable until the deadline.
        """
        try:
            header = self._listing.read_header(offset)
        except FileNotFoundError:
            return Owner.NOBODY
        except TransientStoreError as e:
            raise AppendOutcomeUnknownError(
                f"{self._shared.key(offset)}: cannot read back the outcome of an append: {e}",
                offset=offset,
            ) from e
        return Owner.OURS if header.append_id == append_id else Owner.THEIRS

    def end_is_stale(self) -> bool:
        """True once this object has trusted its view of the log end for half
        the topic's ``delete_delay_ms``: segments it does not know of may have
        been written, removed (records deleted before the log start, or
        compacted) and their keys freed since (docs/protocol.md, "Deleting records")."""
        trusted = _clock.elapsed() - self._known.end_known_at
        return trusted * 2000 > self._shared.topic.config.delete_delay_ms

    def below_log_start(self, owner: Owner, ours: SegmentSummary) -> bool:
        """Whether a put that ``owner`` says is ours took, on a stale view of
        the log, a key that records deleted since had freed: the object is in
        no one's log, and the write must go to the real end."""
        return owner is Owner.OURS and self.end_is_stale() and not self.in_log(ours)

    def in_log(self, ours: SegmentSummary) -> bool:
        """Whether our segment, just put at ``ours.base`` on a stale view of the
        log, is the log's own there, and not a write into a key that a removed
        segment freed. Segments are removed only below the log start or the
        compaction mark, and only segments that a checkpoint indexes
        (docs/protocol.md): so ours is the log's if both are at or before it,
        if no checkpoint indexes its offset yet, or if the one that does names it
        (or, if that checkpoint is corrupt, the index of the compacted object
        holding its window does).

        Raises:
            UnknownTopicOrPartitionError: the listing of the markers shows the
                topic deleted (and maybe created anew): our segment went with it.
            AppendOutcomeUnknownError: the log start or checkpoint cannot be
                read, or vacuum removed that checkpoint (its window is below the
                log start): then no one can tell.
        """
        checkpoints = checkpoint_prefix(self._shared.topic.prefix, self._shared.partition)
        after = checkpoint_key(self._shared.topic.prefix, self._shared.partition, ours.base + 1)
        try:
            if ours.base >= self._list_markers():
                return True
            # inverted keys: the first after `after` is the window with the
            # greatest start <= our offset
            listed = self._shared.retry(
                lambda: list(self._shared.store.list(checkpoints, start_after=after, limit=1))
            )
            start = parse_checkpoint_key(listed[0].key) if listed else None
            window = None if start is None else self._window_below_floor(start, ours.base)
            if window is None or window[0] <= ours.base:
                # none listed indexes the offset: none was written yet (no
                # segment there was removed), or vacuum removed it
                newest = self._checkpoints.newest_checkpoint()
                if newest is None or newest.end <= ours.base:
                    return True
                raise FileNotFoundError(f"the checkpoint indexing offset {ours.base} was removed")
        except UnknownTopicOrPartitionError:
            raise
        except (ArrowLogError, FileNotFoundError) as e:
            raise AppendOutcomeUnknownError(
                f"{self._shared.key(ours.base)}: cannot tell whether this append is in the "
                f"log: {e}",
                offset=ours.base,
            ) from e
        theirs = [s for s in window[1] if s.base == ours.base]
        return not theirs or _without_stats(theirs[0]) == _without_stats(ours)

    def _list_markers(self) -> int:
        """The floor (the log start, or the compaction mark if higher), from
        one LIST of the partition's markers; a change of the topic announced
        among them is learnt first, as a sync learns it.

        Raises:
            UnknownTopicOrPartitionError: the topic was deleted (its grave is
                among the markers), and maybe created anew.
        """
        prefix = segment_prefix(self._shared.topic.prefix, self._shared.partition)
        marks_after = prefix + MARKS_AFTER
        found = self._shared.retry(
            lambda: list(self._shared.store.list(prefix, start_after=marks_after))
        )
        announced = [v for info in found if (v := parse_announcement_key(info.key)) is not None]
        if announced:
            self._listing.topic_announced(max(announced))
        self._listing.learn_marks(found)
        return self._known.floor

    def _window_below_floor(
        self, start: int, offset: int
    ) -> tuple[int, tuple[SegmentSummary, ...]]:
        """The end and the segments of the window at ``start``, as recorded
        while its segments were all there, to decide who held ``offset``
        (below the floor): its checkpoint, or if that is corrupt, the index of
        the compacted object holding the window (see
        :mod:`arrowlog.format.compacted_index`). Never the segments listed now: below
        the floor a key may hold a stray such as ours.

        Raises:
            CorruptCheckpointError: the checkpoint is corrupt and no compacted
                object's index gives the window's segments up to ``offset``.
            FileNotFoundError: the checkpoint is gone.
        """
        try:
            window = self._checkpoints.load_checkpoint(start)
        except CorruptCheckpointError as e:
            indexed = self._indexes.indexed_window(start) if start < self._known.compacted else None
            if indexed is None or not indexed[1] or indexed[1][0].base > offset:
                raise
            key = checkpoint_key(self._shared.topic.prefix, self._shared.partition, start)
            _warn_skipped(key, e, "deciding through the compacted object's index")
            return indexed
        return window.end, window.segments

    def record_append(self, summary: SegmentSummary) -> None:
        self._known.extend_tail(summary)
        self._checkpoints.write_due_checkpoints()


def _without_stats(s: SegmentSummary) -> SegmentSummary:
    """``s`` without column statistics, a commit's batches' too (a compacted
    object's index keeps none)."""
    return replace(s, stats=None, refs=tuple(replace(r, stats=None) for r in s.refs))
