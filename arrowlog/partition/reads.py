"""Reads: the end and start offsets, the partition state, and the segments of a
range, found through the checkpoint windows and the tail and fetched (checked
against what the index says they hold: :mod:`arrowlog.partition.units`). See
docs/protocol.md, "Reading".
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import functools
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future

import pyarrow as pa

from arrowlog._threads import Lane
from arrowlog.errors import OffsetOutOfRangeError
from arrowlog.format.checkpoint import PartitionState, SegmentSummary
from arrowlog.format.segment import SegmentHeader, column_indices
from arrowlog.format.stats import Predicate, check_predicates, may_match, row_filter
from arrowlog.format.topic import batch_key
from arrowlog.partition._base import Shared
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.fetch import projected
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.units import CompactedRef, Fetched, Fetcher, Item, SegmentRef, Unit
from arrowlog.storage import at_memory_speed

#: how a segment read is cut to the range (and filtered): see :func:`_cut`
_Cut = Callable[[Item, SegmentRef, int, int], Item]


class Reads:
    """The reader part: offsets, summaries and records of the log, found
    through the checkpoint windows and the tail. It owns no fields; its
    public methods take the partition's lock while they read the state,
    not while segments are fetched."""

    def __init__(
        self,
        shared: Shared,
        known: KnownLog,
        listing: Listing,
        checkpoints: Checkpoints,
        fetcher: Fetcher,
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._fetcher = fetcher

    def end_offset(self, *, refresh: bool = True, complete: bool = False) -> int:
        """The high watermark: the offset the next append lands at. With
        ``complete``, at least every append acknowledged before the call (see
        :meth:`Listing.probe_tail`); otherwise a listing may have missed the newest."""
        with self._shared.lock:
            if not self._checkpoints.ensure_open() and refresh:
                self._listing.sync_tail()
            if complete:
                self._listing.probe_tail()
            return self._known.end

    def start_offset(self, *, refresh: bool = False) -> int:
        """The log start offset: the first offset still readable (records
        before it were deleted), as of this object's last listing (every sync:
        any read of new offsets, ``end_offset``), or listed now with
        ``refresh``."""
        with self._shared.lock:
            if not self._checkpoints.ensure_open() and refresh:
                self._listing.sync_tail()
            return self._known.log_start

    def state(self, *, refresh: bool = True, complete: bool = False) -> tuple[int, PartitionState]:
        """The high watermark and the partition state there: the latest batch of
        every producer, and the transactions with data but no marker. With
        ``complete``, as :meth:`end_offset`."""
        with self._shared.lock:
            if not self._checkpoints.ensure_open() and refresh:
                self._listing.sync_tail()
            if complete:
                self._listing.probe_tail()
            state = self._known.tail_state().copy()
            state.date_producers(lambda entry: self._known.stored_by(entry.base_offset))
            return self._known.end, state

    def _resolve_range(self, start: int | None, end: int | None) -> tuple[int, int]:
        if not self._checkpoints.ensure_open() and (end is None or end > self._known.end):
            self._listing.sync_tail()
        if isinstance(end, int) and end > self._known.end:
            self._listing.probe_tail()  # a known end past a listing gap is no error
        start = self._known.log_start if start is None else start
        end = self._known.end if end is None else end
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise OffsetOutOfRangeError(f"{name} offset must be an int, got {value!r}")
        if start < self._known.log_start:
            raise OffsetOutOfRangeError(
                f"{self._shared.name}: offset {start} is below the log start "
                f"{self._known.log_start}"
            )
        if end > self._known.end or start > end:
            raise OffsetOutOfRangeError(
                f"{self._shared.name}: range [{start}, {end}) is outside the log "
                f"[{self._known.log_start}, {self._known.end})"
            )
        return start, end

    def segments(self, start: int | None = None, end: int | None = None) -> list[SegmentRef]:
        """The segments that hold offsets ``[start, end)`` (default: the whole log).

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
        """
        return self._plan(start, end)[2]

    def summaries(self, start: int | None = None, end: int | None = None) -> list[SegmentSummary]:
        """Header summaries of the batches holding ``[start, end)``: from
        checkpoints where they cover the range, else from the segments' heads.
        A commit object gives the batches it commits, each with the staged
        data object that holds it (``at``), never itself."""
        start, end, out = self._objects(start, end)
        return [b for s in out for b in s.batches() if b.end > start and b.base < end]

    def objects(self, start: int | None = None, end: int | None = None) -> list[SegmentSummary]:
        """Summaries of the objects at segment keys holding ``[start, end)``,
        as checkpoints keep them: a segment, or a commit object with the
        batches it commits (``refs``)."""
        return self._objects(start, end)[2]

    def _objects(self, start: int | None, end: int | None) -> tuple[int, int, list[SegmentSummary]]:
        with self._shared.lock:
            start, end = self._resolve_range(start, end)
            out: list[SegmentSummary] = []
            if start < end:
                for s in self.objects_from(start, end):
                    if s.base >= end:
                        break
                    out.append(s)
            return start, end, out

    def objects_from(self, start: int, until: int | None = None) -> Iterator[SegmentSummary]:
        """The objects at segment keys, in offset order, from the one holding
        ``start`` to the known end, through the checkpoint windows (rebuilt
        where one is corrupt) and the tail; below the log start too, as long
        as the windows' checkpoints are there. Given ``until``, the caller
        stops before it: no window past it is fetched ahead. Runs with the
        partition's lock held by the caller.

        Raises:
            OffsetOutOfRangeError: a window below the log start is gone.
            SegmentNotFoundError: a corrupt window cannot be rebuilt.
        """
        for cp in self._checkpoints.checkpoints_from(start, until):
            yield from (s for s in cp.segments if s.end > start)
            if until is not None and cp.end >= until:
                return  # the next window holds nothing the caller wants
        yield from (s for s in self._known.tail_summaries() if s.end > start)

    def _plan(self, start: int | None, end: int | None) -> tuple[int, int, list[SegmentRef]]:
        with self._shared.lock:
            start, end = self._resolve_range(start, end)
            refs: list[SegmentRef] = []
            if start < end:
                for ref in self._refs_from(start, end):
                    if ref.base >= end:
                        break
                    refs.append(ref)
            return start, end, refs

    def _refs_from(self, start: int, until: int) -> Iterator[SegmentRef]:
        """Segments in order, from the one holding ``start`` to the known end
        (the caller stops before ``until``)."""
        offset = start
        for cp in self._checkpoints.checkpoints_from(start, until):
            yield from _window_refs(
                self._shared.topic.prefix, self._shared.partition, cp.segments, offset
            )
            offset = cp.end
            if offset >= until:
                return  # the next window holds nothing the caller wants
        if self._known.tail and offset < self._known.end:
            tail = self._known.tail_summaries()
            yield from _window_refs(self._shared.topic.prefix, self._shared.partition, tail, offset)

    def iter_segments(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        skip: Callable[[SegmentRef], bool] | None = None,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
        summaries: Sequence[SegmentSummary] | None = None,
    ) -> Generator[tuple[SegmentHeader, pa.RecordBatch], None, None]:
        """Stream ``(header, batch)`` for offsets ``[start, end)``: each batch is
        the part of its segment inside the range. Up to ``read_ahead`` segments
        are fetched in parallel; memory stays bounded however long the range.
        Segments for which ``skip`` is true are not fetched at all. With
        ``columns``, data batches hold only those columns, in that order (see
        :func:`fetch_segment`); control records keep theirs. With ``where``
        (predicates, see :mod:`arrowlog.format.stats`), segments whose statistics
        prove no row matches are not fetched, and data batches keep only the
        matching rows (their offsets then have gaps); ``summaries`` of the range,
        if the caller has them, spare reading them again.

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
            CorruptSegmentError: a segment fails its checksum.
            SegmentNotFoundError: a segment of the range is gone.
            UnknownColumnError: ``columns`` names a column the topic lacks
                (raised before anything is read).
        """
        schema = self._shared.topic.schema
        if columns is not None:
            column_indices(schema, columns)
        checked = check_predicates(schema, where) if where else []
        yield from self._iter_segments(start, end, skip, columns, checked, summaries)

    def reading(
        self,
        start: int | None,
        end: int | None,
        columns: Sequence[str] | None,
        where: Sequence[Predicate] | None,
    ) -> contextlib.AbstractContextManager[None]:
        """A read of ``[start, end)`` (of ``columns``) into one table under
        way: segments it fetches whole that a listing meanwhile finds are read
        whole by the listing and kept for it (:mod:`arrowlog.partition.prefetch`).
        Nothing for a filtered read (statistics may spare segments), and not
        for a stream, whose memory stays flat however long its range."""
        if where:
            return contextlib.nullcontext()
        return self._shared.reading.read(start, end, columns)

    def _iter_segments(
        self,
        start: int | None,
        end: int | None,
        skip: Callable[[SegmentRef], bool] | None,
        columns: Sequence[str] | None,
        checked: Sequence[Predicate],
        summaries: Sequence[SegmentSummary] | None,
    ) -> Generator[tuple[SegmentHeader, pa.RecordBatch], None, None]:
        schema = self._shared.topic.schema
        start, end, refs = self._planned(start, end, schema, checked, summaries)
        wanted = _with_filtered(columns, checked)
        if skip is not None:
            refs = [ref for ref in refs if not skip(ref)]
        if checked:
            cut: _Cut = functools.partial(_cut_and_filter, columns=columns, where=checked)
        else:
            cut = _cut
        units = self._fetcher.units(refs)
        ahead = self._shared.config.read_ahead
        if ahead is None:
            ahead = 1 if at_memory_speed(self._shared.store) else 8
        if ahead == 1 or (units and self._fetcher.all_kept(units, wanted)):
            for unit in units:
                for ref, item in self._fetcher.fetch_unit(unit, wanted):
                    yield cut(item, ref, start, end)
            return
        yield from self._read_ahead(units, wanted, ahead, cut, (start, end))

    def _planned(
        self,
        start: int | None,
        end: int | None,
        schema: pa.Schema,
        checked: Sequence[Predicate],
        summaries: Sequence[SegmentSummary] | None,
    ) -> tuple[int, int, list[SegmentRef]]:
        """The range and its segments, without those whose statistics prove
        no row matches the predicates ``checked``. Given ``summaries`` (a
        plan's, for this range), the segments are theirs: the checkpoint
        windows are not walked again."""
        if not checked and summaries is None:
            return self._plan(start, end)
        # the summaries give the statistics and the segments at once
        with self._shared.lock:
            start, end = self._resolve_range(start, end)
        if summaries is None:
            summaries = self.summaries(start, end) if start < end else []
        refs = [
            _ref(self._shared.topic.prefix, self._shared.partition, s)
            for s in summaries
            if s.end > start
            and s.base < end
            and (s.control or not checked or may_match(s.stats, schema, checked, s.record_count))
        ]
        return start, end, refs

    def _read_ahead(
        self,
        units: list[Unit],
        wanted: Sequence[str] | None,
        ahead: int,
        cut: _Cut,
        bounds: tuple[int, int],
    ) -> Generator[Item, None, None]:
        """The units fetched by ``ahead`` threads, in order, each segment
        ``cut`` to ``bounds``."""
        start, end = bounds
        # ``ahead`` threads fetch; up to 4 * ahead segments (and QUEUED_BYTES) may
        # be fetched or queued before the reader takes them, so that one slow
        # request at the head does not leave threads idle behind it (measured:
        # 64 KiB segments on SeaweedFS read 15% faster than with ``ahead`` only).
        lane = Lane(ahead)
        pending: collections.deque[tuple[Unit, Future[Fetched]]] = collections.deque()
        queued = 0  # bytes of the segments in ``pending``
        try:
            queue = collections.deque(units)
            while True:
                while queue and (
                    len(pending) < ahead
                    or (len(pending) < 4 * ahead and queued + queue[0].size <= QUEUED_BYTES)
                ):
                    unit = queue.popleft()
                    pending.append((unit, lane.submit(self._fetcher.fetch_ahead, unit, wanted)))
                    queued += unit.size
                if not pending:
                    return
                unit, future = pending.popleft()
                queued -= unit.size
                for ref, item in self._fetcher.decoded(future.result(), unit, wanted):
                    yield cut(item, ref, start, end)
        finally:
            for _, future in pending:
                future.cancel()

    def compacted_objects(self, start: int, end: int) -> list[CompactedRef]:
        """The compacted objects that hold the records of ``[start, end)``
        below the compaction mark, in offset order (see :meth:`Fetcher.compacted_cover`);
        none, without a request, when the range lies past the mark."""
        with self._shared.lock:
            if start >= min(end, self._known.compacted):
                return []
            return self._fetcher.compacted_cover(start, min(end, self._known.compacted))

    def iter_batches(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> Generator[pa.RecordBatch, None, None]:
        """Stream the records of ``[start, end)`` as record batches, every record
        as written (read_uncommitted; control records left out); with
        ``columns``, only those; with ``where``, only the rows that match."""
        for header, batch in self.iter_segments(start, end, columns=columns, where=where):
            if not header.identity.control:
                yield batch

    def read(
        self,
        start: int | None = None,
        end: int | None = None,
        *,
        columns: Sequence[str] | None = None,
        where: Sequence[Predicate] | None = None,
    ) -> pa.Table:
        """The records of ``[start, end)`` as one table (read_uncommitted); with
        ``columns``, only those; with ``where``, only the rows that match. From
        the log start when ``start`` is None, even if records were deleted
        since this object last listed."""
        try:
            # one table holds every segment: its listing may fetch them whole
            with self.reading(start, end, columns, where):
                batches = list(self.iter_batches(start, end, columns=columns, where=where))
        except OffsetOutOfRangeError:
            if start is not None:
                raise
            # the log start moved past the one this object knew: from the new one
            batches = list(
                self.iter_batches(
                    self.start_offset(refresh=True), end, columns=columns, where=where
                )
            )
        return pa.Table.from_batches(batches, schema=projected(self._shared.topic.schema, columns))


#: beyond ``read_ahead`` segments, more are fetched ahead while they hold no
#: more than this many bytes
QUEUED_BYTES = 32 * 1024 * 1024


def _window_refs(
    prefix: str, partition: int, summaries: Sequence[SegmentSummary], offset: int
) -> Iterator[SegmentRef]:
    """The segments of one window (or of the tail) from the one holding ``offset``."""
    first = max(0, bisect.bisect_right([s.base for s in summaries], offset) - 1)
    for s in summaries[first:]:
        for batch in s.batches():
            if batch.end > offset:
                yield _ref(prefix, partition, batch)


def _ref(prefix: str, partition: int, s: SegmentSummary) -> SegmentRef:
    key = batch_key(prefix, partition, s.base, s.at)
    droppable = s.transactional or s.control
    return SegmentRef(key, s.base, s.end, s.size, s.append_id, droppable)


def _with_filtered(
    columns: Sequence[str] | None, where: Sequence[Predicate]
) -> Sequence[str] | None:
    """The columns to fetch: those asked for, then those the filter needs."""
    if columns is None or not where:
        return columns
    return [*columns, *dict.fromkeys(c for c, _, _ in where if c not in columns)]


def _cut_and_filter(
    item: tuple[SegmentHeader, pa.RecordBatch],
    ref: SegmentRef,
    start: int,
    end: int,
    *,
    columns: Sequence[str] | None,
    where: Sequence[Predicate],
) -> tuple[SegmentHeader, pa.RecordBatch]:
    header, batch = _cut(item, ref, start, end)
    if header.identity.control:
        return header, batch
    batch = row_filter(batch, where)
    if columns is not None and batch.num_columns != len(columns):
        batch = batch.select(list(columns))
    return header, batch


def _cut(
    item: tuple[SegmentHeader, pa.RecordBatch], ref: SegmentRef, start: int, end: int
) -> tuple[SegmentHeader, pa.RecordBatch]:
    header, batch = item
    lo = max(start, ref.base) - ref.base
    hi = min(end, ref.end) - ref.base
    if lo == 0 and hi == batch.num_rows:
        return header, batch
    return header, batch.slice(lo, hi - lo)
