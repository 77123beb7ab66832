"""Compaction: rewriting committed, decided ranges of small segments into
large compacted objects, and marking how far that went. See docs/protocol.md,
"Compacting small segments"; the reading of compacted objects is in
:mod:`arrowlog.partition.units`, their removal in :mod:`arrowlog.partition.retention`.
"""

from __future__ import annotations

import json
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from arrowlog.errors import CorruptCheckpointError, CorruptSegmentError
from arrowlog.format.checkpoint import SegmentSummary
from arrowlog.format.compacted_index import CompactedIndex, index_metadata
from arrowlog.format.segment import Compaction, SegmentHeader, encode
from arrowlog.format.topic import (
    checkpoint_key,
    checkpoint_prefix,
    compacted_key,
    compacted_mark_key,
    parse_checkpoint_key,
    parse_segment_key,
)
from arrowlog.partition._base import Shared
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.fetch import fetch_compacted
from arrowlog.partition.indexes import CompactedIndexes
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.reads import Reads
from arrowlog.partition.retention import Removal
from arrowlog.partition.units import CompactedRef


@dataclass(frozen=True, slots=True)
class CompactionRange:
    """Offsets ``[start, end)`` to compact: whole checkpoint windows (the
    first may start inside one), ``segments`` objects at segment keys
    (segments and commit objects) and the ``staged`` data objects their
    commits name, of ``size`` bytes in all; ``windows`` are those windows'
    ``(start, end)``, and ``objects`` the summaries of those objects, as the
    checkpoints hold them (the compacted object's index)."""

    start: int
    end: int
    segments: int
    size: int
    windows: tuple[tuple[int, int], ...] = ()
    staged: int = 0
    objects: tuple[SegmentSummary, ...] = ()


