"""Deleting records: moving the log start (Kafka's DeleteRecords) and, once
the topic's ``delete_delay_ms`` has passed, removing the segments below it,
and with a commit object the staged data objects it names. See
docs/protocol.md, "Deleting records".
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass

from arrowlog._clock import CLOCK_GRAIN_MS
from arrowlog.config import DEFAULT_RETAIN_MS, TopicConfig
from arrowlog.errors import OffsetOutOfRangeError
from arrowlog.format.checkpoint import Checkpoint, SegmentSummary
from arrowlog.format.topic import (
    checkpoint_prefix,
    compacted_prefix,
    log_start_key,
    parse_announcement_key,
    parse_checkpoint_key,
    parse_compacted_key,
    parse_compacted_mark_key,
    parse_log_start_key,
    parse_segment_key,
    parse_staged_name,
    partition_dir,
    segment_prefix,
    staged_prefix,
)
from arrowlog.partition._base import Shared
from arrowlog.partition.checkpoints import Checkpoints
from arrowlog.partition.known import KnownLog
from arrowlog.partition.listing import Listing
from arrowlog.partition.reads import Reads
from arrowlog.storage import ObjectInfo


@dataclass(frozen=True, slots=True)
class Removal:
    """An object ``vacuum`` removes (or, in a dry run, would), and why."""

    key: str
    reason: str
    #: a staged data object: the base offset of the commit object that names
    #: it, which goes right after it (and stays if that stays)
    commit: int | None = None


@dataclass(frozen=True, slots=True)
class Orphan:
    """A staged data object that no commit object of the log names, written
    more than the topic's ``delete_delay_ms`` before (on the store's
    clock): a writer was killed between its upload and its commit, or gave
    up. ``vacuum`` reports it and leaves it where it is: a commit could
    still name it."""

    key: str
    age_ms: int


@dataclass(frozen=True, slots=True)
class VacuumPlan:
    """What ``vacuum`` does in one partition: where retention moves the log
    start (None: nowhere), what it removes, in order, and the staged
    objects it finds orphaned (and leaves)."""

    start: int | None
    removals: list[Removal]
    orphans: list[Orphan]


class Retention:
    """The retention part: the log start, and removing what lies below it.
    It owns no fields; it moves the log start of the state part under the
    partition's lock."""

    def __init__(
        self,
        shared: Shared,
        known: KnownLog,
        listing: Listing,
        checkpoints: Checkpoints,
        reads: Reads,
    ) -> None:
        self._shared = shared
        self._known = known
        self._listing = listing
        self._checkpoints = checkpoints
        self._reads = reads

    def delete_records(self, before_offset: int) -> int:
        """Delete the records below ``before_offset``: the log starts there from
        now on, for every client (reads below it raise OffsetOutOfRangeError).
        One small object records it; the segments go later, when ``vacuum``
        finds the topic's ``delete_delay_ms`` passed. Returns the log start,
        which never moves back (a lower offset changes nothing).

        Raises:
            OffsetOutOfRangeError: not an int in ``[0, high watermark]``; nothing
                was written.
        """
        if isinstance(before_offset, bool) or not isinstance(before_offset, int):
            raise OffsetOutOfRangeError(f"before_offset must be an int, got {before_offset!r}")
        with self._shared.lock:
            if not self._checkpoints.ensure_open():
                self._listing.sync_tail()
            self._listing.probe_tail()  # the end must cover every acknowledged append
            if not 0 <= before_offset <= self._known.end:
                raise OffsetOutOfRangeError(
                    f"{self._shared.name}: cannot delete records before {before_offset}: the log "
                    f"holds [{self._known.log_start}, {self._known.end})"
                )
            if before_offset <= self._known.log_start:
                return self._known.log_start
            key = log_start_key(self._shared.topic.prefix, self._shared.partition, before_offset)
            self._shared.put_once(key, json.dumps({"log_start": before_offset}).encode())
            self._known.learn_marks([before_offset], [])
            return before_offset

    def plan_vacuum(
        self, now_ms: int, config: TopicConfig, retain_ms: int = DEFAULT_RETAIN_MS
    ) -> VacuumPlan:
        """What ``vacuum`` does here at ``now_ms`` on the store's clock, from one
        listing of the partition's segments: where ``config``'s retention moves
        the log start (None: nowhere), what may be removed (see
        :func:`_removable`; ``retain_ms`` is the horizon for checkpoints below
        the log start), with each commit object the staged data objects it
        names, and the staged objects orphaned (see :meth:`_with_staged`).
        Cost: two LISTs (segments, staged objects), one more of the
        checkpoints if anything is ripe, one of them all once a log start is
        older than ``retain_ms`` (and a sync, unless the partition opens just
        now); where staged objects are listed, the checkpoints of the windows
        from the oldest that may name one."""
        with self._shared.lock:
            if not self._checkpoints.ensure_open():
                self._listing.sync_tail()
            prefix = segment_prefix(self._shared.topic.prefix, self._shared.partition)
            found = self._shared.retry(lambda: list(self._shared.store.list(prefix)))
            self._known.learn_stored(found)  # dates producer state (arrowlog.maintenance.cleanup)
            compacted = compacted_prefix(self._shared.topic.prefix, self._shared.partition)
            objects: list[ObjectInfo] | None = None

            def list_compacted() -> list[ObjectInfo]:
                nonlocal objects
                if objects is None:
                    objects = self._shared.retry(lambda: list(self._shared.store.list(compacted)))
                return objects

            start = None
            if config.retention_ms is not None or config.retention_bytes is not None:
                live = self._reads.objects(self._known.log_start, self._known.end)
                if live:
                    ages = _Ages.of(
                        found, list_compacted() if self._known.compacted else [], now_ms
                    )
                    start = _retention_start(live, ages, config, self._known.log_start)
            checkpoints = checkpoint_prefix(self._shared.topic.prefix, self._shared.partition)
            removable = _removable(
                found,
                now_ms,
                self._shared.topic.config.delete_delay_ms,
                retain_ms,
                self._checkpoints.newest_checkpoint,
                list_compacted,
                lambda: self._shared.retry(lambda: list(self._shared.store.list(checkpoints))),
            )
            removable, orphans = self._with_staged(removable, found, now_ms)
            return VacuumPlan(start, removable, orphans)

    def _with_staged(
        self, removals: list[Removal], found: list[ObjectInfo], now_ms: int
    ) -> tuple[list[Removal], list[Orphan]]:
        """``removals`` with, right before each commit object that goes, the
        staged data objects it names (after the same delay: they go with it),
        never one that an object staying names; and the staged objects that
        no object of the log names, older than the topic's ``delete_delay_ms``
        (reported, never removed: a commit could still name one).

        What a commit names comes from the log's index (its checkpoints, as
        a read finds them, and the tail), never from the object now at its
        key: below the log start a key may hold a stray commit, put on a
        stale view, naming batches a later commit of the log names too. The
        index is read from the oldest object that goes, or that may name an
        old staged object: a commit is written after the objects it names
        (on the store's clock), so from the first segment listed that was
        written since the oldest of them. Nothing is read when no staged
        object is listed."""
        shared = self._shared
        home = partition_dir(shared.topic.prefix, shared.partition)
        prefix = staged_prefix(shared.topic.prefix, shared.partition)
        listed = shared.retry(lambda: list(shared.store.list(prefix)))
        staged = {i.key[len(home) :]: i for i in listed if parse_staged_name(i.key) is not None}
        if not staged:
            return removals, []
        going = {b for r in removals if (b := parse_segment_key(r.key)) is not None}
        ripe = shared.topic.config.delete_delay_ms + CLOCK_GRAIN_MS
        old = [i for i in staged.values() if _age_ms(i, now_ms) >= ripe]
        lo = min(going, default=self._known.end)
        if old:
            lo = min(lo, _written_since(found, min(_ms(i) for i in old) - CLOCK_GRAIN_MS, lo))
        named: dict[int, list[str]] = {}  # base of an object that goes -> what it names
        kept: set[str] = set()  # named by an object that stays
        for s in self._objects_from(lo):
            held = [r.at for r in s.refs if r.at is not None]
            if s.base in going:
                named[s.base] = held
            else:
                kept.update(held)
        out = []
        for removal in removals:
            base = parse_segment_key(removal.key)
            for at in named.get(base, []) if base is not None else []:
                if at in staged and at not in kept:
                    why = f"named by the commit object at {base}, which goes: {removal.reason}"
                    out.append(Removal(home + at, why, commit=base))
            out.append(removal)
        seen = kept.union(*named.values())
        orphans = [Orphan(i.key, _age_ms(i, now_ms)) for i in old if i.key[len(home) :] not in seen]
        return out, sorted(orphans, key=lambda o: o.key)

    def _objects_from(self, lo: int) -> list[SegmentSummary]:
        """The objects of the log's index from the one holding ``lo``. Below
        the log start, windows whose checkpoints vacuum removed are passed
        over: their segments went before them, and what a listing still shows
        there is a stray."""
        try:
            return list(self._reads.objects_from(lo))
        except OffsetOutOfRangeError:
            return list(self._reads.objects_from(max(lo, self._known.log_start)))


