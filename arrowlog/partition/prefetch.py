"""Whole segments read by a read's own listing.

A client that lists segments it holds no header for (a new client, or one
far behind) reads each one's head to learn where it ends (the listing rule),
and then the read fetches the same segments whole: two requests per segment
where a plain LIST and GETs make one. While a read that fetches segments
whole is under way (a :class:`Prefetch`, scoped by
:meth:`~arrowlog.partition.PartitionLog.reading`), the listing reads the
segments of its range whole instead, takes each header from them, and keeps
the bytes for the read; past :data:`PREFETCH_BYTES` held in the process, it
reads heads as before. The read checks each one (checksum, offsets, append
id) as if it had fetched it itself.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Sequence

import pyarrow as pa

from arrowlog.format.segment import SegmentHeader
from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES
from arrowlog.storage import Blob

#: a segment decoded (of the read's columns), or its bytes where decoding failed
#: (the read reports why, as it would have)
Kept = tuple[SegmentHeader, pa.RecordBatch] | Blob

#: the bytes the listings of a process's reads may hold for them at once
#: (besides what each read's read-ahead holds: QUEUED_BYTES)
PREFETCH_BYTES = 128 * 1024 * 1024


class Budget:
    """Bytes kept for reads, process-wide: however many partitions are read
    at once, their listings hold at most ``limit``."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._left = limit
        self._lock = threading.Lock()
        #: bumped in a forked child: what reads under way in the parent's
        #: threads reserved is the parent's (those threads are not there to
        #: give it back), and never comes back here
        self.epoch = 0

    def _after_fork(self) -> None:
        self._lock = threading.Lock()
        self._left = self.limit
        self.epoch += 1

    @property
    def held(self) -> int:
        """The bytes kept (or being fetched) for reads now."""
        with self._lock:
            return self.limit - self._left

    def reserve(self, size: int, epoch: int = 0) -> bool:
        with self._lock:
            if size > self._left or epoch != self.epoch:
                return False
            self._left -= size
            return True

    def release(self, size: int, epoch: int = 0) -> None:
        with self._lock:
            if epoch == self.epoch:
                self._left += size


#: the process's budget
BUDGET = Budget(PREFETCH_BYTES)
os.register_at_fork(after_in_child=BUDGET._after_fork)


class Prefetch:
    """What one read under way fetches whole: the segments of offsets ``[start, end)``
    (``start`` None: from the log start; ``end`` None: to the log's end), of
    ``columns`` (None: all; then of any size, else only those too small to
    be read by columns). Thread-safe: the listing's header threads keep, the
    read-ahead threads take; the read drops what is left when it ends."""

    def __init__(self, start: int | None, end: int | None, columns: Sequence[str] | None) -> None:
        self.start = start
        self.end = end
        self.columns = None if columns is None else tuple(columns)
        self._largest = None if columns is None else COLUMN_READ_MIN_BYTES
        self._held = 0  # bytes reserved and not yet handed over or given back
        self._epoch = BUDGET.epoch  # of the process that started the read
        #: key -> what was kept, the bytes reserved for it
        self._kept: dict[str, tuple[Kept, int]] = {}
        self._lock = threading.Lock()

    def wants(self, base: int, end: int | None, size: int, log_start: int) -> bool:
        """Whether to fetch whole the listed segment ``[base, end)`` (``end``
        None: the last listed, its end not known) of ``size`` bytes; if so,
        its bytes are reserved: :meth:`keep` them, or :meth:`give_back`."""
        start = log_start if self.start is None else self.start
        if (end is not None and end <= start) or (self.end is not None and base >= self.end):
            return False
        if self._largest is not None and size >= self._largest:
            return False
        if not BUDGET.reserve(size, self._epoch):
            return False
        with self._lock:
            self._held += size
        return True

    def keep(self, key: str, data: Kept, size: int) -> None:
        """The segment at ``key``, decoded (of :attr:`columns`) or not,
        reserved as ``size`` bytes by :meth:`wants`."""
        with self._lock:
            before = self._kept.get(key)
            self._kept[key] = (data, size)
        if before is not None:  # listed and kept again (a listing repeated)
            self.give_back(before[1])

    def give_back(self, size: int) -> None:
        """Reserved bytes no longer held: a segment whose GET failed, or one
        kept before and replaced by :meth:`keep`."""
        with self._lock:
            self._held -= size
        BUDGET.release(size, self._epoch)

    def holds(self, key: str, columns: Sequence[str] | None) -> bool:
        """Whether :meth:`take` would hand over a segment for ``key``."""
        with self._lock:
            kept = self._kept.get(key)
        return kept is not None and self._fits(kept[0], columns)

    def _fits(self, data: Kept, columns: Sequence[str] | None) -> bool:
        """Bytes fit any read; a decoded segment, a read of its columns."""
        wanted = None if columns is None else tuple(columns)
        return not isinstance(data, tuple) or self.columns == wanted

    def take(self, key: str, columns: Sequence[str] | None) -> Kept | None:
        """The segment kept for ``key``, handed over once; None if there is
        none, or if it was decoded for other columns (a read sharing this one
        wanted others)."""
        with self._lock:
            kept = self._kept.pop(key, None)
            if kept is None:
                return None
            data, size = kept
            self._held -= size
        BUDGET.release(size, self._epoch)
        return data if self._fits(data, columns) else None

    def close(self) -> None:
        """The read is over: what it did not take is dropped."""
        with self._lock:
            held, self._held = self._held, 0
            self._kept.clear()
        BUDGET.release(held, self._epoch)


class Reading:
    """The reads under way on one partition object, each with its
    :class:`Prefetch`. A listing fills the prefetch of the read of the thread
    that lists (none for a thread that is not reading into a table); a fetch
    takes from any of them (the bytes are the segment's, whichever read's
    listing got them); each read drops what is left of its own when it ends,
    whatever the others do."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: list[Prefetch] = []
        self._thread = threading.local()

    @contextlib.contextmanager
    def read(
        self, start: int | None, end: int | None, columns: Sequence[str] | None
    ) -> Iterator[None]:
        """A read of ``[start, end)`` (of ``columns``) into one table under
        way in this thread; inside another of this thread, the outer one's."""
        if getattr(self._thread, "prefetch", None) is not None:
            yield
            return
        prefetch = Prefetch(start, end, columns)
        with self._lock:
            self._active.append(prefetch)
        self._thread.prefetch = prefetch
        try:
            yield
        finally:
            self._thread.prefetch = None
            with self._lock:
                self._active.remove(prefetch)
            prefetch.close()

    def mine(self) -> Prefetch | None:
        """The prefetch of the read under way in this thread, if any."""
        prefetch: Prefetch | None = getattr(self._thread, "prefetch", None)
        return prefetch

    def take(self, key: str, columns: Sequence[str] | None) -> Kept | None:
        """A segment some read's listing kept for ``key``, fit for a read of ``columns``."""
        for prefetch in self._snapshot():
            if prefetch.holds(key, columns):
                kept = prefetch.take(key, columns)
                if kept is not None:
                    return kept
        return None

    def holds(self, key: str, columns: Sequence[str] | None) -> bool:
        return any(p.holds(key, columns) for p in self._snapshot())

    def _snapshot(self) -> list[Prefetch]:
        with self._lock:
            return list(self._active)
