"""Reads: the end and start offsets, the partition state, and the segments of a
range, found through the checkpoint windows and the tail and fetched (checked
against what the index says they hold). See docs/protocol.md, "Reading".
"""

from __future__ import annotations

import bisect
import collections
import functools
from collections.abc import Callable, Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pyarrow as pa

from arrowlog.config import Compression
from arrowlog.errors import (
    ArrowLogError,
    CorruptCheckpointError,
    CorruptSegmentError,
    OffsetOutOfRangeError,
    SegmentNotFoundError,
)
from arrowlog.format.checkpoint import Checkpoint, PartitionState, SegmentSummary, advance
from arrowlog.format.segment import SegmentHeader, column_indices, decode_segment
from arrowlog.format.stats import Predicate, check_predicates, may_match, row_filter
from arrowlog.format.topic import (
    compacted_after,
    compacted_prefix,
    parse_compacted_key,
    segment_key,
)
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.fetch import (
    check_segment,
    fetch_compacted,
    fetch_segment,
    get_segment,
    projected,
)
from arrowlog.storage import Blob

#: Segments that decode to less than this are decoded by the thread that reads
#: them, not by the read-ahead threads that fetch them: a small segment's check
#: and decode are mostly Python, and eight threads taking turns at the GIL for
#: them cost more than one thread doing them all (measured: 64 KiB segments on
#: SeaweedFS, 20% less CPU and 8% faster). Larger ones are decoded where they
#: are fetched, in parallel: their CRC and decompression release the GIL.
DECODE_AHEAD_MIN_BYTES = 256 * 1024
#: what a compressed segment is assumed to decode to, per stored byte (ZSTD
#: shrinks the demo's events 16x, random floats hardly at all)
COMPRESSED_RATIO = 8


