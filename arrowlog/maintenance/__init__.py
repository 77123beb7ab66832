"""Keeping a log small: compaction, retention and vacuum, and cleaning up the
bookkeeping transactions and groups leave behind. Works on any
:class:`arrowlog.txn.view.LogView`; ``log.maintenance`` hands out a
:class:`Maintenance`, and the modules below hold the work."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from arrowlog.config import DEFAULT_RETAIN_MS
from arrowlog.maintenance import compaction as _compaction
from arrowlog.maintenance import vacuum as _vacuum
from arrowlog.maintenance.compaction import DEFAULT_TARGET_BYTES, Compacted
from arrowlog.maintenance.vacuum import Vacuumed
from arrowlog.txn.view import LogView

__all__ = ["Compacted", "Maintenance", "Vacuumed"]


class Maintenance:
    """Compaction and vacuum of a log (what Kafka's log cleaner does, run by
    whoever calls it). Holds nothing but the log; any client may run it, and
    runs that race or die part-way are safe (see docs/protocol.md)."""

    def __init__(self, log: LogView) -> None:
        self._log = log

    def compact(
        self,
        topics: Iterable[str] | None = None,
        *,
        target_bytes: int | None = None,
        dry_run: bool = False,
        progress: Callable[[str, int, list[Compacted]], None] | None = None,
    ) -> list[Compacted]:
        """Rewrite the committed records of decided ranges of small segments
        into compacted objects of about ``target_bytes`` (default 64 MiB), in
        ``topics`` (default: every topic); :meth:`vacuum` removes the segments
        after the topic's ``delete_delay_ms``. ``progress(topic, partition,
        compacted)`` is called as each partition is done. See
        :func:`arrowlog.maintenance.compaction.compact`.

        Raises:
            InvalidConfigError: ``target_bytes`` or ``dry_run`` is not valid
                (nothing is written).
            UnknownTopicOrPartitionError: a named topic does not exist.
        """
        target = DEFAULT_TARGET_BYTES if target_bytes is None else target_bytes
        return _compaction.compact(
            self._log, topics, target_bytes=target, dry_run=dry_run, progress=progress
        )

    def vacuum(
        self,
        topics: Iterable[str] | None = None,
        *,
        dry_run: bool = False,
        retain_ms: int | None = None,
    ) -> Vacuumed:
        """Apply each topic's retention, remove the segments of deleted records
        whose delay has passed (a commit object with the staged data objects it
        names), in ``topics`` (default: every topic), and, with no ``topics``,
        the bookkeeping idle for longer than ``retain_ms`` (default 7 days);
        see :func:`arrowlog.maintenance.vacuum.vacuum`. Returns what went,
        and in ``orphans`` the staged objects no commit names, left in place.

        Raises:
            InvalidConfigError: ``topics``, ``dry_run`` or ``retain_ms`` is not
                valid (nothing is written).
            UnknownTopicOrPartitionError: a named topic does not exist.
        """
        retain = DEFAULT_RETAIN_MS if retain_ms is None else retain_ms
        return _vacuum.vacuum(self._log, topics, dry_run=dry_run, retain_ms=retain)