@dataclass(frozen=True)
class _Ages:
    """How long ago (ms, on the store's clock) each segment was written, by its
    base offset: its own object's age, or, once compaction removed it, the age
    of the compacted object holding it (written after it, so never older)."""

    segments: dict[int, int]
    compacted: list[tuple[int, int, int]]  # (start, end, age)

    @classmethod
    def of(cls, found: list[ObjectInfo], compacted: list[ObjectInfo], now_ms: int) -> _Ages:
        segments = {
            base: _age_ms(info, now_ms)
            for info in found
            if (base := parse_segment_key(info.key)) is not None
        }
        spans = [
            (span[0], span[1], _age_ms(info, now_ms))
            for info in compacted
            if (span := parse_compacted_key(info.key)) is not None
        ]
        return cls(segments, spans)

    def get(self, base: int) -> int | None:
        """None: not listed (a listing is not a snapshot), so not known to be old."""
        if base in self.segments:
            return self.segments[base]
        held = [age for start, end, age in self.compacted if start <= base < end]
        return max(held, default=None)


def _retention_start(
    live: list[SegmentSummary], ages: _Ages, config: TopicConfig, log_start: int
) -> int | None:
    """Where ``config``'s retention would have the log start, if past
    ``log_start``; else None. ``live`` are the segments holding records at or
    past the log start, from the index (a listing is not a snapshot: a
    segment's end comes from its header, never from the next key listed). By
    time: the segments written more than ``retention_ms`` before (on the
    store's clock), from the oldest on, stopping at the first whose age is not
    known to be that much; by size: the oldest segments beyond
    ``retention_bytes``. Never past the newest segment of records (the latest
    records stay, as Kafka keeps its active segment; a transaction marker after
    them does not count)."""
    newest = next((s for s in reversed(live) if not s.control), live[-1])
    older = [s for s in live if s.base < newest.base]
    start = log_start
    if config.retention_ms is not None:
        for s in older:
            age = ages.get(s.base)
            if age is None or age < config.retention_ms + CLOCK_GRAIN_MS:
                break
            start = max(start, s.end)
    if config.retention_bytes is not None:
        total = sum(_stored_bytes(s) for s in live)
        for s in older:
            if total <= config.retention_bytes:
                break
            total -= _stored_bytes(s)
            start = max(start, s.end)
    return start if start > log_start else None


