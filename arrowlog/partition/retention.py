"""Deleting records: moving the log start (Kafka's DeleteRecords) and, once
the topic's ``delete_delay_ms`` has passed, removing the segments below it.
See docs/protocol.md, "Deleting records".
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass

from arrowlog.checkpoint import Checkpoint
from arrowlog.config import TopicConfig
from arrowlog.errors import OffsetOutOfRangeError
from arrowlog.partition.append import Appends
from arrowlog.storage import ObjectInfo
from arrowlog.topic import (
    compacted_prefix,
    log_start_key,
    parse_compacted_key,
    parse_compacted_mark_key,
    parse_log_start_key,
    parse_segment_key,
    segment_prefix,
)


@dataclass(frozen=True, slots=True)
class Removal:
    """An object ``vacuum`` removes (or, in a dry run, would), and why."""

    key: str
    reason: str


#: how coarse a store's clock may be: S3 reports LastModified to the second, so
#: an object can look up to this much older than it is (vacuum waits this more)
CLOCK_GRAIN_MS = 1000


class Retention(Appends):
    """The log start, and removing what lies below it."""

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
        with self._lock:
            if not self._ensure_open():
                self._sync_tail()
            self._probe_tail()  # the end must cover every acknowledged append
            if not 0 <= before_offset <= self._end:
                raise OffsetOutOfRangeError(
                    f"{self._name}: cannot delete records before {before_offset}: the log "
                    f"holds [{self._log_start}, {self._end})"
                )
            if before_offset <= self._log_start:
                return self._log_start
            key = log_start_key(self._topic.prefix, self._partition, before_offset)
            body = json.dumps({"log_start": before_offset}).encode()
            with contextlib.suppress(FileExistsError):  # recorded by another call
                self._config.retry.call(lambda: self._store.put_if_absent(key, body))
            self._log_start = before_offset
            return before_offset

    def plan_vacuum(self, now_ms: int, config: TopicConfig) -> tuple[int | None, list[Removal]]:
        """What ``vacuum`` does here at ``now_ms`` on the store's clock, from one
        listing of the partition's segments: where ``config``'s retention moves
        the log start (None: nowhere), and what may be removed (see
        :func:`_removable`). Cost: one LIST, one more of the checkpoints if
        anything is ripe (and a sync, unless the partition opens just now)."""
        with self._lock:
            if not self._ensure_open():
                self._sync_tail()
            prefix = segment_prefix(self._topic.prefix, self._partition)
            found = self._retry(lambda: list(self._store.list(prefix)))
            start = _retention_start(found, now_ms, config, self._log_start, self._end)
            delay = self._topic.config.delete_delay_ms
            compacted = compacted_prefix(self._topic.prefix, self._partition)
            return start, _removable(
                found,
                now_ms,
                delay,
                self._newest_checkpoint,
                lambda: self._retry(lambda: list(self._store.list(compacted))),
            )


def _retention_start(
    found: list[ObjectInfo], now_ms: int, config: TopicConfig, log_start: int, end: int
) -> int | None:
    """Where ``config``'s retention would have the log start, if past
    ``log_start``; else None. By time: the segments written more than
    ``retention_ms`` before (on the store's clock), from the oldest on; by size:
    the oldest segments beyond ``retention_bytes``. Never past the newest
    segment (the latest records stay, as Kafka keeps its active segment)."""
    if config.retention_ms is None and config.retention_bytes is None:
        return None
    listed = sorted((b, info) for info in found if (b := parse_segment_key(info.key)) is not None)
    # the segments holding records at or past the log start, oldest first
    ends = [b for b, _ in listed[1:]] + [end]
    live = [(e, info) for (_, info), e in zip(listed, ends, strict=True) if e > log_start]
    start = log_start
    if config.retention_ms is not None:
        for e, info in live[:-1]:
            if _age_ms(info, now_ms) < config.retention_ms + CLOCK_GRAIN_MS:
                break
            start = max(start, e)
    if config.retention_bytes is not None:
        total = sum(info.size for _, info in live)
        for e, info in live[:-1]:
            if total <= config.retention_bytes:
                break
            total -= info.size
            start = max(start, e)
    return start if start > log_start else None


def _removable(
    found: list[ObjectInfo],
    now_ms: int,
    delay: int,
    newest_checkpoint: Callable[[], Checkpoint | None],
    list_compacted: Callable[[], list[ObjectInfo]],
) -> list[Removal]:
    """What may be removed: the segments indexed by a checkpoint older than
    the newest (whose chain every client opens from) that lie wholly below the
    newest log start recorded at least ``delay`` (and :data:`CLOCK_GRAIN_MS`)
    before, or inside a compacted object and below a compaction mark both
    written that long before; compacted objects below that log start; the log
    start markers and compaction marks superseded. The newest marker of each
    kind always stays: listings of the tail must show it."""
    ripe = _ripe(found, parse_log_start_key, now_ms, delay)
    marks = _ripe(found, parse_compacted_mark_key, now_ms, delay)
    start = max(ripe, default=0)
    mark = max(marks, default=0)
    if not start and not mark:
        return []
    newest = newest_checkpoint()
    if newest is None:
        return []
    objects = []
    if mark or start:
        for info in list_compacted():
            span = parse_compacted_key(info.key)
            if span is not None:
                objects.append((span, info))
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
    for parse, newest_ripe, what in (
        (parse_log_start_key, start, "log start"),
        (parse_compacted_mark_key, mark, "compaction mark"),
    ):
        out += [
            Removal(info.key, f"{what} {offset} was superseded by {newest_ripe}")
            for info in found
            if (offset := parse(info.key)) is not None and offset < newest_ripe
        ]
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
