"""A new client's first look at a partition, started before it knows the topic.

Opening a partition lists its newest checkpoint, under the topic's prefix; a
client that has not read the topic yet must GET it first to learn that
prefix. The prefix is the topic's name for every topic but one created anew
under a used name, so a client on a remote store starts both at once: the
LIST of the newest checkpoint under the name runs while the topic is read,
and the opening takes its answer if the topic's prefix is the name. One
round trip less before a new client's first read or append (three instead
of four for a small read); a LIST wasted when the guess was wrong.

A listing made before the topic was read is as good as one made after: an
opening may start from any checkpoint (a listing is no snapshot: the newest
could always have been written just after it), and one whose chain vacuum
removed meanwhile is opened again from the newest then
(:meth:`~arrowlog.partition.checkpoints.Checkpoints.below_log_start`). An
answer older than :data:`FRESH_S` is not used all the same: the checkpoint
it names may be far behind by then.
"""

from __future__ import annotations

from arrowlog import _clock
from arrowlog._threads import Lane
from arrowlog.errors import ArrowLogError
from arrowlog.storage import ObjectInfo, Store

#: seconds after which a look-ahead's answer is listed again instead
FRESH_S = 1.0


class CheckpointLookAhead:
    """The first key under a checkpoint prefix, listed on a thread of the
    pool from the moment this is made."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.prefix = prefix
        self._began = _clock.elapsed()
        self._task = Lane(1).submit(_first_key, store, prefix)

    def listed(self, prefix: str) -> list[ObjectInfo] | None:
        """What a LIST of ``prefix`` limited to one key returns, as the
        look-ahead got it; None if it listed another prefix, failed (the
        caller lists, with its retries) or is older than :data:`FRESH_S`."""
        if prefix != self.prefix or _clock.elapsed() - self._began > FRESH_S:
            self.discard()
            return None
        try:
            return self._task.result()
        except (ArrowLogError, OSError):
            return None

    def discard(self) -> None:
        """Not used: dropped if not started (if under way, it finishes unread)."""
        self._task.cancel()


def _first_key(store: Store, prefix: str) -> list[ObjectInfo]:
    return list(store.list(prefix, limit=1))
