"""Checkpoints: opening a partition from the newest usable one, loading (or
rebuilding) the window that holds an offset, writing every window that is due.
A checkpoint only saves work: a corrupt one is skipped for its segments, or,
once vacuum removed them, for the index of the compacted object holding them.
See docs/protocol.md, "A corrupt checkpoint after compaction".
"""

from __future__ import annotations

import bisect
import collections
import functools
import warnings
from collections.abc import Iterator, Sequence

from arrowlog._clock import CLOCK_GRAIN_MS
from arrowlog._threads import Lane
from arrowlog.errors import (
    ArrowLogError,
    CorruptCheckpointError,
    OffsetOutOfRangeError,
    SegmentNotFoundError,
    TransientStoreError,
)
from arrowlog.format.checkpoint import (
    Checkpoint,
    PartitionState,
    SegmentSummary,
    advance,
    chained,
)
from arrowlog.format.topic import (
    Topic,
    checkpoint_key,
    checkpoint_prefix,
    parse_checkpoint_key,
    parse_segment_key,
    segment_prefix,
)
from arrowlog.partition._base import Shared, _Reincarnated, _Stale
from arrowlog.partition.ahead import CheckpointLookAhead
from arrowlog.partition.indexes import CompactedIndexes
from arrowlog.partition.known import KnownLog
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

#: checkpoints a read of old offsets fetches at once: it waits for one round
#: trip per this many windows, not per window
WINDOW_READS = 8


