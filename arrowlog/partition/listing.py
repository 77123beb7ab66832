"""The tail: the segments after the newest known checkpoint, by listing.

A listing is not a snapshot, so a listed segment joins the chain only if it
starts where the one before it ends (the listing rule); a HEAD follows the chain
past a listing that stopped short; a segment the log was known to reach through
and that is gone is reported, never appended over. See docs/protocol.md, "The
listing rule" and "Lost segments".
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

from arrowlog import _clock
from arrowlog.errors import ArrowLogError, CorruptSegmentError, SegmentNotFoundError
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.segment import HEAD_BYTES, SegmentHeader, read_header
from arrowlog.format.topic import (
    MARKS_AFTER,
    parse_announcement_key,
    parse_compacted_mark_key,
    parse_log_start_key,
    parse_segment_key,
    segment_prefix,
)
from arrowlog.partition._base import PartitionBase, _Stale
from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES
from arrowlog.partition.heads import HEADS
from arrowlog.storage import ObjectInfo, get_range_tagged

#: Segment headers a sync reads at once (in parallel).
_HEADER_READS = 8


class Listing(PartitionBase):
    """Listing the tail, the contiguous-chain rule, probing by HEAD."""

    def _sync_tail(self) -> bool:
        """List the segments from the last known one on; True if the log grew.

        A listing is not a snapshot: racing appends, it can show segment N+1
        without N. So a listed segment counts only if it starts where the one
        before it ends, by that one's header; from the first gap on, keys are
        "not visible yet": ignored now, never cached, listed again next time.

        The listing starts just before the last known segment, so that segment
        is in it: if it is gone, the log lost records this client (or the
        checkpoint it opened from) saw, and appending at its end would reuse
        their offsets; unless vacuum removed it below the floor (the log start
        or the compaction mark). If it ended below the floor, the key at its
        end may be freed too: the chain is not trusted (see
        :meth:`_below_log_start`). If it ended at the floor, the segment there
        was never removed (vacuum removes only segments wholly below a floor
        at least ``delete_delay_ms`` old, which this listing shows): the
        chain goes on.

        Changes to the topic are announced in every partition before they are
        claimed, under keys that sort after every segment: the same LIST shows
        them, and a newer version than the one known is read (a delete raises
        UnknownTopicOrPartitionError here).

        Cost: one LIST, plus one ranged GET (of at most ``HEAD_BYTES``) per new
        segment, in parallel. No fewer is sound: only a header tells where its
        segment ends, so each link of the chain needs the header before it. A
        writer reads each header at most once (it is kept for the checkpoint).
        A sync that grows a tail holding a complete window also GETs that
        window's checkpoint (one GET per window, see
        :meth:`_adopt_written_windows`), so a client that only reads holds
        about a window, however long it lives, as one opening now would.
        """
        last = self._last_base
        after = None if last is None or last == 0 else self._key(last - 1)
        prefix = segment_prefix(self._topic.prefix, self._partition)
        began = _clock.elapsed()
        found = self._retry(lambda: list(self._store.list(prefix, start_after=after)))
        announced = [v for info in found if (v := parse_announcement_key(info.key)) is not None]
        if announced:
            self._topic_announced(max(announced))
        self._learn_marks(found)
        self._learn_stored(found)
        listed = [
            (b, info.size) for info in found if (b := parse_segment_key(info.key)) is not None
        ]
        if last is not None:
            if listed and listed[0][0] == last:
                self._check_same_size(last, listed[0][1])
                del listed[0]
            elif not self._exists(self._key(last)):
                # the listing may just have missed it (not a snapshot): only a
                # HEAD that finds nothing says it is gone; a deleted topic says
                # so instead
                self._check_alive()
                if self._end < self._floor:
                    # removed with the records before the log start, or once
                    # they were compacted, and the next key may be freed too
                    return self._below_log_start()
                if self._end > self._floor:
                    raise SegmentNotFoundError(
                        f"segment missing: the log was known to reach offset {self._end} "
                        "through it; its records are lost",
                        key=self._key(last),
                    )
                # removed, and it ended at the floor: only segments wholly below
                # a floor are removed, so the one at the floor is still there
                # and its key was never freed; the chain goes on from it
        chain = self._chain_from(self._end, listed)
        for summary in chain:
            self._extend_tail(summary)
        if self._floor > self._end:
            # the listing says the log starts (or was compacted) past where
            # this chain ends: its next key may be one a removed segment freed
            return self._below_log_start()
        self._end_known_at = began
        if chain and not self._opening and len(self._tail) >= self._interval:
            self._adopt_written_windows()
        return bool(chain)

    def _check_same_size(self, base: int, size: int) -> None:
        """The last known segment, listed again, must be the one known. Its key
        holds another object only if it was freed (below the floor: see
        :meth:`_below_log_start`), or if the root was restored or rewritten
        under this client: another size says so (another object of the same
        size goes unseen here; readers check append ids).

        Raises:
            SegmentNotFoundError: the key holds an object of another size.
        """
        known = self._summaries.get(base)
        if known is None or known.size == size or self._end <= self._floor:
            return
        raise SegmentNotFoundError(
            f"segment replaced: the log was known to reach offset {self._end} through a "
            f"segment of {known.size} bytes, and its key now holds one of {size} bytes (the "
            "root was restored or rewritten under this client); connect again",
            key=self._key(base),
        )

    @property
    def _floor(self) -> int:
        """Below this offset, segments may have been removed and their keys
        freed: the log start, or the compaction mark if higher."""
        return max(self._log_start, self._compacted)

    def _learn_marks(self, found: Iterable[ObjectInfo]) -> None:
        """The log start and the compaction mark, raised to the newest marker
        of each among listed objects."""
        starts = [s for info in found if (s := parse_log_start_key(info.key)) is not None]
        marks = [m for info in found if (m := parse_compacted_mark_key(info.key)) is not None]
        with self._lock:  # read-ahead threads learn them too
            self._log_start = max([self._log_start, *starts])
            self._compacted = max([self._compacted, *marks])

    def _learn_stored(self, found: Iterable[ObjectInfo]) -> None:
        """When, on the store's clock, the listed segments of the tail were
        written. A segment at a later offset was written after every one
        before it (its writer saw them), so each time is also an upper bound
        for the batches below it."""
        for info in found:
            base = parse_segment_key(info.key)
            if base is not None and base >= self._window_start and info.modified_ms is not None:
                self._stored[base] = info.modified_ms

    def _stored_by(self, offset: int) -> int | None:
        """A time on the store's clock by which the batch at ``offset`` had
        been written (that of the first segment at or after it whose time is
        known), or None."""
        later = [base for base in self._stored if base >= offset]
        return self._stored[min(later)] if later else None

    def _list_marks(self) -> int:
        """The floor (see :attr:`_floor`), listing only the partition's markers
        (every key after the segments': they all start with a digit)."""
        prefix = segment_prefix(self._topic.prefix, self._partition)
        self._learn_marks(
            self._retry(lambda: list(self._store.list(prefix, start_after=prefix + MARKS_AFTER)))
        )
        return self._floor

    def _below_log_start(self) -> bool:
        """The chain this object knows ends at or below the log start, and the
        segments it holds may have been removed, their keys free to be claimed
        again: only the newest checkpoint's chain is sure to be whole (vacuum
        never removes its segments). Open again from it; while opening, let
        the opening start over (see Checkpoints._open)."""
        if self._opening:
            raise _Stale
        self._reopen()
        return True

    def _reopen(self) -> None:
        """Open again from the newest checkpoint (see Checkpoints._open)."""
        raise NotImplementedError

    def _adopt_written_windows(self) -> None:
        """The tail holds a complete window: start the tail after the windows
        whose checkpoints are written (see Reads._adopt_written_windows)."""
        raise NotImplementedError

    def _extend_tail(self, summary: SegmentSummary) -> None:
        """The segment ``summary`` describes now ends the known log."""
        self._tail.append((summary.base, summary.size))
        self._summaries[summary.base] = summary
        self._end = summary.end
        self._last_base = summary.base

    def _exists(self, key: str) -> bool:
        """Whether an object is there, by HEAD (a listing may miss it)."""
        try:
            self._retry(lambda: self._store.head(key))
        except FileNotFoundError:
            return False
        return True

    def _chain_from(self, end: int, listed: list[tuple[int, int]]) -> list[SegmentSummary]:
        """The listed ``(base, size)`` segments that continue the chain from
        ``end``, up to the first gap; headers read a few at a time in parallel."""
        chain: list[SegmentSummary] = []
        for i in range(0, len(listed), _HEADER_READS):
            batch = listed[i : i + _HEADER_READS]
            if batch[0][0] != end:
                return chain  # a gap: read no header past it
            headers = self._read_headers(batch)
            for (base, size), header in zip(batch, headers, strict=True):
                if base != end or isinstance(header, FileNotFoundError):
                    return chain  # a gap, or a key gone since the listing
                if isinstance(header, BaseException):
                    raise header  # a corrupt segment in the chain is never skipped
                chain.append(SegmentSummary.of(header, size))
                end = header.next_offset
        return chain

    def _read_headers(self, listed: list[tuple[int, int]]) -> list[SegmentHeader | BaseException]:
        """The headers of the listed ``(base, size)`` segments read in
        parallel, each or its error."""

        def read(segment: tuple[int, int]) -> SegmentHeader | BaseException:
            try:
                return self._read_header(*segment)
            except (ArrowLogError, FileNotFoundError) as e:
                return e

        if len(listed) == 1:
            return [read(listed[0])]
        with ThreadPoolExecutor(
            max_workers=len(listed), thread_name_prefix="arrowlog-head"
        ) as pool:
            return list(pool.map(read, listed))

    def _read_header(self, base: int, size: int | None = None) -> SegmentHeader:
        """The header of the segment at ``base``; given its ``size``, a segment
        large enough to be read by columns leaves its frame kept."""
        key = self._key(base)
        head, tag = self._retry(lambda: get_range_tagged(self._store, key, 0, HEAD_BYTES))
        header = read_header(head, key=key)
        if isinstance(header, int):
            need = header
            head, tag = self._retry(lambda: get_range_tagged(self._store, key, 0, need))
            header = read_header(head, key=key)
            if isinstance(header, int):
                raise CorruptSegmentError("segment truncated inside its schema", key=key)
        if header.base_offset != base:
            raise CorruptSegmentError(f"segment says it starts at {header.base_offset}", key=key)
        if size is not None and size >= COLUMN_READ_MIN_BYTES:
            HEADS.offer(key, header.append_id, head, tag)  # a column read needs no head read
        return header

    def _tail_summaries(self, upto: int | None = None) -> list[SegmentSummary]:
        """Summaries of the tail segments (the first ``upto``). All are known: a
        sync reads the header of every segment it adds to the chain."""
        wanted = self._tail if upto is None else self._tail[:upto]
        return [self._summaries[base] for base, _ in wanted]

    def _probe_tail(self) -> None:
        """Follow the chain past the listing, object by object: a listing racing
        appends may stop short of segments already written (a gap is "not
        visible yet" to it), but a HEAD of the key at the known end sees any
        completed write. One HEAD when nothing follows; a HEAD and a header read
        per segment the listing missed. Where the end must cover everything
        acknowledged before (a transaction's bound, a snapshot's views), not
        just what a listing showed."""
        while True:
            key = self._key(self._end)
            began = _clock.elapsed()
            try:
                info = self._retry(functools.partial(self._store.head, key))
            except FileNotFoundError:
                self._end_known_at = began
                return
            header = self._read_header(self._end, info.size)
            self._learn_stored([info])
            self._extend_tail(SegmentSummary.of(header, info.size))
