"""The heads of large segments already read, so that a column read fetches
only the columns' bytes.

A read of some columns of a large segment needs its *frame* first (schema,
header, column table, the record batch's metadata: the bytes before the
body), then the columns' ranges. Segments never change, so a process that has
seen a segment's frame once (a column read, or the header read that put the
segment in the tail) knows where the columns lie and fetches them at once: one
round trip per segment instead of two.

Entries are keyed by object key *and* append id, the segment's identity: a key
freed by a removal can hold another object later (docs/protocol.md, rule 3),
and the index names the append id it expects. A kept frame is only a map. The
columns must come from the object the frame came from, since a stray may hold
the very same column bytes under another header: the store's entity tag of
every column range must be the frame's (one request a segment), or, where a
store has no tags, the frame is fetched again once the columns are in and must
equal it. The column table's CRCs check every column byte, and a mismatch
drops the entry and reads the object as it is.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import NamedTuple

from arrowlog.errors import CorruptSegmentError
from arrowlog.format.segment import HEAD_BYTES
from arrowlog.format.segment.projection import frame_end

#: frames kept per process, in bytes (a frame is a few KiB: tens of thousands
#: of large segments)
DEFAULT_LIMIT_BYTES = 32 * 1024 * 1024


class Kept(NamedTuple):
    """A segment's frame, and the store's entity tag of the object it was read
    from (None: the store has none)."""

    frame: bytes
    tag: str | None


class HeadCache:
    """A bounded, thread-safe LRU of segment frames."""

    def __init__(self, limit_bytes: int = DEFAULT_LIMIT_BYTES) -> None:
        self._limit = limit_bytes
        self._held = 0
        self._frames: OrderedDict[tuple[str, str], Kept] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, append_id: str) -> Kept | None:
        with self._lock:
            frame = self._frames.get((key, append_id))
            if frame is not None:
                self._frames.move_to_end((key, append_id))
            return frame

    def keep(self, key: str, append_id: str, frame: bytes, tag: str | None) -> None:
        with self._lock:
            self._forget(key, append_id)
            self._frames[(key, append_id)] = Kept(frame, tag)
            self._held += len(frame)
            while self._held > self._limit and self._frames:
                _, dropped = self._frames.popitem(last=False)
                self._held -= len(dropped.frame)

    def offer(self, key: str, append_id: str, head: bytes | memoryview, tag: str | None) -> None:
        """Keep the frame of a segment whose first bytes were read for another
        reason (its header), if it is large enough to be read by columns."""
        if len(head) < HEAD_BYTES:
            return  # the whole object was smaller: it is always read whole
        try:
            end = frame_end(head, key)
        except CorruptSegmentError:
            return
        if end is not None and end <= len(head):
            self.keep(key, append_id, bytes(head[:end]), tag)

    def drop(self, key: str, append_id: str) -> None:
        with self._lock:
            self._forget(key, append_id)

    def _forget(self, key: str, append_id: str) -> None:
        old = self._frames.pop((key, append_id), None)
        self._held -= len(old.frame) if old is not None else 0

    def _after_fork(self) -> None:
        """In a forked child: a lock another thread of the parent held at the
        fork would never be released there."""
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._frames.clear()
            self._held = 0

    def __len__(self) -> int:
        return len(self._frames)


#: the process's cache (segments are the same objects for every connection)
HEADS = HeadCache()
os.register_at_fork(after_in_child=HEADS._after_fork)
