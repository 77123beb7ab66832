"""The indexes of compacted objects: the segments a compacted object holds, as
the checkpoints of their windows summarised them, so that a window whose
segments vacuum removed can be rebuilt (its checkpoint corrupt), a partition
opened across them, and an append on a stale view decided. See
docs/protocol.md, "A corrupt checkpoint after compaction", and
:mod:`arrowlog.format.compacted_index`.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import NamedTuple

from arrowlog.errors import CorruptSegmentError
from arrowlog.format.checkpoint import Decision, OpenTxn, SegmentSummary
from arrowlog.format.compacted_index import INDEX_KEY, CompactedIndex
from arrowlog.format.segment import HEAD_BYTES, Compaction, head_length
from arrowlog.format.segment.header import head_schema, header_from_metadata
from arrowlog.format.topic import compacted_after, compacted_prefix, parse_compacted_key
from arrowlog.partition._base import Shared


class CompactedIndexes:
    """The part that reads compacted objects' indexes. It owns no fields and
    takes no lock: it reads only objects that never change."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared

    def indexed_window(self, start: int) -> tuple[int, tuple[SegmentSummary, ...]] | None:
        """The end of the window at ``start`` and its segments, from the index
        of the first compacted object listed that holds it (see
        :mod:`arrowlog.format.compacted_index`); None if none does. An object whose
        index cannot be read is passed over, with a warning."""
        for _, index in self.indexes_from(start, until=start):
            found = index.window(start) if index is not None else None
            if found is not None:
                return found
        return None

    def indexes_from(
        self, offset: int, until: int
    ) -> Iterator[tuple[_Object, CompactedIndex | None]]:
        """The compacted objects holding records at or past ``offset``, in
        offset order, up to the first that starts past ``until`` (one LIST),
        each with its index (None: written before objects had one, or
        unreadable, with a warning), read lazily: one ranged GET each (two
        for an index past the first ``HEAD_BYTES``)."""
        prefix = compacted_prefix(self._shared.topic.prefix, self._shared.partition)
        after = compacted_after(self._shared.topic.prefix, self._shared.partition, offset)

        def listing() -> list[_Object]:
            out = []
            for info in self._shared.store.list(prefix, start_after=after):
                span = parse_compacted_key(info.key)
                if span is not None:
                    out.append(_Object(info.key, *span))
                    if span[0] > until:
                        break
            return out

        for obj in self._shared.retry(listing):
            try:
                index, table = self._index_and_table(*obj)
                if index is not None:
                    index = self._as_the_table_says(index, table, obj.key)
            except FileNotFoundError:
                continue  # removed since the listing (below the log start)
            except CorruptSegmentError as e:
                warnings.warn(
                    f"compacted object unusable as an index: {e}", RuntimeWarning, stacklevel=2
                )
                index = None
            yield obj, index

    def _as_the_table_says(
        self, index: CompactedIndex, table: Compaction, key: str
    ) -> CompactedIndex:
        """``index``, with each transactional segment whose records the object
        holds, but whose transaction the coordinator (or a marker of it in the
        index) does not show committed for its producer, as a committed one (a
        record of no transaction), with a warning: the object keeps committed
        records only, so an index that gives such a segment to another
        transaction (undecided, aborted, unknown) is wrong, and believed, it
        would hide a committed record from read_committed readers. An index
        that agrees with its table reads as it is. Cost: one question to the
        coordinator per transaction whose records the object holds (decided
        answers are kept)."""
        decided: dict[tuple[str, int, int], bool] = {}

        def shown_committed(s: SegmentSummary) -> bool:
            txn = (s.transactional_id or "", s.producer_epoch, s.producer_id)
            if txn not in decided:
                decision = None
                if self._shared.decide is not None:
                    decision = self._shared.decide(
                        OpenTxn(s.producer_id, s.producer_epoch, txn[0], s.base)
                    )
                # forgotten: cleanup kept no entry, the compacted object decides
                decided[txn] = decision in (Decision.COMMITTED, Decision.FORGOTTEN)
            return decided[txn]

        denied = [
            s.base
            for s, markers_agree in index.held_transactional(table)
            if not (markers_agree and shown_committed(s))
        ]
        if denied:
            warnings.warn(
                f"compacted object's index unusable for the transactions of the segments at "
                f"{denied} ({key}): the object holds their records, so they committed, which "
                f"their transactions' outcomes do not say; read as committed",
                RuntimeWarning,
                stacklevel=3,
            )
        return index.as_committed(denied)

    def compacted_index(self, key: str, start: int, end: int) -> CompactedIndex | None:
        """The index of the compacted object at ``key`` (which names it as
        holding ``[start, end)``), from its first bytes, checked against its
        compaction table; None if it has none.

        Raises:
            CorruptSegmentError: its head is not that of the compacted object
                its key names, or its index is corrupt.
            FileNotFoundError: it is gone.
        """
        return self._index_and_table(key, start, end)[0]

    def _index_and_table(
        self, key: str, start: int, end: int
    ) -> tuple[CompactedIndex | None, Compaction]:
        """:meth:`compacted_index`, with the object's compaction table."""
        head = self._shared.retry(lambda: self._shared.store.get_range(key, 0, HEAD_BYTES))
        need = head_length(head, key)
        if need > len(head):
            head = self._shared.retry(lambda: self._shared.store.get_range(key, 0, need))
        schema = head_schema(head, key)
        if isinstance(schema, int):
            raise CorruptSegmentError("compacted object truncated inside its schema", key=key)
        metadata = schema.metadata or {}
        table = header_from_metadata(metadata, key, stats=False).compaction
        if table is None or (table.start, table.end) != (start, end):
            raise CorruptSegmentError(
                f"not the compacted object of [{start}, {end}) its key names", key=key
            )
        raw = metadata.get(INDEX_KEY)
        if raw is None:
            return None, table
        index = CompactedIndex.from_json(raw, key=key, start=start, end=end)
        index.check_runs(table, key=key)
        return index, table


class _Object(NamedTuple):
    """A compacted object, by its key: it holds the records of ``[start, end)``."""

    key: str
    start: int
    end: int