class Compactions:
    """The compaction part: planning compaction, writing a compacted object
    and its mark, and keeping the segments whose compacted copy does not
    read back. It owns no fields; it raises the compaction mark of the state
    part under the partition's lock."""

    def __init__(
        self,
        shared: Shared,
        known: KnownLog,
        listing: Listing,
        checkpoints: Checkpoints,
        indexes: CompactedIndexes,
        reads: Reads,
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._indexes = indexes
        self._reads = reads

    @property
    def compacted_through(self) -> int:
        """The compaction mark as of this object's last listing: the records
        below it are in compacted objects."""
        return self._known.compacted

    def plan_compaction(self, target_bytes: int, stable: int) -> list[CompactionRange]:
        """The next ranges to compact, in order: from the compaction mark (or
        the first segment at or after the log start) to the end of the last
        checkpoint window before the newest one, and not past ``stable`` (the
        last stable offset: every transaction below it is decided). Each range
        is whole windows of about ``target_bytes``, the last one smaller.
        Cost: a sync, a LIST and a GET of the newest checkpoint, and a GET of
        each window's checkpoint not already parsed. The windows reach as far
        as a fresh client's however long this object lives: its syncs start
        its tail after the windows others checkpointed (see
        ``Checkpoints.adopt_written_windows``)."""
        with self._shared.lock:
            if not self._checkpoints.ensure_open():
                self._listing.sync_tail()
            newest = self._checkpoints.newest_checkpoint()
            if newest is None:
                return []
            if newest.start >= self._known.window_start:
                # written since the sync looked (or then not yet): the windows
                # are walked up to this object's window start
                self._checkpoints.adopt_written_windows()
            # The newest window stays as it is: vacuum removes only segments
            # ending at or before the newest checkpoint's last one, and writers
            # reopen from it.
            horizon = min(newest.start, stable)
            start = max(self._known.compacted, self._known.log_start)
            ranges: list[CompactionRange] = []
            if start >= horizon:
                return ranges
            lo: int | None = None
            size = 0
            end = start  # where the last window taken ends
            windows: list[tuple[int, int]] = []
            objects: list[SegmentSummary] = []
            for cp in self._checkpoints.checkpoints_from(start):
                if cp.end > horizon:
                    break
                end = cp.end
                # from the first segment that starts at or after ``start``: one
                # holding the log start inside it is never compacted
                for s in cp.segments:
                    if s.base >= start:
                        lo = s.base if lo is None else lo
                        objects.append(s)
                        size += s.size + sum(r.size for r in s.refs)
                if lo is not None:
                    windows.append((cp.start, cp.end))
                if lo is not None and size >= target_bytes:
                    ranges.append(_range(lo, end, size, windows, objects))
                    lo, size, windows, objects = None, 0, [], []
            if lo is not None and objects:
                ranges.append(_range(lo, end, size, windows, objects))
            return ranges

    def write_compacted(
        self,
        start: int,
        end: int,
        batch: pa.RecordBatch,
        runs: list[tuple[int, int, int]],
        index: CompactedIndex,
    ) -> str:
        """Write the compacted object of ``[start, end)``: ``batch`` holds the
        records of ``runs`` (``(base, count, timestamp_ms)`` of each segment
        kept, in order), ``index`` describes every segment of the range (see
        :mod:`arrowlog.format.compacted_index`); then the compaction mark at ``end``.
        Both with put-if-absent: a compactor that wrote the same range first
        wins, and what it wrote holds the same records. Returns the object's
        key.

        Raises:
            CorruptSegmentError: ``index`` does not describe ``[start, end)`` or
                disagrees with ``runs`` (nothing is written).
        """
        key = compacted_key(self._shared.topic.prefix, self._shared.partition, start, end)
        table = Compaction(start, end, tuple(runs))
        index.check(key=key, start=start, end=end)
        index.check_runs(table, key=key)
        header = SegmentHeader(
            base_offset=start,
            record_count=batch.num_rows,
            timestamp_ms=int(time.time() * 1000),
            append_id=f"compact-{uuid.uuid4().hex}",
            compaction=table,
        )
        # beside the topic's own metadata: arrowlog's keys are reserved in a
        # topic's schema, and readers leave them out of what they return
        batch = batch.replace_schema_metadata(
            {**(batch.schema.metadata or {}), **index_metadata(index)}
        )
        data, _ = encode(batch, header, self._shared.topic.config.compression, stats=True)
        mark = compacted_mark_key(self._shared.topic.prefix, self._shared.partition, end)
        body = json.dumps({"compacted_through": end}).encode()
        self._shared.put_once(key, data)  # or by another compactor, the same records
        self._shared.put_once(mark, body)
        with self._shared.lock:
            self._known.learn_marks([], [end])
        return key

    def keep_unreadable_copies(self, removals: list[Removal]) -> list[Removal]:
        """``removals`` (as :meth:`Retention.plan_vacuum` orders them) without the
        segments at or past the log start from the first one that is the only
        readable copy of its records or of its window: its compacted object
        does not read back whole (its checksum, its table, its index), or the
        object has no index (written before indexes) and the checkpoint of the
        window does not read (a corrupt checkpoint of a window is rebuilt from
        its segments, or from its object's index). Those stay, with a warning;
        the segments after them stay too (removals go in offset order). Cost:
        one GET of each compacted object whose segments would go (once: after
        the removal there is nothing left to check); for an object without an
        index, one LIST and a GET of each window's checkpoint not already read.
        """
        with self._shared.lock:
            log_start, mark = self._known.log_start, self._known.compacted
        bases = [b for r in removals if (b := _segment_of(r)) is not None and b >= log_start]
        if not bases:
            return removals
        cover = self._reads.compacted_objects(min(bases), mark)
        held = {obj.key: [b for b in bases if obj.start <= b < obj.end] for obj in cover}
        stay_from: dict[str, int | None] = {}
        out: list[Removal] = []
        kept = False
        for removal in removals:
            base = _segment_of(removal)  # a staged object goes or stays with its commit
            if base is not None and base >= log_start and not kept:
                obj = next((o for o in cover if o.start <= base < o.end), None)
                if obj is not None and obj.key not in stay_from:
                    stay_from[obj.key] = self._only_copies_from(obj, held[obj.key])
                stay = None if obj is None else stay_from[obj.key]
                kept = obj is None or (stay is not None and base >= stay)
            if base is None or base < log_start or not kept:
                out.append(removal)
        return out

    def _only_copies_from(self, obj: CompactedRef, bases: list[int]) -> int | None:
        """Where the segments at ``bases`` (of ``obj``'s range) start to be the
        only readable copy of their records or windows; None if they are not."""
        read = self._read_back(obj)
        if read == "unreadable":
            return obj.start
        if read == "indexed":
            return None  # the index rebuilds a window whose checkpoint is corrupt
        return self._first_unreadable_window(obj, bases[0], bases[-1])

    def _first_unreadable_window(self, obj: CompactedRef, lo: int, hi: int) -> int | None:
        """The start of the first checkpoint window holding an offset of
        ``[lo, hi]`` whose checkpoint does not read (corrupt or gone); None
        if every one reads. ``obj``, which holds their records, has no index:
        without its segments such a window could not be rebuilt, so they stay,
        with a warning naming it."""
        prefix = checkpoint_prefix(self._shared.topic.prefix, self._shared.partition)
        # keys are inverted: the first at or after lo's is the window holding lo
        after = checkpoint_key(self._shared.topic.prefix, self._shared.partition, lo + 1)
        found = self._shared.retry(
            lambda: list(self._shared.store.list(prefix, start_after=after, limit=1))
        )
        start = parse_checkpoint_key(found[0].key) if found else None
        if start is None:
            _warn_kept(obj, lo, "no checkpoint listed holds it")
            return lo
        while start <= hi:
            try:
                with self._shared.lock:
                    start = self._checkpoints.stored_checkpoint(start).end
            except (CorruptCheckpointError, FileNotFoundError) as e:
                _warn_kept(obj, start, "gone" if isinstance(e, FileNotFoundError) else str(e))
                return start
        return None

    def _read_back(self, obj: CompactedRef) -> Literal["unreadable", "indexed", "unindexed"]:
        """Whether a compacted object reads back whole, with a readable index
        if it has one (objects written before indexes have none)."""
        try:
            shared = self._shared
            fetch_compacted(shared.store, obj.key, obj.start, obj.end, shared.config.retry,
                            shared.topic.schema)  # fmt: skip
            index = self._indexes.compacted_index(obj.key, obj.start, obj.end)
        except (CorruptSegmentError, FileNotFoundError) as e:
            warnings.warn(
                f"{obj.key}: compacted object unreadable, its segments stay: {e}",
                RuntimeWarning,
                stacklevel=4,
            )
            return "unreadable"
        return "unindexed" if index is None else "indexed"


def _range(
    lo: int, end: int, size: int, windows: list[tuple[int, int]], objects: list[SegmentSummary]
) -> CompactionRange:
    staged = sum(len(s.refs) for s in objects)
    return CompactionRange(lo, end, len(objects), size, tuple(windows), staged, tuple(objects))


def _segment_of(removal: Removal) -> int | None:
    """The base of the segment a removal is of: its own, or for a staged data
    object, that of the commit object naming it."""
    return removal.commit if removal.commit is not None else parse_segment_key(removal.key)


def _warn_kept(obj: CompactedRef, window: int, why: str) -> None:
    warnings.warn(
        f"checkpoint window at {window} unreadable ({why}) and {obj.key}, which holds its "
        f"records, has no index to rebuild it from: its segments stay",
        RuntimeWarning,
        stacklevel=5,
    )
