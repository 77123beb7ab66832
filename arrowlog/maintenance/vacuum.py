"""Removing what no reader needs any more: each topic's retention (by time
and by size) moves its partitions' log starts, and the segments of deleted
records (below the log start) go once their topic's ``delete_delay_ms`` has
passed, a commit object with the staged data objects it names. Staged
objects that no commit names are reported, never removed. See
docs/protocol.md, "Deleting records".
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from arrowlog.config import DEFAULT_RETAIN_MS, TopicConfig, check_retain
from arrowlog.errors import InvalidConfigError, UnknownTopicOrPartitionError
from arrowlog.format.topic import check_topic_name, log_start_key
from arrowlog.maintenance.cleanup import InUse, clean_up, older_under, remove
from arrowlog.partition import Orphan, Removal
from arrowlog.txn.view import CLOCK_PREFIX, store_now_ms

if TYPE_CHECKING:
    from arrowlog.txn.view import LogView

#: a clock object older than this was left by a vacuum that died
STALE_CLOCK_MS = 60_000


class Vacuumed(list[Removal]):
    """What a vacuum removed (or, in a dry run, would), in order; and in
    :attr:`orphans`, the staged data objects it found that no commit object
    names, older than their topic's ``delete_delay_ms``, which it left where
    they are (a writer killed between its upload and its commit leaves one;
    a commit could still name it)."""

    def __init__(self, removed: Iterable[Removal] = (), orphans: Iterable[Orphan] = ()) -> None:
        super().__init__(removed)
        self.orphans = list(orphans)


def vacuum(
    log: LogView,
    topics: Iterable[str] | None = None,
    *,
    dry_run: bool = False,
    retain_ms: int = DEFAULT_RETAIN_MS,
) -> Vacuumed:
    """Remove what :meth:`PartitionLog.plan_vacuum` names in every partition of
    ``topics`` (default: all), segments in offset order (each commit object
    after the staged objects it names); return it, with the orphaned staged
    objects found (left in place). Idempotent:
    killed anywhere, a rerun finishes. With ``dry_run``, nothing is written or
    removed, and the delay is measured on this machine's clock instead of the
    store's (reading the store's clock writes an object). A vacuum of every
    topic (``topics`` None) also removes the bookkeeping idle for longer than
    ``retain_ms`` that nothing refers to (:mod:`arrowlog.maintenance.cleanup`).
    """
    if not isinstance(dry_run, bool):
        raise InvalidConfigError(f"dry_run must be True or False, got {dry_run!r}")
    check_retain(retain_ms)
    names = named_topics(log, topics)
    now_ms = int(time.time() * 1000) if dry_run else store_now_ms(log)
    removed = Vacuumed()
    # the bookkeeping is shared by every topic: only a vacuum of all of them
    # knows what still refers to it
    in_use = InUse() if topics is None else None
    for name in names:
        try:
            config = log.topic(name, refresh=True).config
            for part in log.iter_partitions(name):
                plan = part.plan_vacuum(now_ms, config, retain_ms)
                start, found = plan.start, plan.removals
                removed.orphans += plan.orphans
                if start is not None and not dry_run:
                    # another vacuum may have moved it further meanwhile: what is
                    # reported is what was written
                    moved = part.delete_records(start)
                    start = moved if moved == start else None
                if start is not None:
                    key = log_start_key(part.topic.prefix, part.partition, start)
                    why = f"retention ({_retention(config)}): the log start moves to {start}"
                    removed.append(Removal(key, why))
                # never the only readable copy of records (or of their windows)
                found = part.keep_unreadable_copies(found)
                removed += remove(log, found, dry_run=dry_run)
                if in_use is not None:
                    in_use.note_partition(log, part, now_ms)
        except UnknownTopicOrPartitionError:
            if topics is not None:
                raise
            # deleted since it was listed: its objects go with it
    if not dry_run:
        # clock objects a vacuum killed between writing and removing one left
        # (strictly older than STALE_CLOCK_MS)
        stale = older_under(log, CLOCK_PREFIX, now_ms - STALE_CLOCK_MS - 1)
        why = "a clock object a killed vacuum left"
        removed += remove(log, [Removal(key, why) for key in stale], dry_run=False)
    if in_use is not None:
        removed += clean_up(log, now_ms, retain_ms, in_use, dry_run=dry_run)
    return removed


def named_topics(log: LogView, topics: Iterable[str] | None) -> list[str]:
    """The topics a maintenance run covers: every topic for None, else those
    named, each checked to exist before anything is written.

    Raises:
        InvalidConfigError: ``topics`` is not a list of names.
        InvalidNameError, UnknownTopicOrPartitionError: a bad or missing name.
    """
    if isinstance(topics, str) or not (topics is None or isinstance(topics, Iterable)):
        raise InvalidConfigError(f"topics must be a list of topic names, got {topics!r}")
    if topics is None:
        return log.list_topics()
    names = [check_topic_name(t) for t in topics]
    for name in names:
        log.topic(name, refresh=True)  # a missing topic fails before any write
    return names


def _retention(config: TopicConfig) -> str:
    limits = []
    if config.retention_ms is not None:
        limits.append(f"retention_ms={config.retention_ms}")
    if config.retention_bytes is not None:
        limits.append(f"retention_bytes={config.retention_bytes}")
    return ", ".join(limits)
