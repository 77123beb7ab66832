"""Fetching what a read planned: a segment, or the segments one compacted
object holds, checked against what the index says they hold. A segment gone,
or replaced by a stray, since the read was planned is read from the compacted
object that holds its records, or reported as deleted (docs/protocol.md,
"Reading" and rule 3).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from arrowlog.errors import CorruptSegmentError, OffsetOutOfRangeError, SegmentNotFoundError
from arrowlog.format.segment import SegmentHeader, decode_segment
from arrowlog.format.topic import compacted_after, compacted_prefix, parse_compacted_key
from arrowlog.partition._base import Shared
from arrowlog.partition.fetch import (
    check_segment,
    decoded_where_fetched,
    fetch_compacted,
    fetch_segment,
    get_segment,
    projected,
)
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.prefetch import Kept
from arrowlog.storage import Blob

#: a segment's header and records (or some of them)
Item = tuple[SegmentHeader, pa.RecordBatch]


@dataclass(frozen=True, slots=True)
class SegmentRef:
    """A segment known from the index: offsets ``[base, end)``, ``size`` bytes."""

    key: str
    base: int
    end: int
    size: int
    #: the append id its header holds, as the index says (None: not known):
    #: an object at the key with another is not this segment (see
    #: Fetcher._identified)
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
Unit = SegmentRef | _Compacted
#: what a read-ahead thread hands over: a segment's bytes (decoded by the
#: reading thread), every segment of the unit decoded, or one segment decoded
#: and not yet checked (by the listing: :mod:`arrowlog.partition.prefetch`)
Fetched = Blob | list[tuple[SegmentRef, Item]] | Item


class Fetcher:
    """The reader's fetching part: what a read planned, as fetches (one per
    segment, or per compacted object), fetched and checked. It owns no
    fields and takes no lock: read-ahead threads call it, and it reads the
    floor (``KnownLog.log_start``, ``compacted``) without the lock, raising it
    through :meth:`Listing.learn_marks`, which takes it."""

    def __init__(self, shared: Shared, known: KnownLog, listing: Listing) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing

    def units(self, refs: list[SegmentRef]) -> list[Unit]:
        """``refs`` as fetches: those below the compaction mark that a
        compacted object holds are read from it, one fetch per object."""
        below = [ref for ref in refs if ref.end <= self._known.compacted]
        if not below:
            return list(refs)
        cover = self.compacted_cover(below[0].base, below[-1].end)
        units: list[Unit] = []
        i = 0
        for ref in refs:
            while i < len(cover) and cover[i].end < ref.end:
                i += 1
            obj = cover[i] if i < len(cover) and ref.end <= self._known.compacted else None
            if obj is None or obj.start > ref.base:
                units.append(ref)
            elif units and isinstance(units[-1], _Compacted) and units[-1].obj == obj:
                units[-1] = _Compacted(obj, (*units[-1].refs, ref))
            else:
                units.append(_Compacted(obj, (ref,)))
        return units

    def compacted_cover(self, start: int, end: int) -> list[CompactedRef]:
        """The compacted objects to read ``[start, end)`` from, in offset order:
        one LIST (keys name each object's end, then its start). Where objects
        overlap (compactors of different target sizes raced), the one listed
        first that holds an offset serves it. Offsets no object holds are
        read from their segments: those of an object that straddles the log
        start, before the first compacted object (compaction begins at the
        first object wholly past the log start)."""
        prefix = compacted_prefix(self._shared.topic.prefix, self._shared.partition)
        after = compacted_after(self._shared.topic.prefix, self._shared.partition, start)

        def listing() -> list[CompactedRef]:
            out = []
            for info in self._shared.store.list(prefix, start_after=after):
                parsed = parse_compacted_key(info.key)
                if parsed is not None:
                    out.append(CompactedRef(info.key, parsed[0], parsed[1], info.size))
                    if parsed[1] >= end:
                        break
            return out

        cover: list[CompactedRef] = []
        at = start
        for obj in self._shared.retry(listing):
            if at >= end:
                break
            if at < obj.end and obj.start < end:
                cover.append(obj)
                at = obj.end
        return cover

    def fetch_unit(
        self, unit: Unit, columns: Sequence[str] | None
    ) -> list[tuple[SegmentRef, Item]]:
        if isinstance(unit, SegmentRef):
            kept = self._prefetched(unit, columns)
            if kept is not None:
                return self.decoded(kept, unit, columns)
            return [(unit, self._fetch(unit, columns))]
        shared, obj = self._shared, unit.obj
        try:
            found = fetch_compacted(
                shared.store, obj.key, obj.start, obj.end, shared.config.retry,
                shared.topic.schema, columns=columns, size=obj.size,
            )  # fmt: skip
        except SegmentNotFoundError:
            # removed with the records below the log start, after its delay
            self._listing.check_alive()
            self._listing.list_marks()
            if unit.obj.end <= self._known.log_start:
                raise OffsetOutOfRangeError(
                    f"{self._shared.name}: offsets [{unit.obj.start}, {unit.obj.end}) were deleted "
                    f"since this read was planned (the log starts at {self._known.log_start}): "
                    "read from the log start"
                ) from None
            raise
        return list(_pieces(found, unit.obj.key, unit.refs))

    def _fetch(self, ref: SegmentRef, columns: Sequence[str] | None = None) -> Item:
        try:
            item = fetch_segment(
                self._shared.store,
                ref.key,
                ref.base,
                ref.end,
                self._shared.config.retry,
                self._shared.topic.schema,
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

    def _identified(self, ref: SegmentRef, item: Item, columns: Sequence[str] | None) -> Item:
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

    def _missing(self, ref: SegmentRef, columns: Sequence[str] | None) -> Item | None:
        """A segment this object planned is gone. If it was compacted, its
        records are read from the compacted object (a read planned before its
        segments were removed); if the topic was deleted, raises
        UnknownTopicOrPartitionError; if its records were, raises
        OffsetOutOfRangeError (vacuum removed it after its delay); else
        returns None: the caller reports the loss."""
        self._listing.check_alive()
        self._listing.list_marks()
        if ref.end <= self._known.log_start:
            raise OffsetOutOfRangeError(
                f"{self._shared.name}: offsets [{ref.base}, {ref.end}) were deleted since this "
                f"read was planned (the log starts at {self._known.log_start}): read from the log "
                "start"
            )
        if ref.end <= self._known.compacted:
            unit = self.units([ref])[0]
            if isinstance(unit, _Compacted):
                pieces = self.fetch_unit(unit, columns)
                if pieces:
                    return pieces[0][1]
                # its records were not kept (aborted, or a marker): none to read
                schema = projected(self._shared.topic.schema, columns)
                empty = pa.RecordBatch.from_pylist([], schema=schema)
                return SegmentHeader(
                    base_offset=ref.base, record_count=0, timestamp_ms=0, append_id=""
                ), empty
        return None

    def fetch_ahead(self, unit: Unit, columns: Sequence[str] | None) -> Fetched:
        """In a read-ahead thread: every segment of the unit checked and
        decoded, or only the bytes of a small segment, which the reading
        thread checks and decodes (see :meth:`decoded` and
        :func:`~arrowlog.partition.fetch.decoded_where_fetched`)."""
        if isinstance(unit, _Compacted):
            return self.fetch_unit(unit, columns)
        if decoded_where_fetched(unit.size, self._shared.topic.config.compression):
            return self.fetch_unit(unit, columns)
        kept = self._prefetched(unit, columns)
        if kept is not None:
            return kept
        try:
            return get_segment(
                self._shared.store, unit.key, unit.base, unit.end, self._shared.config.retry
            )
        except SegmentNotFoundError:
            found = self._missing(unit, columns)
            if found is None:
                raise
            return [(unit, found)]

    def all_kept(self, units: Sequence[Unit], columns: Sequence[str] | None) -> bool:
        """Whether the read's listing fetched every one of ``units`` (nothing
        left to fetch ahead: :mod:`arrowlog.partition.prefetch`)."""
        reading = self._shared.reading
        return all(isinstance(u, SegmentRef) and reading.holds(u.key, columns) for u in units)

    def _prefetched(self, ref: SegmentRef, columns: Sequence[str] | None) -> Kept | None:
        """The segment, if a read's listing fetched it whole
        (:mod:`arrowlog.partition.prefetch`)."""
        return self._shared.reading.take(ref.key, columns)

    def decoded(
        self, fetched: Fetched, unit: Unit, columns: Sequence[str] | None
    ) -> list[tuple[SegmentRef, Item]]:
        if isinstance(fetched, list):
            return fetched
        assert isinstance(unit, SegmentRef)
        try:
            if isinstance(fetched, tuple):
                found = fetched  # decoded where the listing fetched it
            else:
                found = decode_segment(fetched, key=unit.key, columns=columns)
            item = check_segment(
                found, unit.key, unit.base, unit.end, self._shared.topic.schema, columns
            )
        except CorruptSegmentError:
            replaced = self._missing(unit, columns)  # a stray at a freed key?
            if replaced is None:
                raise
            return [(unit, replaced)]
        return [(unit, self._identified(unit, item, columns))]


def _pieces(found: Item, key: str, refs: Sequence[SegmentRef]) -> Iterator[tuple[SegmentRef, Item]]:
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
