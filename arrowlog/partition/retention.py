"""Deleting records: moving the log start (Kafka's DeleteRecords) and, once
the topic's ``delete_delay_ms`` has passed, removing the segments below it.
See docs/protocol.md, "Deleting records".
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
    segment_prefix,
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
    ) -> tuple[int | None, list[Removal]]:
        """What ``vacuum`` does here at ``now_ms`` on the store's clock, from one
        listing of the partition's segments: where ``config``'s retention moves
        the log start (None: nowhere), and what may be removed (see
        :func:`_removable`; ``retain_ms`` is the horizon for checkpoints below
        the log start). Cost: one LIST, one more of the checkpoints if
        anything is ripe, one of them all once a log start is older than
        ``retain_ms`` (and a sync, unless the partition opens just now)."""
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
                live = self._reads.summaries(self._known.log_start, self._known.end)
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
            return start, removable


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
        total = sum(s.size for s in live)
        for s in older:
            if total <= config.retention_bytes:
                break
            total -= s.size
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