#: a segment's header and records (or some of them)
_Item = tuple[SegmentHeader, pa.RecordBatch]


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A segment known from the index: offsets ``[base, end)``, ``size`` bytes."""

    key: str
    base: int
    end: int
    size: int
    #: the append id its header holds, as the index says (None: not known):
    #: an object at the key with another is not this segment (see _identified)
    append_id: str | None = None
    #: whether a compacted object may leave its records out (aborted, a marker)
    droppable: bool = False


@dataclass(frozen=True, slots=True)
class CompactedRef:
    """A compacted object: the committed records of ``[start, end)``, ``size`` bytes."""

    key: str
    start: int
    end: int
    size: int


@dataclass(frozen=True, slots=True)
class _Compacted:
    """Segments read from the compacted object that holds their records."""

    obj: CompactedRef
    refs: tuple[SegmentRef, ...]

    @property
    def size(self) -> int:
        return self.obj.size


#: one fetch: a segment, or the segments one compacted object holds
_Unit = SegmentRef | _Compacted
#: what a read-ahead thread hands over: a segment's bytes (decoded by the
#: reading thread), or every segment of the unit decoded
_Fetched = Blob | list[tuple[SegmentRef, _Item]]


class Reads(Checkpoints):
    """Offsets, summaries and records of the log."""

    def end_offset(self, *, refresh: bool = True, complete: bool = False) -> int:
        """The high watermark: the offset the next append lands at. With
        ``complete``, at least every append acknowledged before the call (see
        :meth:`_probe_tail`); otherwise a listing may have missed the newest."""
        with self._lock:
            if not self._ensure_open() and refresh:
                self._sync_tail()
            if complete:
                self._probe_tail()
            return self._end

    def start_offset(self, *, refresh: bool = False) -> int:
        """The log start offset: the first offset still readable (records
        before it were deleted), as of this object's last listing (every sync:
        any read of new offsets, ``end_offset``), or listed now with
        ``refresh``."""
        with self._lock:
            if not self._ensure_open() and refresh:
                self._sync_tail()
            return self._log_start

    def state(self, *, refresh: bool = True, complete: bool = False) -> tuple[int, PartitionState]:
        """The high watermark and the partition state there: the latest batch of
        every producer, and the transactions with data but no marker. With
        ``complete``, as :meth:`end_offset`."""
        with self._lock:
            if not self._ensure_open() and refresh:
                self._sync_tail()
            if complete:
                self._probe_tail()
            state = advance(self._base_state, self._tail_summaries())
            state.date_producers(lambda entry: self._stored_by(entry.base_offset))
            return self._end, state

    def _adopt_written_windows(self) -> None:
        """Start the tail after the complete windows in it whose checkpoints
        the clients that appended them wrote, from the newest of them (its
        partition state, its log start), as a client opening now would. A
        client that only reads writes no checkpoint: without this its window
        start stays where it opened, its tail (every summary kept in memory,
        advanced through by each :meth:`state`) grows with the log, and what
        goes through the windows up to the window start (compaction planning)
        stops where it opened.

        One GET per window, in order (windows are written in order): the
        first one not there yet ends the search (a later sync that grows the
        tail asks again); a corrupt one is passed over for the next (a read
        of its window rebuilds it, with a warning); one that does not hold the
        segments of the tail is never adopted."""
        if not self._tail or self._tail[0][0] != self._window_start:
            return
        summaries = self._tail_summaries()
        at = 0  # the index in the tail where the window sought starts
        adopted: tuple[int, Checkpoint] | None = None
        while len(summaries) - at >= self._interval:
            try:
                cp = self._load_checkpoint(summaries[at].base)
            except FileNotFoundError:
                break
            except CorruptCheckpointError:
                at += self._interval
                continue
            except ArrowLogError:
                break  # the store is unavailable: the tail stays as it is
            held = summaries[at : at + len(cp.segments)]
            if [(s.base, s.end) for s in held] != [(s.base, s.end) for s in cp.segments] or any(
                s.append_id not in (None, t.append_id)
                for s, t in zip(cp.segments, held, strict=True)
            ):
                break
            at += len(cp.segments)
            adopted = (at, cp)
        if adopted is None:
            return
        past, cp = adopted
        for base, _ in self._tail[:past]:
            self._summaries.pop(base, None)
        del self._tail[:past]
        self._last_checkpoint = cp
        self._window_start = cp.end
        self._base_state = cp.state.copy()
        self._log_start = max(self._log_start, cp.log_start)
        self._stored = {b: ms for b, ms in self._stored.items() if b >= self._window_start}

    def _resolve_range(self, start: int | None, end: int | None) -> tuple[int, int]:
        if not self._ensure_open() and (end is None or end > self._end):
            self._sync_tail()
        if isinstance(end, int) and end > self._end:
            self._probe_tail()  # a known end past a listing gap is no error
        start = self._log_start if start is None else start
        end = self._end if end is None else end
        for name, value in (("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise OffsetOutOfRangeError(f"{name} offset must be an int, got {value!r}")
        if start < self._log_start:
            raise OffsetOutOfRangeError(
                f"{self._name}: offset {start} is below the log start {self._log_start}"
            )
        if end > self._end or start > end:
            raise OffsetOutOfRangeError(
                f"{self._name}: range [{start}, {end}) is outside the log "
                f"[{self._log_start}, {self._end})"
            )
        return start, end

    def segments(self, start: int | None = None, end: int | None = None) -> list[SegmentRef]:
        """The segments that hold offsets ``[start, end)`` (default: the whole log).

        Raises:
            OffsetOutOfRangeError: the range is not inside the log.
        """
        return self._plan(start, end)[2]

    def summaries(self, start: int | None = None, end: int | None = None) -> list[SegmentSummary]:
        """Header summaries of the segments holding ``[start, end)``: from
        checkpoints where they cover the range, else from the segments' heads."""
        with self._lock:
            start, end = self._resolve_range(start, end)
            out: list[SegmentSummary] = []
            if start >= end:
                return out
            for cp in self._checkpoints_from(start):
                out.extend(s for s in cp.segments if s.end > start and s.base < end)
            tail = [s for s in self._tail_summaries() if s.end > start and s.base < end]
            return out + tail

    def _plan(self, start: int | None, end: int | None) -> tuple[int, int, list[SegmentRef]]:
        with self._lock:
            start, end = self._resolve_range(start, end)
            refs: list[SegmentRef] = []
            if start < end:
                for ref in self._refs_from(start):
                    if ref.base >= end:
                        break
                    refs.append(ref)
            return start, end, refs

    def _refs_from(self, start: int) -> Iterator[SegmentRef]:
        """Segments in order, from the one holding ``start`` to the known end."""
        offset = start
        for cp in self._checkpoints_from(start):
            yield from _window_refs(self._topic.prefix, self._partition, cp.segments, offset)
            offset = cp.end
        if self._tail and offset < self._end:
            tail = self._tail_summaries()
            yield from _window_refs(self._topic.prefix, self._partition, tail, offset)

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
        schema = self._topic.schema
        if columns is not None:
            column_indices(schema, columns)
        checked = check_predicates(schema, where) if where else []
        if checked:  # the summaries give the statistics and the segments at once
            with self._lock:
                start, end = self._resolve_range(start, end)
            if summaries is None:
                summaries = self.summaries(start, end) if start < end else []
            refs = [
                _ref(self._topic.prefix, self._partition, s)
                for s in summaries
                if s.end > start
                and s.base < end
                and (s.control or may_match(s.stats, schema, checked, s.record_count))
            ]
        else:
            start, end, refs = self._plan(start, end)
        wanted = _with_filtered(columns, checked)
        if skip is not None:
            refs = [ref for ref in refs if not skip(ref)]
        if checked:
            cut: Callable[[_Item, SegmentRef, int, int], _Item] = functools.partial(
                _cut_and_filter, columns=columns, where=checked
            )
        else:
            cut = _cut
        units = self._units(refs)
        ahead = self._config.read_ahead
        if ahead is None:
            ahead = 1 if self._store.url.startswith(("file:", "memory:")) else 8
        if ahead == 1:
            for unit in units:
                for ref, item in self._fetch_unit(unit, wanted):
                    yield cut(item, ref, start, end)
            return
        # ``ahead`` threads fetch; up to 4 * ahead segments (and QUEUED_BYTES) may
        # be fetched or queued before the reader takes them, so that one slow
        # request at the head does not leave threads idle behind it (measured:
        # 64 KiB segments on SeaweedFS read 15% faster than with ``ahead`` only).
        pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="arrowlog-read")
        pending: collections.deque[tuple[_Unit, Future[_Fetched]]] = collections.deque()
        queued = 0  # bytes of the segments in ``pending``
        try:
            queue = collections.deque(units)
            while True:
                while queue and (
                    len(pending) < ahead
                    or (len(pending) < 4 * ahead and queued + queue[0].size <= QUEUED_BYTES)
                ):
                    unit = queue.popleft()
                    pending.append((unit, pool.submit(self._fetch_ahead, unit, wanted)))
                    queued += unit.size
                if not pending:
                    return
                unit, future = pending.popleft()
                queued -= unit.size
                for ref, item in self._decoded(future.result(), unit, wanted):
                    yield cut(item, ref, start, end)
        finally:
            for _, future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)

    def compacted_objects(self, start: int, end: int) -> list[CompactedRef]:
        """The compacted objects that hold the records of ``[start, end)``
        below the compaction mark, in offset order (see :meth:`_compacted_cover`);
        none, without a request, when the range lies past the mark."""
        with self._lock:
            if start >= min(end, self._compacted):
                return []
            return self._compacted_cover(start, min(end, self._compacted))

    def _units(self, refs: list[SegmentRef]) -> list[_Unit]:
        """``refs`` as fetches: those below the compaction mark that a
        compacted object holds are read from it, one fetch per object."""
        below = [ref for ref in refs if ref.end <= self._compacted]
        if not below:
            return list(refs)
        cover = self._compacted_cover(below[0].base, below[-1].end)
        units: list[_Unit] = []
        i = 0
        for ref in refs:
            while i < len(cover) and cover[i].end < ref.end:
                i += 1
            obj = cover[i] if i < len(cover) and ref.end <= self._compacted else None
            if obj is None or obj.start > ref.base:
                units.append(ref)
            elif units and isinstance(units[-1], _Compacted) and units[-1].obj == obj:
                units[-1] = _Compacted(obj, (*units[-1].refs, ref))
            else:
                units.append(_Compacted(obj, (ref,)))
        return units

    def _compacted_cover(self, start: int, end: int) -> list[CompactedRef]:
        """The compacted objects to read ``[start, end)`` from, in offset order:
        one LIST (keys name each object's end, then its start). Where objects
        overlap (compactors of different target sizes raced), the one listed
        first that holds an offset serves it."""
        prefix = compacted_prefix(self._topic.prefix, self._partition)
        after = compacted_after(self._topic.prefix, self._partition, start)

        def listing() -> list[CompactedRef]:
            out = []
            for info in self._store.list(prefix, start_after=after):
                parsed = parse_compacted_key(info.key)
                if parsed is not None:
                    out.append(CompactedRef(info.key, parsed[0], parsed[1], info.size))
                    if parsed[1] >= end:
                        break
            return out

        cover: list[CompactedRef] = []
        at = start
        for obj in self._retry(listing):
            if at >= end:
                break
            if obj.start <= at < obj.end:
                cover.append(obj)
                at = obj.end
        return cover

    def _fetch_unit(
        self, unit: _Unit, columns: Sequence[str] | None
    ) -> list[tuple[SegmentRef, _Item]]:
        if isinstance(unit, SegmentRef):
            return [(unit, self._fetch(unit, columns))]
        try:
            found = fetch_compacted(
                self._store, unit.obj.key, unit.obj.start, unit.obj.end, self._config.retry,
                self._topic.schema, columns=columns, size=unit.obj.size,
            )  # fmt: skip
        except SegmentNotFoundError:
            # removed with the records below the log start, after its delay
            self._check_alive()
            self._list_marks()
            if unit.obj.end <= self._log_start:
                raise OffsetOutOfRangeError(
                    f"{self._name}: offsets [{unit.obj.start}, {unit.obj.end}) were deleted "
                    f"since this read was planned (the log starts at {self._log_start}): "
                    "read from the log start"
                ) from None
            raise
        return list(_pieces(found, unit.obj.key, unit.refs))

    def _fetch(self, ref: SegmentRef, columns: Sequence[str] | None = None) -> _Item:
        try:
            item = fetch_segment(
                self._store,
                ref.key,
                ref.base,
                ref.end,
                self._config.retry,
                self._topic.schema,
                columns=columns,
                size=ref.size,
                append_id=ref.append_id,
            )
        except (SegmentNotFoundError, CorruptSegmentError):
            # gone, or a stray of other offsets at its freed key (see _identified)
            found = self._missing(ref, columns)
            if found is None:
                raise
            return found
        return self._identified(ref, item, columns)

    def _identified(self, ref: SegmentRef, item: _Item, columns: Sequence[str] | None) -> _Item:
        """``item``, if it is the segment the index names at ``ref.key`` (the same
        append id: identity, not luck). If not, the segment was removed since this read was
        planned and a late PUT took its freed key (docs/protocol.md, rule 3):
        the stray is never read as the log's records. Then, as for a removed
        segment: OffsetOutOfRangeError below the log start, the compacted
        object's records below the compaction mark.

        Raises:
            CorruptSegmentError: neither: an object that is not the log's.
        """
        if ref.append_id is None or item[0].append_id == ref.append_id:
            return item
        found = self._missing(ref, columns)
        if found is None:
            raise CorruptSegmentError(
                f"the object holds [{ref.base}, {ref.end}) of append {item[0].append_id}, "
                f"the index says of {ref.append_id}: not the log's segment",
                key=ref.key,
            )
        return found

    def _missing(self, ref: SegmentRef, columns: Sequence[str] | None) -> _Item | None:
        """A segment this object planned is gone. If it was compacted, its
        records are read from the compacted object (a read planned before its
        segments were removed); if the topic was deleted, raises
        UnknownTopicOrPartitionError; if its records were, raises
        OffsetOutOfRangeError (vacuum removed it after its delay); else
        returns None: the caller reports the loss."""
        self._check_alive()
        self._list_marks()
        if ref.end <= self._log_start:
            raise OffsetOutOfRangeError(
                f"{self._name}: offsets [{ref.base}, {ref.end}) were deleted since this read "
                f"was planned (the log starts at {self._log_start}): read from the log start"
            )
        if ref.end <= self._compacted:
            unit = self._units([ref])[0]
            if isinstance(unit, _Compacted):
                pieces = self._fetch_unit(unit, columns)
                if pieces:
                    return pieces[0][1]
                # its records were not kept (aborted, or a marker): none to read
                schema = projected(self._topic.schema, columns)
                empty = pa.RecordBatch.from_pylist([], schema=schema)
                return SegmentHeader(
                    base_offset=ref.base, record_count=0, timestamp_ms=0, append_id=""
                ), empty
        return None

    def _fetch_ahead(self, unit: _Unit, columns: Sequence[str] | None) -> _Fetched:
        """In a read-ahead thread: every segment of the unit checked and
        decoded, or only the bytes of a segment decoding to less than
        :data:`DECODE_AHEAD_MIN_BYTES`, which the reading thread checks and
        decodes (see :meth:`_decoded`)."""
        if isinstance(unit, _Compacted):
            return self._fetch_unit(unit, columns)
        compressed = self._topic.config.compression is not Compression.NONE
        if unit.size * (COMPRESSED_RATIO if compressed else 1) >= DECODE_AHEAD_MIN_BYTES:
            return self._fetch_unit(unit, columns)
        try:
            return get_segment(self._store, unit.key, unit.base, unit.end, self._config.retry)
        except SegmentNotFoundError:
            found = self._missing(unit, columns)
            if found is None:
                raise
            return [(unit, found)]

    def _decoded(
        self, fetched: _Fetched, unit: _Unit, columns: Sequence[str] | None
    ) -> list[tuple[SegmentRef, _Item]]:
        if isinstance(fetched, list):
            return fetched
        assert isinstance(unit, SegmentRef)
        try:
            found = decode_segment(fetched, key=unit.key, columns=columns)
            item = check_segment(found, unit.key, unit.base, unit.end, self._topic.schema, columns)
        except CorruptSegmentError:
            replaced = self._missing(unit, columns)  # a stray at a freed key?
            if replaced is None:
                raise
            return [(unit, replaced)]
        return [(unit, self._identified(unit, item, columns))]

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
        return pa.Table.from_batches(batches, schema=projected(self._topic.schema, columns))


