"""Consumer group offsets, as a log in the bucket.

Each group has one log under ``_arrowlog/groups/<group>/``; every entry holds the
group's whole committed position (``"topic/partition" -> next offset``) and is
written with put-if-absent after reading the latest, so concurrent commits
serialise. Offsets sent in a transaction are applied only after the transaction's
PREPARE_COMMIT (they become visible only when it commits), and each entry
remembers the last transaction epoch applied per transactional id, so that a
zombie or a second client rolling the same transaction forward can never move a
group back.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from arrowlog import _checked_json
from arrowlog.config import RetryPolicy
from arrowlog.coordinator import check_id
from arrowlog.errors import ConcurrentTransactionsError, CorruptObjectError, TransientStoreError
from arrowlog.storage import Store

GROUPS_PREFIX = "_arrowlog/groups/"
_INVERT = 10**20 - 1


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


@dataclass(frozen=True)
class GroupState:
    n: int = -1
    offsets: dict[str, int] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)


class GroupOffsets:
    """The committed offsets of one consumer group."""

    def __init__(self, store: Store, group_id: str, retry: RetryPolicy) -> None:
        self._store = store
        self.group_id = check_id("group id", group_id)
        self._retry = retry
        self._prefix = f"{GROUPS_PREFIX}{group_id}/"

    def _key(self, n: int) -> str:
        return f"{self._prefix}{_INVERT - n:020d}.json"

    def latest(self) -> GroupState:
        found = self._retry.call(lambda: list(self._store.list(self._prefix, limit=1)))
        if not found:
            return GroupState()
        key = found[0].key
        raw = self._retry.call(lambda: self._store.get(key))
        fields = _checked_json.load(raw, key=key, error=CorruptObjectError)
        return GroupState(int(fields["n"]), dict(fields["offsets"]), dict(fields["applied"]))

    def committed(self) -> dict[tuple[str, int], int]:
        """Every committed offset of the group, by (topic, partition)."""
        out = {}
        for key, offset in self.latest().offsets.items():
            topic, _, partition = key.rpartition("/")
            out[(topic, int(partition))] = offset
        return out

    def commit(
        self,
        offsets: Mapping[str, int],
        *,
        transactional_id: str | None = None,
        txn_epoch: int = -1,
    ) -> bool:
        """Merge ``offsets`` into the group's position. With a transactional id,
        apply at most once per transaction (False if it was applied already).

        Raises:
            ConcurrentTransactionsError: other commits kept winning until the deadline.
        """
        sleeps = self._retry.sleeps()
        while True:
            state = self.latest()
            if (
                transactional_id is not None
                and state.applied.get(transactional_id, -1) >= txn_epoch
            ):
                return False
            applied = dict(state.applied)
            if transactional_id is not None:
                applied[transactional_id] = txn_epoch
            fields = {
                "n": state.n + 1,
                "offsets": {**state.offsets, **offsets},
                "applied": applied,
                "written_ms": int(time.time() * 1000),
            }
            try:
                self._store.put_if_absent(self._key(state.n + 1), _checked_json.dump(fields))
                return True
            except (FileExistsError, TransientStoreError):
                # Lost a race (or the reply): re-read; an applied transaction is
                # recognised by its epoch, a plain commit is merged again (idempotent).
                pause = next(sleeps, None)
                if pause is None:
                    raise ConcurrentTransactionsError(
                        f"group {self.group_id}: could not commit offsets before the deadline"
                    ) from None
                time.sleep(pause)
