"""The index a compacted object carries: the summary of every segment whose
offsets it covers (those whose records it left out too) and the checkpoint
windows they fall in. Its summaries are of the objects at segment keys, as
the checkpoints hold them: a commit object's with the batches it commits
(``refs``, each with its staged object's ``at``), so a window rebuilt from it
is the checkpoint's; the object's runs are per batch.

Checkpoints stay the log's index. This is their copy for the day one of them
is found corrupt after vacuum removed the segments it summarised: the window
is then rebuilt from the compacted object that holds it, exactly as the
checkpoint had it (column statistics aside), and a partition whose newest
checkpoints are corrupt opens through it (docs/protocol.md, "A corrupt
checkpoint after compaction").

It sits in the object's schema metadata under ``arrowlog.compacted_index``
(JSON carrying its own CRC32C, as checkpoints do), beside the compaction
table: the object's first bytes give it, without its records. Objects written
before it have none.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from arrowlog import _checked_json
from arrowlog.errors import CorruptObjectError, CorruptSegmentError
from arrowlog.format.checkpoint import SegmentSummary, chained, summaries_of, summary_columns
from arrowlog.format.control import ControlType
from arrowlog.format.segment import Compaction

INDEX_KEY = b"arrowlog.compacted_index"
INDEX_VERSION = 1
#: the version of an index holding a commit object: readers that predate
#: staged appends refuse it by this number (and pass the index over)
REFS_INDEX_VERSION = 2


@dataclass(frozen=True, kw_only=True)
class CompactedIndex:
    """The segments of ``[start, end)`` and the windows ``(start, end)`` they
    fall in, in offset order. The first window may start before ``start``
    (compaction starts at the first segment at or after the log start, which
    may lie inside a window); the last ends at ``end``."""

    start: int
    end: int
    windows: tuple[tuple[int, int], ...]
    segments: tuple[SegmentSummary, ...]

    def to_json(self) -> bytes:
        return _checked_json.dump(
            {
                "v": REFS_INDEX_VERSION if any(s.refs for s in self.segments) else INDEX_VERSION,
                "start": self.start,
                "end": self.end,
                "windows": [list(w) for w in self.windows],
                # without column statistics: a compacted object is fetched whole
                # or by columns, never segment by segment
                "segments": summary_columns(self.segments, stats=False),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes, *, key: str, start: int, end: int) -> CompactedIndex:
        """Parse and check the index of the object at ``key``, whose name says it
        covers ``[start, end)``.

        Raises:
            CorruptSegmentError: unreadable, checksum mismatch, or inconsistent.
        """
        try:
            fields = _checked_json.load(raw, key="index", error=CorruptObjectError)
        except CorruptObjectError as e:  # "index: checksum mismatch", with this key
            raise CorruptSegmentError(str(e), key=key) from e
        try:
            if fields.get("v") not in (INDEX_VERSION, REFS_INDEX_VERSION):
                raise ValueError(f"unsupported index version {fields.get('v')}")
            columns: dict[str, list[Any]] = fields["segments"]
            index = cls(
                start=int(fields["start"]),
                end=int(fields["end"]),
                windows=tuple((int(a), int(b)) for a, b in fields["windows"]),
                segments=summaries_of(columns),
            )
            index.check(key=key, start=start, end=end)
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptSegmentError(f"unreadable compacted object's index: {e}", key=key) from e
        return index

    def check(self, *, key: str, start: int, end: int) -> None:
        """That the segments chain from ``start`` to ``end`` and the windows
        from the first segment's to ``end``, each window's bounds a segment's.

        Raises:
            CorruptSegmentError: they do not.
        """
        s, w = self.segments, self.windows
        bounds = {x.base for x in s} | {end}
        if (
            (self.start, self.end) != (start, end)
            or not s
            or s[0].base != start
            or s[-1].end != end
            or not chained(s)
            or not w
            or w[0][0] > start
            or w[-1][1] != end
            or any(a >= b for a, b in w)
            or any(a[1] != b[0] for a, b in itertools.pairwise(w))
            or any(b not in bounds for _, b in w)
            or any(a not in bounds for a, _ in w[1:])
        ):
            raise CorruptSegmentError(
                f"compacted object's index does not describe [{start}, {end})", key=key
            )

    def batches(self) -> list[SegmentSummary]:
        """The batches of the index's objects, in offset order: a segment's,
        or those a commit object commits."""
        return [b for s in self.segments for b in s.batches()]

    def check_runs(self, table: Compaction, *, key: str) -> None:
        """That the index agrees with the object's compaction table: each run
        is a batch's (its offsets and timestamp), never a marker's, and a
        batch of plain records has its run (a transactional one may have
        none: aborted).

        Raises:
            CorruptSegmentError: they disagree.
        """
        runs = {base: (count, ts) for base, count, ts in table.runs}
        for s in self.batches():
            run = runs.pop(s.base, None)
            if run is None:
                agrees = s.transactional or s.control
            else:
                agrees = not s.control and run == (s.record_count, s.timestamp_ms)
            if not agrees:
                raise CorruptSegmentError(
                    f"compacted object's index and table disagree on the segment at {s.base}",
                    key=key,
                )
        if runs:
            raise CorruptSegmentError(
                f"compacted object's table holds runs its index lacks: {sorted(runs)}", key=key
            )

    def held_transactional(self, table: Compaction) -> list[tuple[SegmentSummary, bool]]:
        """The transactional segments whose records the object holds: they
        committed (compaction keeps nothing else), whatever the transaction
        the index gives them says. Each comes with whether the index's own
        markers agree: every marker of its transaction (producer and epoch)
        after it commits it, so a reader deciding by one shows it."""
        held = {base for base, _, _ in table.runs}
        agreed: dict[int, bool] = {}
        markers: dict[tuple[int, int], list[SegmentSummary]] = {}
        batches = self.batches()
        for s in reversed(batches):
            txn = (s.producer_id, s.producer_epoch)
            if s.control:
                markers.setdefault(txn, []).append(s)
            elif s.transactional and s.base in held:
                agreed[s.base] = all(
                    m.control_type == ControlType.COMMIT.value and s.base < m.txn_bound
                    for m in markers.get(txn, ())
                )
        return [(s, agreed[s.base]) for s in batches if s.base in agreed]

    def as_committed(self, bases: Collection[int]) -> CompactedIndex:
        """This index with the segments at ``bases`` (transactional ones whose
        records the object holds) as records of no transaction: visible to
        every reader, as the object's table says they are."""
        if not bases:
            return self

        def committed(s: SegmentSummary) -> SegmentSummary:
            if s.refs:
                return dataclasses.replace(s, refs=tuple(committed(r) for r in s.refs))
            return dataclasses.replace(s, transactional=False) if s.base in bases else s

        return dataclasses.replace(self, segments=tuple(committed(s) for s in self.segments))

    def window(self, start: int) -> tuple[int, tuple[SegmentSummary, ...]] | None:
        """The end of the window that starts at ``start`` and the segments of it
        this object covers (all of them, unless the window holds the first
        segment's offset and starts before it); None if no window here
        starts there."""
        for a, b in self.windows:
            if a == start:
                return b, self._between(a, b)
        return None

    def from_offset(self, offset: int) -> tuple[SegmentSummary, ...]:
        """The segments from the one starting at ``offset`` on; none if no
        segment here starts there."""
        i = bisect.bisect_left(self._bases, offset)
        if i == len(self.segments) or self.segments[i].base != offset:
            return ()
        return self.segments[i:]

    def _between(self, start: int, end: int) -> tuple[SegmentSummary, ...]:
        bases = self._bases
        return self.segments[bisect.bisect_left(bases, start) : bisect.bisect_left(bases, end)]

    @property
    def _bases(self) -> list[int]:
        return [s.base for s in self.segments]


def index_metadata(index: CompactedIndex) -> dict[bytes, bytes]:
    """The schema metadata entry of a compacted object's index."""
    return {INDEX_KEY: index.to_json()}


__all__ = ["INDEX_KEY", "REFS_INDEX_VERSION", "CompactedIndex", "index_metadata"]