#: beyond ``read_ahead`` segments, more are fetched ahead while they hold no
#: more than this many bytes
QUEUED_BYTES = 32 * 1024 * 1024


def _window_refs(
    prefix: str, partition: int, summaries: Sequence[SegmentSummary], offset: int
) -> Iterator[SegmentRef]:
    """The segments of one window (or of the tail) from the one holding ``offset``."""
    first = max(0, bisect.bisect_right([s.base for s in summaries], offset) - 1)
    for s in summaries[first:]:
        yield _ref(prefix, partition, s)


def _ref(prefix: str, partition: int, s: SegmentSummary) -> SegmentRef:
    key = segment_key(prefix, partition, s.base)
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


def _pieces(
    found: _Item, key: str, refs: Sequence[SegmentRef]
) -> Iterator[tuple[SegmentRef, _Item]]:
    """The records of each of ``refs`` in a compacted object, as read from its
    own segment; those it did not keep (aborted records, markers) are left out."""
    header, batch = found
    assert header.compaction is not None  # checked by fetch_compacted
    for ref in refs:
        run = header.compaction.run_of(ref.base, ref.end, droppable=ref.droppable, key=key)
        if run is None:
            continue  # aborted records or a marker: left out
        row, timestamp_ms = run
        count = ref.end - ref.base
        piece = SegmentHeader(
            base_offset=ref.base,
            record_count=count,
            timestamp_ms=timestamp_ms,
            append_id=header.append_id,
        )
        yield ref, (piece, batch.slice(row, count))
