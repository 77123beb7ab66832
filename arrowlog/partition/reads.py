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

from arrowlog.checkpoint import PartitionState, SegmentSummary, advance
from arrowlog.config import Compression
from arrowlog.errors import OffsetOutOfRangeError, SegmentNotFoundError
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.fetch import check_segment, fetch_segment, get_segment, projected
from arrowlog.segment import SegmentHeader, column_indices, decode_segment
from arrowlog.stats import Predicate, check_predicates, may_match, row_filter
from arrowlog.storage import Blob
from arrowlog.topic import segment_key

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


#: what a read-ahead thread hands over: a segment decoded, or only its bytes
_Fetched = tuple[SegmentHeader, pa.RecordBatch] | Blob


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A segment known from the index: offsets ``[base, end)``, ``size`` bytes."""

    key: str
    base: int
    end: int
    size: int


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
            return self._end, advance(self._base_state, self._tail_summaries())

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
            yield from _window_refs(
                self._topic.prefix, self._partition, cp.bases,
                tuple(s.size for s in cp.segments), cp.end, offset,
            )  # fmt: skip
            offset = cp.end
        bases = [b for b, _ in self._tail]
        sizes = [s for _, s in self._tail]
        if bases and offset < self._end:
            yield from _window_refs(
                self._topic.prefix, self._partition, bases, sizes, self._end, offset
            )

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
        (predicates, see :mod:`arrowlog.stats`), segments whose statistics
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
                SegmentRef(
                    segment_key(self._topic.prefix, self._partition, s.base), s.base, s.end, s.size
                )
                for s in summaries
                if s.end > start
                and s.base < end
                and (s.control or may_match(s.stats, schema, checked, s.record_count))
            ]
        else:
            start, end, refs = self._plan(start, end)
        wanted = _with_filtered(columns, checked)
        fetch = functools.partial(self._fetch, columns=wanted)
        if skip is not None:
            refs = [ref for ref in refs if not skip(ref)]
        if checked:
            cut: Callable[
                [tuple[SegmentHeader, pa.RecordBatch], SegmentRef, int, int],
                tuple[SegmentHeader, pa.RecordBatch],
            ] = functools.partial(_cut_and_filter, columns=columns, where=checked)
        else:
            cut = _cut
        ahead = self._config.read_ahead
        if ahead is None:
            ahead = 1 if self._store.url.startswith(("file:", "memory:")) else 8
        if ahead == 1:
            for ref in refs:
                yield cut(fetch(ref), ref, start, end)
            return
        # ``ahead`` threads fetch; up to 4 * ahead segments (and QUEUED_BYTES) may
        # be fetched or queued before the reader takes them, so that one slow
        # request at the head does not leave threads idle behind it (measured:
        # 64 KiB segments on SeaweedFS read 15% faster than with ``ahead`` only).
        pool = ThreadPoolExecutor(max_workers=ahead, thread_name_prefix="arrowlog-read")
        pending: collections.deque[tuple[SegmentRef, Future[_Fetched]]] = collections.deque()
        queued = 0  # bytes of the segments in ``pending``
        try:
            queue = collections.deque(refs)
            while True:
                while queue and (
                    len(pending) < ahead
                    or (len(pending) < 4 * ahead and queued + queue[0].size <= QUEUED_BYTES)
                ):
                    ref = queue.popleft()
                    pending.append((ref, pool.submit(self._fetch_ahead, ref, wanted)))
                    queued += ref.size
                if not pending:
                    return
                ref, future = pending.popleft()
                queued -= ref.size
                yield cut(self._decoded(future.result(), ref, wanted), ref, start, end)
        finally:
            for _, future in pending:
                future.cancel()
            pool.shutdown(wait=False, cancel_futures=True)

    def _fetch(
        self, ref: SegmentRef, columns: Sequence[str] | None = None
    ) -> tuple[SegmentHeader, pa.RecordBatch]:
        try:
            return fetch_segment(
                self._store,
                ref.key,
                ref.base,
                ref.end,
                self._config.retry,
                self._topic.schema,
                columns=columns,
                size=ref.size,
            )
        except SegmentNotFoundError:
            self._missing(ref)
            raise

    def _missing(self, ref: SegmentRef) -> None:
        """A segment this object planned is gone: the topic was deleted (raises
        UnknownTopicOrPartitionError), or its records were (raises
        OffsetOutOfRangeError: vacuum removed it after its delay); returns if
        neither, and the caller reports the loss."""
        self._check_alive()
        log_start = self._list_log_start()
        if ref.end <= log_start:
            raise OffsetOutOfRangeError(
                f"{self._name}: offsets [{ref.base}, {ref.end}) were deleted since this read "
                f"was planned (the log starts at {log_start}): read from the log start"
            )

    def _fetch_ahead(self, ref: SegmentRef, columns: Sequence[str] | None) -> _Fetched:
        """In a read-ahead thread: a segment's checked batch, or only the bytes
        of a segment decoding to less than :data:`DECODE_AHEAD_MIN_BYTES`, which the
        reading thread checks and decodes (see :meth:`_decoded`)."""
        compressed = self._topic.config.compression is not Compression.NONE
        if ref.size * (COMPRESSED_RATIO if compressed else 1) >= DECODE_AHEAD_MIN_BYTES:
            return self._fetch(ref, columns)
        try:
            return get_segment(self._store, ref.key, ref.base, ref.end, self._config.retry)
        except SegmentNotFoundError:
            self._missing(ref)
            raise

    def _decoded(
        self,
        fetched: _Fetched,
        ref: SegmentRef,
        columns: Sequence[str] | None,
    ) -> tuple[SegmentHeader, pa.RecordBatch]:
        if isinstance(fetched, tuple):
            return fetched
        found = decode_segment(fetched, key=ref.key, columns=columns)
        return check_segment(found, ref.key, ref.base, ref.end, self._topic.schema, columns)

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
    prefix: str,
    partition: int,
    bases: list[int] | tuple[int, ...],
    sizes: list[int] | tuple[int, ...],
    end: int,
    offset: int,
) -> Iterator[SegmentRef]:
    first = max(0, bisect.bisect_right(bases, offset) - 1)
    for i in range(first, len(bases)):
        nxt = bases[i + 1] if i + 1 < len(bases) else end
        yield SegmentRef(segment_key(prefix, partition, bases[i]), bases[i], nxt, sizes[i])


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
