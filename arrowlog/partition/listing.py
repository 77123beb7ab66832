"""The tail: the segments after the newest known checkpoint, by listing.

A listing is not a snapshot, so a listed segment joins the chain only if it
starts where the one before it ends (the listing rule); a HEAD follows the chain
past a listing that stopped short; a segment the log was known to reach through
and that is gone is reported, never appended over. See docs/protocol.md, "The
listing rule" and "Lost segments".
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import itertools
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from typing import Protocol

from arrowlog import _clock
from arrowlog._threads import Lane
from arrowlog.errors import (
    ArrowLogError,
    CorruptSegmentError,
    SegmentNotFoundError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.segment import HEAD_BYTES, SegmentHeader, decode_segment, read_header
from arrowlog.format.topic import (
    MARKS_AFTER,
    Topic,
    parse_announcement_key,
    parse_compacted_mark_key,
    parse_log_start_key,
    parse_segment_key,
    segment_prefix,
)
from arrowlog.partition._base import Shared, _Reincarnated
from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES, decoded_where_fetched
from arrowlog.partition.heads import HEADS
from arrowlog.partition.known import KnownLog
from arrowlog.partition.prefetch import Kept, Prefetch
from arrowlog.storage import ObjectInfo, get_range_tagged, read_start

#: Segment headers a sync reads at once (in parallel).
_HEADER_READS = 8


class Opener(Protocol):
    """What the listing asks of the part that opens the partition
    (:class:`~arrowlog.partition.checkpoints.Checkpoints`)."""

    @property
    def opening(self) -> bool:
        """Whether an opening is under way."""
        ...

    def below_log_start(self) -> bool:
        """The known chain ends at or below the floor: open again (True)."""
        ...

    def adopt_written_windows(self) -> None:
        """The tail holds a complete window: start it after the windows
        whose checkpoints are written."""
        ...


class Listing:
    """The listing part: listing the tail, the contiguous-chain rule, probing
    by HEAD, and learning the topic's changes from what a listing shows. It
    owns no fields: it extends the state part (:class:`KnownLog`), under the
    partition's lock, taken by the caller (:meth:`learn_marks` takes it
    itself: read-ahead threads call it too)."""

    def __init__(self, shared: Shared, known: KnownLog) -> None:
        self._shared = shared
        self._known = known
        self._opener: Opener

    def bind(self, opener: Opener) -> None:
        """Given once, by the PartitionLog: the part that opens the partition."""
        self._opener = opener

    def sync_tail(self) -> bool:
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
        :meth:`Checkpoints.below_log_start`). If it ended at the floor, the
        segment there was never removed (vacuum removes only segments wholly
        below a floor at least ``delete_delay_ms`` old, which this listing
        shows): the chain goes on.

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
        :meth:`Checkpoints.adopt_written_windows`), so a client that only reads
        holds about a window, however long it lives, as one opening now would.
        """
        shared, known = self._shared, self._known
        last = known.last_base
        after = None if last is None or last == 0 else shared.key(last - 1)
        prefix = segment_prefix(shared.topic.prefix, shared.partition)
        began = _clock.elapsed()
        found = shared.retry(lambda: list(shared.store.list(prefix, start_after=after)))
        announced = [v for info in found if (v := parse_announcement_key(info.key)) is not None]
        if announced:
            self.topic_announced(max(announced))
        self.learn_marks(found)
        known.learn_stored(found)
        listed = [
            (b, info.size) for info in found if (b := parse_segment_key(info.key)) is not None
        ]
        if last is not None:
            if listed and listed[0][0] == last:
                self._check_same_size(last, listed[0][1])
                del listed[0]
            elif not self.exists(shared.key(last)):
                # the listing may just have missed it (not a snapshot): only a
                # HEAD that finds nothing says it is gone; a deleted topic says
                # so instead
                self.check_alive()
                if known.end < known.floor:
                    # removed with the records before the log start, or once
                    # they were compacted, and the next key may be freed too
                    return self._opener.below_log_start()
                if known.end > known.floor:
                    raise SegmentNotFoundError(
                        f"segment missing: the log was known to reach offset {known.end} "
                        "through it; its records are lost",
                        key=shared.key(last),
                    )
                # removed, and it ended at the floor: only segments wholly below
                # a floor are removed, so the one at the floor is still there
                # and its key was never freed; the chain goes on from it
        chain = self.chain_from(known.end, listed)
        for summary in chain:
            known.extend_tail(summary)
        if known.floor > known.end:
            # the listing says the log starts (or was compacted) past where
            # this chain ends: its next key may be one a removed segment freed
            return self._opener.below_log_start()
        known.end_seen(began)
        if chain and not self._opener.opening and len(known.tail) >= shared.interval:
            self._opener.adopt_written_windows()
        return bool(chain)

    def _check_same_size(self, base: int, size: int) -> None:
        """The last known segment, listed again, must be the one known. Its key
        holds another object only if it was freed (below the floor: see
        :meth:`Checkpoints.below_log_start`), or if the root was restored or
        rewritten under this client: another size says so (another object of
        the same size goes unseen here; readers check append ids).

        Raises:
            SegmentNotFoundError: the key holds an object of another size.
        """
        known = self._known
        summary = known.summaries.get(base)
        if summary is None or summary.size == size or known.end <= known.floor:
            return
        raise SegmentNotFoundError(
            f"segment replaced: the log was known to reach offset {known.end} through a "
            f"segment of {summary.size} bytes, and its key now holds one of {size} bytes (the "
            "root was restored or rewritten under this client); connect again",
            key=self._shared.key(base),
        )

    def topic_announced(self, version: int) -> None:
        """A listing showed that version ``version`` of the topic is (being)
        claimed: learn it. More partitions change nothing here; a delete makes
        every call on this partition raise from now on."""
        shared = self._shared
        if shared.refresh_topic is not None and version > shared.topic.version:
            self._adopt(shared.refresh_topic(version))

    def check_alive(self) -> None:
        """An object the log knew of is gone. Raises UnknownTopicOrPartitionError
        if that is because the topic was deleted; returns if it was not (the
        caller then reports the loss)."""
        shared = self._shared
        if shared.refresh_topic is not None:
            self._adopt(shared.refresh_topic(shared.topic.version + 1))

    def _adopt(self, latest: Topic) -> None:
        shared = self._shared
        if latest.incarnation == shared.topic.incarnation:
            shared.learn_version(latest)  # a later version of the same topic: more partitions
            return
        if self._opener.opening:
            raise _Reincarnated(latest)
        raise UnknownTopicOrPartitionError(
            f"topic {shared.topic.name!r} was deleted and created anew: partition "
            f"{shared.partition} of the old topic is gone (look the partition up again)"
        )

    def learn_marks(self, found: Iterable[ObjectInfo]) -> None:
        """The log start and the compaction mark, raised to the newest marker
        of each among listed objects."""
        starts = [s for info in found if (s := parse_log_start_key(info.key)) is not None]
        marks = [m for info in found if (m := parse_compacted_mark_key(info.key)) is not None]
        with self._shared.lock:  # read-ahead threads learn them too
            self._known.learn_marks(starts, marks)

    def list_marks(self) -> int:
        """The floor (see :attr:`KnownLog.floor`), listing only the partition's
        markers (every key after the segments': they all start with a digit)."""
        shared = self._shared
        prefix = segment_prefix(shared.topic.prefix, shared.partition)
        self.learn_marks(
            shared.retry(lambda: list(shared.store.list(prefix, start_after=prefix + MARKS_AFTER)))
        )
        return self._known.floor

    def exists(self, key: str) -> bool:
        """Whether an object is there, by HEAD (a listing may miss it)."""
        try:
            self._shared.retry(lambda: self._shared.store.head(key))
        except FileNotFoundError:
            return False
        return True

    def chain_from(self, end: int, listed: list[tuple[int, int]]) -> list[SegmentSummary]:
        """The listed ``(base, size)`` segments that continue the chain from
        ``end``, up to the first gap. Headers are read ahead, up to
        :data:`_HEADER_READS` at once, and taken in order: a read past a gap
        is wasted, never used (a corrupt segment there is no error). A read
        under way has the segments of its range read whole instead
        (:mod:`arrowlog.partition.prefetch`)."""
        if not listed or listed[0][0] != end:
            return []
        # each with the next one's base: where it ends if the chain holds
        segments = [
            (base, size, listed[i + 1][0] if i + 1 < len(listed) else None)
            for i, (base, size) in enumerate(listed)
        ]
        # the read under way in this thread, whose range is fetched whole
        prefetch = self._shared.reading.mine()
        if len(segments) == 1:
            header = self._header_or_error(segments[0], prefetch)
            return self._alive(self._chained(end, listed, iter([header])))
        lane = Lane(min(len(segments), _HEADER_READS))
        pending: collections.deque[Future[SegmentHeader | BaseException]] = collections.deque()
        ahead = iter(segments)

        def in_order() -> Iterator[SegmentHeader | BaseException]:
            for segment in itertools.islice(ahead, 2 * _HEADER_READS):
                pending.append(lane.submit(self._header_or_error, segment, prefetch))
            while pending:
                # left in ``pending`` until done: an interrupt while waiting
                # leaves it for the ``finally`` below to wait for
                header = pending[0].result()
                pending.popleft()
                for segment in itertools.islice(ahead, 1):
                    pending.append(lane.submit(self._header_or_error, segment, prefetch))
                yield header

        try:
            return self._alive(self._chained(end, listed, in_order()))
        finally:
            for future in pending:
                future.cancel()
            # those under way keep or give back what the read reserved: before it ends
            concurrent.futures.wait(pending)

    def _alive(self, chained: tuple[list[SegmentSummary], bool]) -> list[SegmentSummary]:
        """The chain; if a key it listed was gone when its header was read,
        first whether the topic was deleted meanwhile (raises
        UnknownTopicOrPartitionError): a read whose listing fetched the
        segments before it whole (:mod:`arrowlog.partition.prefetch`) asks the
        store nothing more that would tell it, and must not return them as the
        whole log of a topic half deleted."""
        chain, gone = chained
        if gone:
            self.check_alive()
        return chain

    @staticmethod
    def _chained(
        end: int, listed: list[tuple[int, int]], headers: Iterator[SegmentHeader | BaseException]
    ) -> tuple[list[SegmentSummary], bool]:
        """The chain, and whether it ended at a key gone since the listing."""
        chain: list[SegmentSummary] = []
        for (base, size), header in zip(listed, headers, strict=False):
            if base != end:
                return chain, False  # a gap
            if isinstance(header, FileNotFoundError):
                return chain, True  # a key gone since the listing
            if isinstance(header, BaseException):
                raise header  # a corrupt segment in the chain is never skipped
            chain.append(SegmentSummary.of(header, size))
            end = header.next_offset
        return chain, False

    def _header_or_error(
        self, segment: tuple[int, int, int | None], prefetch: Prefetch | None
    ) -> SegmentHeader | BaseException:
        """The header of the listed segment ``(base, size, next listed base)``,
        or the error reading it; read whole for ``prefetch`` if in its range."""
        base, size, following = segment
        try:
            if prefetch is not None and prefetch.wants(
                base, following, size, self._known.log_start
            ):
                return self._read_whole(prefetch, base, size)
            return self.read_header(base, size)
        except (ArrowLogError, FileNotFoundError) as e:
            return e

    def _read_whole(self, prefetch: Prefetch, base: int, size: int) -> SegmentHeader:
        """The header of the segment at ``base`` from the whole of it, which is
        kept for the read under way."""
        shared = self._shared
        key = shared.key(base)
        try:
            data = shared.retry(lambda: shared.store.get(key))
            # a large segment decoded here, while other segments are still on
            # their way, as a read's own fetches are, and its header
            # (statistics too) parsed once for both; a small one only kept, for
            # the read's thread to check and decode as it does what its own
            # fetches bring (decoded_where_fetched); the read reports what
            # fails, as it would
            kept: Kept = data
            if decoded_where_fetched(size, shared.topic.config.compression):
                with contextlib.suppress(ArrowLogError):
                    kept = decode_segment(data, key=key, columns=prefetch.columns, stats=True)
            if isinstance(kept, tuple):
                header = self._checked_header(base, kept[0])
            else:
                header = self._header_in(base, data, None, None)  # checked by its own CRC
        except BaseException:
            prefetch.give_back(size)
            raise
        prefetch.keep(key, kept, size)
        return header

    def read_header(self, base: int, size: int | None = None) -> SegmentHeader:
        """The header of the segment at ``base``; given its ``size``, a segment
        large enough to be read by columns leaves its frame kept."""
        shared = self._shared
        key = shared.key(base)
        head, tag = shared.retry(lambda: get_range_tagged(shared.store, key, 0, HEAD_BYTES))
        return self._header_in(base, head, tag, size)

    def _header_in(
        self, base: int, head: bytes | memoryview, tag: str | None, size: int | None
    ) -> SegmentHeader:
        """The header of the segment at ``base`` from its first bytes ``head``
        (read again, longer, if its schema does not fit them)."""
        shared = self._shared
        key = shared.key(base)
        header = read_header(head, key=key)
        if isinstance(header, int):
            need = header
            head, tag = shared.retry(lambda: get_range_tagged(shared.store, key, 0, need))
            header = read_header(head, key=key)
            if isinstance(header, int):
                raise CorruptSegmentError("segment truncated inside its schema", key=key)
        self._checked_header(base, header)
        if size is not None and size >= COLUMN_READ_MIN_BYTES:
            HEADS.offer(key, header.append_id, head, tag)  # a column read needs no head read
        return header

    def _checked_header(self, base: int, header: SegmentHeader) -> SegmentHeader:
        """``header``, read from the segment key at ``base``, if it belongs there.

        Raises:
            CorruptSegmentError: it says it starts elsewhere, or is staged.
        """
        if header.base_offset != base or header.staged:
            raise CorruptSegmentError(
                f"segment says it starts at {header.base_offset}", key=self._shared.key(base)
            )
        return header

    def probe_tail(self) -> None:
        """Follow the chain past the listing, object by object: a listing racing
        appends may stop short of segments already written (a gap is "not
        visible yet" to it), but a read of the key at the known end sees any
        completed write. One request per segment the listing missed, and one
        when nothing follows (a ranged read of the header that also tells the
        object's size and time; a HEAD and a read where the store cannot).
        Where the end must cover everything
        acknowledged before (a transaction's bound, a snapshot's views), not
        just what a listing showed."""
        shared, known = self._shared, self._known
        while True:
            key = shared.key(known.end)
            began = _clock.elapsed()
            try:
                head, info, tag = shared.retry(
                    functools.partial(read_start, shared.store, key, HEAD_BYTES)
                )
            except FileNotFoundError:
                known.end_seen(began)
                return
            header = self._header_in(known.end, head, tag, info.size)
            known.learn_stored([info])
            known.extend_tail(SegmentSummary.of(header, info.size))