def _removable(
    found: list[ObjectInfo],
    now_ms: int,
    delay: int,
    retain_ms: int,
    newest_checkpoint: Callable[[], Checkpoint | None],
    list_compacted: Callable[[], list[ObjectInfo]],
    list_checkpoints: Callable[[], list[ObjectInfo]],
) -> list[Removal]:
    """What may be removed, in the order to remove it (a vacuum killed midway
    is finished by the next: nothing it still needs goes before what depends
    on it): the segments indexed by a checkpoint older than the newest (whose
    chain every client opens from) that lie wholly below the newest log start
    recorded at least ``delay`` (and :data:`CLOCK_GRAIN_MS`) before, or inside
    a compacted object and below a compaction mark both written that long
    before; compacted objects below that log start; the checkpoints of windows
    below the log start (see :func:`_old_checkpoints`); the compaction marks
    superseded, and the log start markers superseded by one older than
    ``retain_ms`` too (it dates the checkpoints' removal); the topic's
    announcements superseded by one written at least ``delay`` before (see
    :func:`_superseded_announcements`). The newest marker of each kind always
    stays: listings of the tail must show it."""
    ripe = _ripe(found, parse_log_start_key, now_ms, delay)
    marks = _ripe(found, parse_compacted_mark_key, now_ms, delay)
    start = max(ripe, default=0)
    mark = max(marks, default=0)
    # the log start the checkpoints below which go: the newest whose object is
    # older than both the delay and retain_ms (the bookkeeping horizon)
    kept = max(_ripe(found, parse_log_start_key, now_ms, max(delay, retain_ms)), default=0)
    announcements = _superseded_announcements(found, now_ms, delay)
    if not start and not mark:
        return announcements
    newest = newest_checkpoint()
    if newest is None:
        return announcements
    objects = [
        (span, info)
        for info in list_compacted()
        if (span := parse_compacted_key(info.key)) is not None
    ]
    held = [span for span, info in objects if _age_ms(info, now_ms) >= delay + CLOCK_GRAIN_MS]
    # a segment's end is the next one's base; only those ending at or before
    # the newest checkpoint's last segment
    limit = newest.segments[-1].base
    segments = sorted(
        (base, info.key) for info in found if (base := parse_segment_key(info.key)) is not None
    )
    out = []
    for (base, key), (following, _) in itertools.pairwise(segments):
        if following > limit:
            break
        if following <= start:
            out.append(
                Removal(key, f"offsets [{base}, {following}) are below the log start {start}")
            )
        elif following <= mark and any(a <= base and following <= b for a, b in held):
            out.append(Removal(key, f"offsets [{base}, {following}) are in a compacted object"))
    out += [
        Removal(info.key, f"compacted offsets [{a}, {b}) are below the log start {start}")
        for (a, b), info in objects
        if b <= start
    ]
    if kept:
        out += _old_checkpoints(list_checkpoints(), newest, kept, retain_ms)
    for parse, newest_ripe, what in (
        (parse_log_start_key, kept, "log start"),
        (parse_compacted_mark_key, mark, "compaction mark"),
    ):
        out += [
            Removal(info.key, f"{what} {offset} was superseded by {newest_ripe}")
            for info in found
            if (offset := parse(info.key)) is not None and offset < newest_ripe
        ]
    return out + announcements


