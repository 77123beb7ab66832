"""Checkpoints: opening a partition from the newest usable one, loading (or
rebuilding) the window that holds an offset, writing every window that is due.
A checkpoint only saves work: a corrupt one is skipped for its segments, or,
once vacuum removed them, for the index of the compacted object holding them.
See docs/protocol.md, "A corrupt checkpoint after compaction".
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from arrowlog._clock import CLOCK_GRAIN_MS
from arrowlog.errors import (
    ArrowLogError,
    CorruptCheckpointError,
    CorruptSegmentError,
    OffsetOutOfRangeError,
    SegmentNotFoundError,
    TransientStoreError,
)
from arrowlog.format.checkpoint import (
    Checkpoint,
    Decision,
    OpenTxn,
    PartitionState,
    SegmentSummary,
    advance,
    chained,
)
from arrowlog.format.compacted_index import INDEX_KEY, CompactedIndex
from arrowlog.format.segment import HEAD_BYTES, Compaction, head_length
from arrowlog.format.segment.header import head_schema, header_from_metadata
from arrowlog.format.topic import (
    Topic,
    checkpoint_key,
    checkpoint_prefix,
    compacted_after,
    compacted_prefix,
    parse_checkpoint_key,
    parse_compacted_key,
    parse_segment_key,
    segment_prefix,
)
from arrowlog.partition._base import _Reincarnated, _Stale
from arrowlog.partition.listing import Listing
from arrowlog.storage import ObjectInfo

#: How long a producer's latest batch is remembered after it was written, on the
#: store's clock (Kafka's producer.id.expiration.ms is a day; transactional ids
#: live 7 days).
PRODUCER_STATE_RETENTION_MS = 7 * 24 * 3600 * 1000


#: openings in a row that may find their chain removed under them by vacuum
#: before one gives up (the newest checkpoint is then unusable)
_STALE_OPENS = 5

#: checkpoints a partition keeps parsed (about 100 segment summaries each)
CHECKPOINT_CACHE = 64


class Checkpoints(Listing):
    """Opening from checkpoints, reading their windows, writing due ones."""

    def _ensure_open(self) -> bool:
        """Open the partition if not yet open; True if it was opened just now
        (and so is fresh: no need to list the tail again)."""
        if self._opened:
            return False
        self._open()
        return True

    def opened_topic(self) -> Topic:
        """The topic this partition belongs to, from a listing: opening lists
        the partition, which shows whether the topic was deleted (raises) or
        created anew (this object then opens the new topic's partition, if
        it knew nothing of the old one). Before it is open, a partition knows
        its topic only as first looked up, which may be a deleted incarnation.

        Raises:
            UnknownTopicOrPartitionError: the topic was deleted.
        """
        with self._lock:
            self._ensure_open()
            return self._topic

    def _open(self) -> None:
        """Read the newest usable checkpoint, then list the segments after it.
        If the listing shows the topic was deleted and created anew (and still
        has this partition), open the new topic's partition instead: nothing of
        the old one was known yet."""
        self._opening = True
        stale = 0
        try:
            while True:
                try:
                    return self._open_once()
                except _Reincarnated as e:
                    e.topic.check_partition(self._partition)
                    self._topic = e.topic
                    self._interval = e.topic.config.checkpoint_interval
                except _Stale:
                    # vacuum removed the chain being opened: a newer checkpoint
                    # is there now, unless the newest is unusable
                    stale += 1
                    if stale >= _STALE_OPENS:
                        self._opened = False
                        raise SegmentNotFoundError(
                            f"cannot open {self._name}: records before {self._log_start} were "
                            f"deleted and the chain from the newest usable checkpoint ends at "
                            f"{self._end}",
                            key=self._key(self._end),
                        ) from None
        finally:
            self._opening = False

    def _reopen(self) -> None:
        self._open()

    def _below_log_start(self) -> bool:
        """The chain ends below the floor (see Listing._below_log_start). While
        opening, below the compaction mark, it goes on through the indexes of
        the compacted objects instead: they summarise the removed segments
        exactly as the checkpoints did, and end at the mark, whose key was
        never freed. That is how a partition opens from a checkpoint older
        than the newest (those after it corrupt) once vacuum removed the
        segments between them; the partition state is advanced through the
        same summaries, so it is exact."""
        if self._opening and self._end < self._compacted and self._bridge():
            self._sync_tail()
            return True
        return super()._below_log_start()

    def _bridge(self) -> bool:
        """Extend the tail from its end towards the compaction mark with the
        summaries that compacted objects' indexes hold; True if it grew."""
        grew = False
        for _, index in self._indexes_from(self._end, until=self._compacted):
            held = index.from_offset(self._end) if index is not None else ()
            for summary in held:
                if summary.end > self._compacted:
                    break
                self._extend_tail(summary)
                grew = True
        return grew

    def _open_once(self) -> None:
        self._opened = False
        self._tail = []
        self._summaries = {}
        self._last_checkpoint = None
        self._last_base = None
        self._base_state = PartitionState()
        self._window_start = self._end = self._log_start = self._compacted = 0
        self._stored = {}
        cp = self._newest_checkpoint()
        if cp is not None:
            self._last_checkpoint = cp
            self._log_start = cp.log_start
            self._window_start = self._end = cp.end
            self._base_state = cp.state.copy()
            self._last_base = cp.segments[-1].base
        self._opened = True
        self._sync_tail()

    def _newest_checkpoint(self) -> Checkpoint | None:
        """The newest checkpoint that reads back intact; None if there is none.

        A corrupt one is skipped with a warning, for the next older one (and
        then the log start): a checkpoint only saves work. The segments it
        summarised are read instead, each checked by its own checksums. Each
        checkpoint skipped costs one more LIST and GET.
        """
        prefix = checkpoint_prefix(self._topic.prefix, self._partition)

        def first_after(key: str | None) -> list[ObjectInfo]:
            return list(self._store.list(prefix, start_after=key, limit=1))

        after: str | None = None
        while found := self._retry(functools.partial(first_after, after)):
            after = found[0].key
            start = parse_checkpoint_key(after)
            try:
                if start is None:
                    raise CorruptCheckpointError("not a checkpoint name", key=after)
                return self._load_checkpoint(start)
            except (CorruptCheckpointError, FileNotFoundError) as e:
                if isinstance(e, FileNotFoundError):
                    self._check_alive()  # listed, then gone: deleted with its topic?
                _warn_skipped(after, e, "opening from an older one or the log start")
        return None

    def _load_checkpoint(self, start: int) -> Checkpoint:
        """A checkpoint, from the store or as read before: one is written once
        (put-if-absent) and never changes, so each long read does not fetch
        every window again (a topic created anew has keys of its own)."""
        key = checkpoint_key(self._topic.prefix, self._partition, start)
        cached = self._checkpoint_cache.get(key)
        if cached is not None:
            self._checkpoint_cache.move_to_end(key)
            return cached
        raw = self._retry(lambda: self._store.get(key))
        cp = Checkpoint.from_json(raw, key=key, start=start)
        self._checkpoint_cache[key] = cp
        if len(self._checkpoint_cache) > CHECKPOINT_CACHE:
            self._checkpoint_cache.popitem(last=False)
        return cp

    def _load_window(self, start: int, reading_from: int) -> Checkpoint:
        """The checkpoint of the window starting at ``start``, for a read from
        offset ``reading_from``. If it is gone, the log start is listed again:
        vacuum removes the windows below it, and a read from below it raises
        OffsetOutOfRangeError. Otherwise, if it is corrupt (or gone), the window
        is rebuilt (see :meth:`_rebuilt_window`), with a warning."""
        try:
            return self._load_checkpoint(start)
        except (CorruptCheckpointError, FileNotFoundError) as e:
            if isinstance(e, FileNotFoundError):
                self._check_alive()
                self._list_marks()
                if reading_from < self._log_start:
                    raise OffsetOutOfRangeError(
                        f"{self._name}: offset {reading_from} is below the log start "
                        f"{self._log_start} (its records were deleted): read from the log start"
                    ) from None
            key = checkpoint_key(self._topic.prefix, self._partition, start)
            _warn_skipped(key, e, "rebuilding its window without it")
        return self._rebuilt_window(start)

    def _rebuilt_window(self, start: int) -> Checkpoint:
        """The window starting at ``start``, rebuilt without its checkpoint and
        with no partition state (reads use only its segments). Below the
        compaction mark, vacuum may have removed its segments: it is rebuilt
        from the index of the compacted object that holds it (one LIST and one
        ranged GET). Else, or from an object written before objects had an
        index, from its segments' headers (one LIST and ``checkpoint_interval``
        ranged GETs); a window holding the log start from what vacuum left of
        it (and the index of the object holding the rest, if compacted).

        Raises:
            SegmentNotFoundError: neither is there any more (named by what
                went missing).
        """
        if start >= self._compacted:
            self._list_marks()  # compacted since this object last listed?
        indexed = self._indexed_window(start) if start < self._compacted else None
        if indexed is not None and indexed[1] and indexed[1][0].base == start:
            end, held = indexed
            return self._window(start, end, held)
        prefix = segment_prefix(self._topic.prefix, self._partition)
        after = None if start == 0 else self._key(start - 1)
        found = self._retry(
            lambda: list(self._store.list(prefix, start_after=after, limit=self._interval))
        )
        listed = [
            (b, info.size) for info in found if (b := parse_segment_key(info.key)) is not None
        ]
        window = self._chain_from(start, listed)
        if len(window) < self._interval and start < self._log_start:
            window = self._window_after_vacuum(start, listed)
        if indexed is not None:
            # the window holds the log start, and the object the rest of it
            end, held = indexed
            joined = [s for s in window if s.end <= held[0].base] if held else []
            reaches = joined[-1].end if joined else max(start, self._log_start)
            if held and held[0].base <= reaches and chained([*joined, *held]):
                return self._window(start, end, [*joined, *held])
        if len(window) < self._interval and not (window and start < self._log_start):
            why = f"checkpoint window at {start} is corrupt and its segments are not all there"
            if indexed is None and start < self._compacted:
                why += " (and no compacted object holding it has a readable index)"
            raise SegmentNotFoundError(why, key=self._key(window[-1].end if window else start))
        return self._window(start, window[-1].end, window)

    def _window(self, start: int, end: int, segments: Sequence[SegmentSummary]) -> Checkpoint:
        return Checkpoint(log_start=self._log_start, start=start, end=end,
                          segments=tuple(segments), state=PartitionState())  # fmt: skip

    def _indexed_window(self, start: int) -> tuple[int, tuple[SegmentSummary, ...]] | None:
        """The end of the window at ``start`` and its segments, from the index
        of the first compacted object listed that holds it (see
        :mod:`arrowlog.format.compacted_index`); None if none does. An object whose
        index cannot be read is passed over, with a warning."""
        for _, index in self._indexes_from(start, until=start):
            found = index.window(start) if index is not None else None
            if found is not None:
                return found
        return None

    def _indexes_from(
        self, offset: int, until: int
    ) -> Iterator[tuple[_Object, CompactedIndex | None]]:
        """The compacted objects holding records at or past ``offset``, in
        offset order, up to the first that starts past ``until`` (one LIST),
        each with its index (None: written before objects had one, or
        unreadable, with a warning), read lazily: one ranged GET each (two
        for an index past the first ``HEAD_BYTES``)."""
        prefix = compacted_prefix(self._topic.prefix, self._partition)
        after = compacted_after(self._topic.prefix, self._partition, offset)

        def listing() -> list[_Object]:
            out = []
            for info in self._store.list(prefix, start_after=after):
                span = parse_compacted_key(info.key)
                if span is not None:
                    out.append(_Object(info.key, *span))
                    if span[0] > until:
                        break
            return out

        for obj in self._retry(listing):
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
                if self._decide is not None:
                    decision = self._decide(
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

    def _compacted_index(self, key: str, start: int, end: int) -> CompactedIndex | None:
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
        """:meth:`_compacted_index`, with the object's compaction table."""
        head = self._retry(lambda: self._store.get_range(key, 0, HEAD_BYTES))
        need = head_length(head, key)
        if need > len(head):
            head = self._retry(lambda: self._store.get_range(key, 0, need))
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

    def _window_after_vacuum(
        self, start: int, listed: list[tuple[int, int]]
    ) -> list[SegmentSummary]:
        """The segments left of the window at ``start`` after vacuum removed
        those below the log start (in offset order: what is left is the chain
        from the segment holding the log start). The window ends where the next
        checkpoint starts, or where the tail does: one HEAD per segment."""
        first = [b for b, _ in listed if b <= self._log_start]
        if not first:
            return []
        chain = self._chain_from(max(first), [(b, z) for b, z in listed if b >= max(first)])
        window: list[SegmentSummary] = []
        for summary in chain:
            window.append(summary)
            if summary.end >= self._window_start or self._exists(
                checkpoint_key(self._topic.prefix, self._partition, summary.end)
            ):
                break
        return window

    def _checkpoints_from(self, start: int) -> Iterator[Checkpoint]:
        """The checkpoint windows from the one holding ``start`` to the newest."""
        if start >= self._window_start:
            return
        last = self._last_checkpoint
        cp = (
            last
            if last is not None and last.start <= start < last.end
            else self._checkpoint_covering(start)
        )
        while True:
            yield cp
            if cp.end >= self._window_start:
                return
            cp = self._load_window(cp.end, start)

    def _checkpoint_covering(self, offset: int) -> Checkpoint:
        # Checkpoint keys are inverted: the first key at or after checkpoint_key(offset)
        # is the window with the greatest start <= offset.
        prefix = checkpoint_prefix(self._topic.prefix, self._partition)
        after = checkpoint_key(self._topic.prefix, self._partition, offset + 1)
        found = self._retry(lambda: list(self._store.list(prefix, start_after=after, limit=1)))
        start = parse_checkpoint_key(found[0].key) if found else None
        # A listing is not a snapshot: it may have missed the window wanted (and
        # shown an older one, or none). Windows are contiguous from the log start:
        # follow them by key from what it showed.
        cp = self._load_window(self._log_start if start is None else start, offset)
        while cp.end <= offset:
            cp = self._load_window(cp.end, offset)
        if not cp.start <= offset:
            raise CorruptCheckpointError(f"checkpoint does not cover offset {offset}", key=prefix)
        return cp

    def _write_due_checkpoints(self) -> None:
        """Write the checkpoint of every complete window we know of. Best effort:
        a checkpoint only saves work, so a failure here never fails an append."""
        while len(self._tail) >= self._interval:
            try:
                window = self._tail_summaries(self._interval)
                state = advance(self._base_state, window)
                if self._decide is not None:
                    state.forget_decided(self._decide)
            except ArrowLogError:
                return  # store or coordinator unavailable: the next append tries again
            self._date_producers(state, window[-1].base)
            cp = Checkpoint(
                log_start=self._log_start,
                start=self._window_start,
                end=window[-1].end,
                segments=tuple(window),
                state=state,
            )
            key = checkpoint_key(self._topic.prefix, self._partition, cp.start)
            try:
                self._store.put_if_absent(key, cp.to_json())
            except FileExistsError:
                pass  # another writer wrote the same window
            except TransientStoreError:
                return
            self._last_checkpoint = cp
            self._window_start = cp.end
            self._base_state = state
            for base, _ in self._tail[: self._interval]:
                self._summaries.pop(base, None)
            del self._tail[: self._interval]
            self._stored = {b: ms for b, ms in self._stored.items() if b >= self._window_start}

    def _date_producers(self, state: PartitionState, last: int) -> None:
        """Date the producer state of a window whose last segment starts at
        ``last``, and forget the producers idle for PRODUCER_STATE_RETENTION_MS,
        all on the store's clock (DESIGN, "one clock"): a writer whose clock
        runs days ahead would otherwise forget a producer whose resend is in
        doubt, and once retention removed its batch, write the resend again.

        A batch is dated by the LastModified of its segment or of a later one;
        "now" is the time of the newest segment known. Both come from objects
        in offset order, so a store clock that jumps back only keeps state
        longer. The times come from listings, or else from a HEAD of the
        window's last segment: one request per window, and only while some
        producer has state. Best effort: with no time known, nothing is
        forgotten."""
        if not state.producers:
            return
        if self._stored_by(last) is None:
            try:
                info = self._store.head(self._key(last))
            except (FileNotFoundError, ArrowLogError):
                info = None
            if info is not None and info.modified_ms is not None:
                self._stored[last] = info.modified_ms
        state.date_producers(lambda entry: self._stored_by(entry.base_offset))
        if self._stored:
            now_ms = self._stored[max(self._stored)]
            state.forget_producers_stored_before(
                now_ms - PRODUCER_STATE_RETENTION_MS - CLOCK_GRAIN_MS
            )


class _Object(NamedTuple):
    """A compacted object, by its key: it holds the records of ``[start, end)``."""

    key: str
    start: int
    end: int


def _warn_skipped(key: str, error: BaseException, instead: str) -> None:
    reason = f"{key}: gone" if isinstance(error, FileNotFoundError) else str(error)
    warnings.warn(
        f"skipping an unusable checkpoint: {reason}; {instead}", RuntimeWarning, stacklevel=2
    )