class Checkpoints:
    """The checkpoints part: opening from the newest usable checkpoint,
    reading the windows, writing due ones, and starting the tail after those
    others wrote. It owns whether the partition is open (or opening) and the
    checkpoints it parsed; its methods run under the partition's lock, taken
    by their caller (:meth:`opened_topic` takes it itself)."""

    def __init__(
        self, shared: Shared, known: KnownLog, listing: Listing, indexes: CompactedIndexes
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._indexes = indexes
        #: whether the partition was opened (else the next call opens it)
        self.opened = False
        #: whether an opening is under way (see :meth:`below_log_start`)
        self.opening = False
        #: checkpoints parsed, by key (one is never rewritten)
        self.cache: collections.OrderedDict[str, Checkpoint] = collections.OrderedDict()

    def ensure_open(self) -> bool:
        """Open the partition if not yet open; True if it was opened just now
        (and so is fresh: no need to list the tail again)."""
        if self.opened:
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
        with self._shared.lock:
            self.ensure_open()
            return self._shared.topic

    def _open(self) -> None:
        """Read the newest usable checkpoint, then list the segments after it.
        If the listing shows the topic was deleted and created anew (and still
        has this partition), open the new topic's partition instead: nothing of
        the old one was known yet."""
        self.opening = True
        stale = 0
        try:
            while True:
                try:
                    return self._open_once()
                except _Reincarnated as e:
                    self._shared.reincarnate(e.topic)
                except _Stale:
                    # vacuum removed the chain being opened: a newer checkpoint
                    # is there now, unless the newest is unusable
                    stale += 1
                    if stale >= _STALE_OPENS:
                        self.opened = False
                        known = self._known
                        raise SegmentNotFoundError(
                            f"cannot open {self._shared.name}: records before {known.log_start} "
                            f"were deleted and the chain from the newest usable checkpoint ends "
                            f"at {known.end}",
                            key=self._shared.key(known.end),
                        ) from None
        finally:
            self.opening = False

    def reopen(self) -> None:
        """Open again from the newest checkpoint."""
        self._open()

    def below_log_start(self) -> bool:
        """The chain this object knows ends at or below the log start, and the
        segments it holds may have been removed, their keys free to be claimed
        again: only the newest checkpoint's chain is sure to be whole (vacuum
        never removes its segments). Open again from it; while opening, let
        the opening start over (see :meth:`_open`).

        While opening, below the compaction mark, the chain goes on through
        the indexes of the compacted objects instead: they summarise the
        removed segments exactly as the checkpoints did, and end at the mark,
        whose key was never freed. That is how a partition opens from a
        checkpoint older than the newest (those after it corrupt) once vacuum
        removed the segments between them; the partition state is advanced
        through the same summaries, so it is exact."""
        if self.opening and self._known.end < self._known.compacted and self._bridge():
            self._listing.sync_tail()
            return True
        if self.opening:
            raise _Stale
        self.reopen()
        return True

    def _bridge(self) -> bool:
        """Extend the tail from its end towards the compaction mark with the
        summaries that compacted objects' indexes hold; True if it grew."""
        grew = False
        for _, index in self._indexes.indexes_from(self._known.end, until=self._known.compacted):
            held = index.from_offset(self._known.end) if index is not None else ()
            for summary in held:
                if summary.end > self._known.compacted:
                    break
                self._known.extend_tail(summary)
                grew = True
        return grew

    def _open_once(self) -> None:
        self.opened = False
        self._known.forget()
        cp = self.newest_checkpoint(self._shared.take_ahead())
        if cp is not None:
            self._known.open_from(cp)
        self.opened = True
        self._listing.sync_tail()

    def newest_checkpoint(self, ahead: CheckpointLookAhead | None = None) -> Checkpoint | None:
        """The newest checkpoint that reads back intact from the store (never
        a copy held here: see :meth:`stored_checkpoint`); None if there is none.
        The first LIST is ``ahead``'s, if it listed this partition's
        checkpoints (:mod:`arrowlog.partition.ahead`).

        A corrupt one is skipped with a warning, for the next older one (and
        then the log start): a checkpoint only saves work. The segments it
        summarised are read instead, each checked by its own checksums. Each
        checkpoint skipped costs one more LIST and GET.
        """
        prefix = checkpoint_prefix(self._shared.topic.prefix, self._shared.partition)

        def first_after(key: str | None) -> list[ObjectInfo]:
            return list(self._shared.store.list(prefix, start_after=key, limit=1))

        found = None if ahead is None else ahead.listed(prefix)
        if found is None:
            found = self._shared.retry(functools.partial(first_after, None))
        while found:
            after = found[0].key
            start = parse_checkpoint_key(after)
            try:
                if start is None:
                    raise CorruptCheckpointError("not a checkpoint name", key=after)
                return self.stored_checkpoint(start)
            except (CorruptCheckpointError, FileNotFoundError) as e:
                if isinstance(e, FileNotFoundError):
                    self._listing.check_alive()  # listed, then gone: deleted with its topic?
                _warn_skipped(after, e, "opening from an older one or the log start")
            found = self._shared.retry(functools.partial(first_after, after))
        return None

    def load_checkpoint(self, start: int) -> Checkpoint:
        """A checkpoint, from the store or as read before: one is written once
        (put-if-absent) and never changes, so each long read does not fetch
        every window again (a topic created anew has keys of its own)."""
        key = self._key(start)
        cached = self.cache.get(key)
        if cached is not None:
            self.cache.move_to_end(key)
            return cached
        return self.stored_checkpoint(start)

    def stored_checkpoint(self, start: int) -> Checkpoint:
        """The checkpoint of the window at ``start`` as the store holds it now,
        kept for later reads. What every other client reads, not this one's
        copy (the writer keeps each checkpoint it writes): where the answer
        decides what the store must keep (the newest that reads back, whose
        chain vacuum leaves whole; whether a window can be rebuilt without
        its segments), a copy held here would hide a checkpoint found
        corrupt since.

        Raises:
            CorruptCheckpointError: it does not read back.
            FileNotFoundError: it is gone.
        """
        key = self._key(start)
        cp = self._fetched(start, key)
        self._keep(key, cp)
        return cp

    def _fetched(self, start: int, key: str) -> Checkpoint:
        """The checkpoint of the window at ``start``, from the store (any thread)."""
        raw = self._shared.retry(lambda: self._shared.store.get(key))
        return Checkpoint.from_json(raw, key=key, start=start)

    def load_window(
        self, start: int, reading_from: int, failed: BaseException | None = None
    ) -> Checkpoint:
        """The checkpoint of the window starting at ``start``, for a read from
        offset ``reading_from``. If it is gone, the log start is listed again:
        vacuum removes the windows below it, and a read from below it raises
        OffsetOutOfRangeError. Otherwise, if it is corrupt (or gone), the window
        is rebuilt (see :meth:`_rebuilt_window`), with a warning. ``failed``:
        how a GET of it just failed (retried to the deadline, or corrupt), not
        sent again."""
        try:
            if failed is not None:
                raise failed
            return self.load_checkpoint(start)
        except (CorruptCheckpointError, FileNotFoundError) as e:
            if isinstance(e, FileNotFoundError):
                self._listing.check_alive()
                self._listing.list_marks()
                if reading_from < self._known.log_start:
                    raise OffsetOutOfRangeError(
                        f"{self._shared.name}: offset {reading_from} is below the log start "
                        f"{self._known.log_start} (its records were deleted): read from the log "
                        "start"
                    ) from None
            key = self._key(start)
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
        if start >= self._known.compacted:
            self._listing.list_marks()  # compacted since this object last listed?
        indexed = self._indexes.indexed_window(start) if start < self._known.compacted else None
        if indexed is not None and indexed[1] and indexed[1][0].base == start:
            end, held = indexed
            return self._window(start, end, held)
        prefix = segment_prefix(self._shared.topic.prefix, self._shared.partition)
        after = None if start == 0 else self._shared.key(start - 1)
        found = self._shared.retry(
            lambda: list(
                self._shared.store.list(prefix, start_after=after, limit=self._shared.interval)
            )
        )
        listed = [
            (b, info.size) for info in found if (b := parse_segment_key(info.key)) is not None
        ]
        window = self._listing.chain_from(start, listed)
        if len(window) < self._shared.interval and start < self._known.log_start:
            window = self._window_after_vacuum(start, listed)
        if indexed is not None:
            # the window holds the log start, and the object the rest of it
            end, held = indexed
            joined = [s for s in window if s.end <= held[0].base] if held else []
            reaches = joined[-1].end if joined else max(start, self._known.log_start)
            if held and held[0].base <= reaches and chained([*joined, *held]):
                return self._window(start, end, [*joined, *held])
        if len(window) < self._shared.interval and not (window and start < self._known.log_start):
            why = f"checkpoint window at {start} is corrupt and its segments are not all there"
            if indexed is None and start < self._known.compacted:
                why += " (and no compacted object holding it has a readable index)"
            raise SegmentNotFoundError(
                why, key=self._shared.key(window[-1].end if window else start)
            )
        return self._window(start, window[-1].end, window)

    def _window(self, start: int, end: int, segments: Sequence[SegmentSummary]) -> Checkpoint:
        return Checkpoint(log_start=self._known.log_start, start=start, end=end,
                          segments=tuple(segments), state=PartitionState())  # fmt: skip

    def _window_after_vacuum(
        self, start: int, listed: list[tuple[int, int]]
    ) -> list[SegmentSummary]:
        """The segments left of the window at ``start`` after vacuum removed
        those below the log start (in offset order: what is left is the chain
        from the segment holding the log start). The window ends where the next
        checkpoint starts, or where the tail does: one HEAD per segment."""
        first = [b for b, _ in listed if b <= self._known.log_start]
        if not first:
            return []
        chain = self._listing.chain_from(max(first), [(b, z) for b, z in listed if b >= max(first)])
        window: list[SegmentSummary] = []
        for summary in chain:
            window.append(summary)
            if summary.end >= self._known.window_start or self._listing.exists(
                self._key(summary.end)
            ):
                break
        return window

    def checkpoints_from(self, start: int, until: int | None = None) -> Iterator[Checkpoint]:
        """The checkpoint windows from the one holding ``start`` to the newest.

        One LIST shows the windows from there to the one holding ``until - 1``
        (a read's end; the newest without it), and those not read before are
        fetched :data:`WINDOW_READS` at a time, in parallel, as the walk
        reaches them. A window the listing missed (a listing is not a
        snapshot), or one that fails to read, is then read by key on its own:
        windows are contiguous, each starting where the one before ends."""
        if start >= self._known.window_start:
            return
        last = self._known.last_checkpoint
        listed: list[int] | None = None  # not listed yet
        failed: dict[int, BaseException] = {}
        if last is not None and last.start <= start < last.end:
            cp = last
        elif (cached := self._cached_covering(start)) is not None:
            cp = cached
        else:
            listed = self._listed_windows(start, until)
            cp = self._checkpoint_covering(start, listed, failed)
        while True:
            yield cp
            if cp.end >= self._known.window_start:
                return
            if listed is None and self._key(cp.end) not in self.cache:
                # the cache held the windows so far, not this one: list from here
                listed = self._listed_windows(cp.end, until)
            cp = self._next_window(cp.end, start, listed or [], failed)

    def _key(self, start: int) -> str:
        return checkpoint_key(self._shared.topic.prefix, self._shared.partition, start)

    def _cached_covering(self, offset: int) -> Checkpoint | None:
        """The cached window holding ``offset``, if any. Windows never change
        once written, so the walk from it needs no LIST: the client that wrote
        the windows, or read them before, reads them again without one (a
        read from below a log start that moved since is refused as before)."""
        for key, cp in self.cache.items():
            if cp.start <= offset < cp.end and key == self._key(cp.start):
                self.cache.move_to_end(key)
                return cp
        return None

    def _next_window(
        self, at: int, reading_from: int, listed: list[int], failed: dict[int, BaseException]
    ) -> Checkpoint:
        """The window at ``at``, fetched ahead with the listed ones after it."""
        self._fetch_ahead(at, listed, failed)
        return self.load_window(at, reading_from, failed.pop(at, None))

    def _listed_windows(self, offset: int, until: int | None) -> list[int]:
        """The starts of the windows from the one holding ``offset`` (the
        greatest start at or below it) to the one holding ``until - 1`` (or
        the newest), in offset order, as one LIST shows them. Checkpoint keys
        are inverted: the listing goes from the newest window down, and stops
        at the first one starting at or below ``offset``."""
        shared = self._shared
        prefix = checkpoint_prefix(shared.topic.prefix, shared.partition)
        top = self._known.window_start if until is None else min(until, self._known.window_start)
        top = max(top, offset + 1)
        after = self._key(top)
        # each window holds an offset of its own: at most this many start in
        # [offset, top), the one holding ``offset`` included (a page of S3's
        # 1,000 keys for a short read of old offsets, without a bound)
        limit = top - offset + 1

        def listed() -> list[int]:
            starts = []
            for info in shared.store.list(prefix, start_after=after, limit=limit):
                window = parse_checkpoint_key(info.key)
                if window is None:
                    continue
                starts.append(window)
                if window <= offset:
                    break
            return starts

        return sorted(shared.retry(listed))

    def _fetch_ahead(self, start: int, listed: list[int], failed: dict[int, BaseException]) -> None:
        """Fetch at once the checkpoints of the window at ``start`` and of the
        listed windows after it, up to :data:`WINDOW_READS` not read before,
        into the cache, unless the one at ``start`` is cached or was not
        listed. Best effort: :meth:`load_window` reads (or rebuilds) any that
        fails here, and raises what it must. A GET that failed is not sent
        again: its error goes into ``failed`` (for :meth:`load_window`) if
        retried to the deadline or corrupt, and any other window is read by
        its key on its own (gone: the log start is listed again)."""
        if start in failed:
            return
        if self._key(start) in self.cache:
            return
        at = bisect.bisect_left(listed, start)
        if at == len(listed) or listed[at] != start:
            return
        wanted = [
            (window, key)
            for window in listed[at:]
            if window not in failed and (key := self._key(window)) not in self.cache
        ][:WINDOW_READS]
        if len(wanted) < 2:
            return  # one window: load_window reads it

        def fetch(window: int, key: str) -> Checkpoint | BaseException:
            try:
                return self._fetched(window, key)
            except (ArrowLogError, FileNotFoundError) as e:
                return e

        lane = Lane(len(wanted))
        futures = [(window, key, lane.submit(fetch, window, key)) for window, key in wanted]
        for window, key, future in futures:
            got = future.result()
            if isinstance(got, Checkpoint):
                self._keep(key, got)
            elif isinstance(got, TransientStoreError | CorruptCheckpointError):
                failed[window] = got

    def _keep(self, key: str, cp: Checkpoint) -> None:
        self.cache[key] = cp
        if len(self.cache) > CHECKPOINT_CACHE:
            self.cache.popitem(last=False)

    def _checkpoint_covering(
        self, offset: int, listed: list[int], failed: dict[int, BaseException]
    ) -> Checkpoint:
        """The window holding ``offset``: the listed one starting at or below
        it. A listing is not a snapshot: it may have missed the window wanted
        (and shown an older one, or none). Windows are contiguous from the log
        start: follow them by key from what it showed."""
        covering = listed[0] if listed and listed[0] <= offset else None
        first = self._known.log_start if covering is None else covering
        cp = self._next_window(first, offset, listed, failed)
        while cp.end <= offset:
            cp = self._next_window(cp.end, offset, listed, failed)
        if not cp.start <= offset:
            prefix = checkpoint_prefix(self._shared.topic.prefix, self._shared.partition)
            raise CorruptCheckpointError(f"checkpoint does not cover offset {offset}", key=prefix)
        return cp

    def write_due_checkpoints(self) -> None:
        """Write the checkpoint of every complete window we know of. Best effort:
        a checkpoint only saves work, so a failure here never fails an append."""
        while len(self._known.tail) >= self._shared.interval:
            try:
                window = self._known.tail_summaries(self._shared.interval)
                state = advance(self._known.base_state, window)
                if self._shared.decide is not None:
                    state.forget_decided(self._shared.decide)
            except ArrowLogError:
                return  # store or coordinator unavailable: the next append tries again
            self._date_producers(state, window[-1].base)
            cp = Checkpoint(
                log_start=self._known.log_start,
                start=self._known.window_start,
                end=window[-1].end,
                segments=tuple(window),
                state=state,
            )
            key = self._key(cp.start)
            body = cp.to_json()
            try:
                self._shared.store.put_if_absent(key, body)
            except FileExistsError:
                pass  # another writer wrote the same window
            except TransientStoreError:
                return
            else:
                # what a GET of it would return, for a read of the window
                # later: the client that writes a log reads it back often
                self._keep(key, Checkpoint.from_json(body, key=key, start=cp.start))
            self._known.pass_window(self._shared.interval, cp, state)

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
        if self._known.stored_by(last) is None:
            try:
                info = self._shared.store.head(self._shared.key(last))
            except (FileNotFoundError, ArrowLogError):
                info = None
            if info is not None and info.modified_ms is not None:
                self._known.store_time(last, info.modified_ms)
        state.date_producers(lambda entry: self._known.stored_by(entry.base_offset))
        if self._known.stored:
            now_ms = self._known.stored[max(self._known.stored)]
            state.forget_producers_stored_before(
                now_ms - PRODUCER_STATE_RETENTION_MS - CLOCK_GRAIN_MS
            )

    def adopt_written_windows(self) -> None:
        """Start the tail after the complete windows in it whose checkpoints
        the clients that appended them wrote, from the newest of them (its
        partition state, its log start), as a client opening now would. A
        client that only reads writes no checkpoint: without this its window
        start stays where it opened, its tail (every summary kept in memory,
        advanced through by each :meth:`Reads.state`) grows with the log, and what
        goes through the windows up to the window start (compaction planning)
        stops where it opened.

        One GET per window, in order (windows are written in order): the
        first one not there yet ends the search (a later sync that grows the
        tail asks again); a corrupt one is passed over for the next (a read
        of its window rebuilds it, with a warning); one that does not hold the
        segments of the tail is never adopted."""
        if not self._known.tail or self._known.tail[0][0] != self._known.window_start:
            return
        summaries = self._known.tail_summaries()
        at = 0  # the index in the tail where the window sought starts
        adopted: tuple[int, Checkpoint] | None = None
        while len(summaries) - at >= self._shared.interval:
            try:
                cp = self.load_checkpoint(summaries[at].base)
            except FileNotFoundError:
                break
            except CorruptCheckpointError:
                at += self._shared.interval
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
        self._known.pass_window(past, cp, cp.state.copy())
        self._known.learn_marks([cp.log_start], [])


def _warn_skipped(key: str, error: BaseException, instead: str) -> None:
    reason = f"{key}: gone" if isinstance(error, FileNotFoundError) else str(error)
    warnings.warn(
        f"skipping an unusable checkpoint: {reason}; {instead}", RuntimeWarning, stacklevel=2
    )