def _superseded_announcements(found: list[ObjectInfo], now_ms: int, delay: int) -> list[Removal]:
    """The announcements of topic versions below one written at least
    ``delay`` before (on the store's clock). Each change of a topic leaves one
    in every partition, and every listing of the tail shows them all: without
    this, a topic altered every hour would make every sync list thousands.
    A client only acts on the newest it lists (it reads the chain from it), so
    the newest is all a listing must show, and it always stays: a version n
    was claimed before n + 1 was announced, so a listing that began after
    version n was claimed shows n's announcement, or n + 1's if it began
    after that was written, unless it ran for longer than the delay."""
    newest = max(_ripe(found, parse_announcement_key, now_ms, delay), default=0)
    return [
        Removal(info.key, f"announcement of topic version {v} superseded by {newest}")
        for info in found
        if (v := parse_announcement_key(info.key)) is not None and v < newest
    ]


def _old_checkpoints(
    listed: list[ObjectInfo], newest: Checkpoint, kept: int, retain_ms: int
) -> list[Removal]:
    """The checkpoints of windows that end at or below ``kept``, a log start
    older than ``retain_ms``, oldest first (what a killed vacuum leaves is
    still a chain of windows), never the newest one's nor any after its start
    (every client opens from the newest). A window ends where the next listed
    one starts (windows are contiguous): a listing that missed one only makes a
    window look longer, so it stays. The window holding the log start ends past
    it and stays."""
    windows = sorted(
        (start, info.key)
        for info in listed
        if (start := parse_checkpoint_key(info.key)) is not None
    )
    out = []
    for (start, key), (end, _) in itertools.pairwise(windows):
        if end > min(kept, newest.start):
            break
        out.append(
            Removal(
                key,
                f"checkpoint of offsets [{start}, {end}), below the log start {kept} "
                f"since more than retain_ms ({retain_ms} ms)",
            )
        )
    return out


def _ripe(
    found: list[ObjectInfo], parse: Callable[[str], int | None], now_ms: int, delay: int
) -> list[int]:
    """The offsets of the markers ``parse`` reads among ``found`` that were
    written at least ``delay`` before ``now_ms`` (on the store's clock, which
    S3 reports to the second)."""
    return [
        offset
        for info in found
        if (offset := parse(info.key)) is not None
        and _age_ms(info, now_ms) >= delay + CLOCK_GRAIN_MS
    ]


def _age_ms(info: ObjectInfo, now_ms: int) -> int:
    return -1 if info.modified_ms is None else now_ms - info.modified_ms


def _ms(info: ObjectInfo) -> int:
    assert info.modified_ms is not None  # an object of a known age
    return info.modified_ms


def _stored_bytes(s: SegmentSummary) -> int:
    """The bytes an object holds: a commit's own and its staged objects'."""
    return s.size + sum(r.size for r in s.refs)


def _written_since(found: list[ObjectInfo], ms: int, default: int) -> int:
    """The base of the first segment listed in ``found`` that was written at
    or after ``ms`` on the store's clock (or whose time is unknown); the
    objects below it were all written before (each one after those below
    it: its writer knew them), so they name no object staged since."""
    bases = [
        base
        for info in found
        if (base := parse_segment_key(info.key)) is not None
        and (info.modified_ms is None or info.modified_ms >= ms)
    ]
    return min(bases, default=default)
