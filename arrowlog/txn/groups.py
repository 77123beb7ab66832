"""Consumer group offsets, as a log in the bucket.

Each group has one log under ``_arrowlog/groups/<group>/``; every entry holds the
group's whole committed position (``"topic/partition" -> next offset``) and is
written with put-if-absent after reading the latest, so concurrent commits
serialise.

Offsets sent in a transaction are decided exactly like its records (KIP-447's
pending offsets). The transaction first registers them in its coordinator entry,
then marks itself *pending* in the group's log. From then on a reader of the
group's position asks the coordinator how that transaction ended: committed (from
PREPARE_COMMIT on, the moment its records become visible) -> its offsets count at
once, even if the committer died before applying them; aborted -> they never
count; undecided -> the position of the partitions it names is unstable
(:class:`~arrowlog.errors.UnstableOffsetCommitError`, retriable), since a
consumer that went ahead from the old position would duplicate what the
transaction may yet commit. Finishing the transaction applies (or drops) the
offsets and clears the mark, once per transaction: each entry remembers the last
transaction epoch applied per transactional id, so that a zombie or a second
client rolling the same transaction forward can never move a group back.

An offset is a position in one incarnation of its topic (a topic deleted and
created again under its name is a new log): it is kept under that
incarnation's key, and one read in an incarnation that is no longer the
topic's is refused (:func:`keyed_offsets`), never taken as a position in the
new topic.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING

from arrowlog import _checked_json, _clock
from arrowlog.config import RetryPolicy
from arrowlog.errors import (
    ConcurrentTransactionsError,
    CorruptObjectError,
    InvalidConfigError,
    TopicRecreatedError,
    TransientStoreError,
    UnstableOffsetCommitError,
)
from arrowlog.format.checkpoint import Decision
from arrowlog.txn.coordinator import check_id
from arrowlog.txn.entrylog import entry_name, landed, parse_entry_name

if TYPE_CHECKING:
    from arrowlog.txn.resolver import TxnResolver
    from arrowlog.txn.view import LogView
from arrowlog.format.topic import parse_topic_prefix, topic_prefix
from arrowlog.storage import Store

GROUPS_PREFIX = "_arrowlog/groups/"


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def offset_key(topic: str, incarnation: int, partition: int) -> str:
    """Where a group's offset for a partition is kept: under the prefix of the
    topic's incarnation the offset was read in (``t/0`` as always for a topic
    never deleted, ``t=2/0`` for the one created anew at version 2), so that
    the offsets of a deleted topic never count in one created under its name."""
    return f"{topic_prefix(topic, incarnation)}/{partition}"


def parse_offset_key(key: str) -> tuple[str, int, int]:
    """``(topic, incarnation, partition)`` of an :func:`offset_key`."""
    prefix, _, partition = key.rpartition("/")
    topic, incarnation = parse_topic_prefix(prefix)
    return topic, incarnation, int(partition)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """A consumer's group and the topic incarnation of each partition it read,
    for :meth:`Producer.send_offsets_to_transaction` (Kafka's
    ``consumer.groupMetadata()``): made by :meth:`Consumer.group_metadata`, so
    that offsets sent in a transaction name the log they were read in.

    ``incarnations`` maps (topic, partition) to the incarnation of the topic
    the consumer's position in that partition belongs to; a partition left
    out is taken to be in the topic as it is now."""

    group_id: str
    incarnations: Mapping[tuple[str, int], int] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        check_id("group id", self.group_id)
        # a copy, read-only: the consumer reads on after handing this out
        object.__setattr__(self, "incarnations", MappingProxyType(dict(self.incarnations)))


def keyed_offsets(
    log: LogView,
    offsets: Mapping[tuple[str, int], int],
    *,
    read_in: Mapping[tuple[str, int], int],
    incarnations: Mapping[str, int] | None,
    group_id: str,
) -> dict[str, int]:
    """``offsets`` (next offset to read per (topic, partition)) keyed for a
    group's position (:func:`offset_key`), each under the incarnation it was
    read in: as ``incarnations`` (topic -> incarnation) says, else as
    ``read_in`` (what the consumer read: (topic, partition) -> incarnation)
    says, else the topic's now (offsets obtained elsewhere). Everything is
    checked before anything is written.

    Raises:
        TopicRecreatedError: an offset was read in an incarnation of its topic
            that has since been deleted (the topic of the name now is a new
            log); nothing may be written.
        InvalidConfigError: a bad offset or incarnation, or an incarnation
            given for a topic ``offsets`` does not name.
        UnknownTopicOrPartitionError: no such topic or partition.
    """
    given = dict(incarnations or {})
    for name, incarnation in given.items():
        if isinstance(incarnation, bool) or not isinstance(incarnation, int) or incarnation < 0:
            raise InvalidConfigError(f"incarnation of topic {name!r} must be an int >= 0")
        if name not in {topic for topic, _ in offsets}:
            raise InvalidConfigError(f"incarnations names topic {name!r}, which offsets do not")
    keyed = {}
    for (topic, partition), offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidConfigError(f"offset for {topic}/{partition} must be an int >= 0")
        now = log.topic(topic).incarnation
        named = given.get(topic, read_in.get((topic, partition), now))
        if named > now:  # newer than this client knows: learn the topic anew
            now = log.topic(topic, refresh=True).incarnation
        if named > now:
            raise InvalidConfigError(
                f"incarnation {named} of topic {topic!r} does not exist (it is {now})"
            )
        if named < now:
            raise _recreated(topic, partition, named, now, group_id, given=topic in given)
        log.partition(topic, partition)  # re-reads the topic if beyond its count
        # the incarnation checked, even if the topic is created anew meanwhile:
        # then the offset is the old log's and never counts in the new one
        keyed[offset_key(topic, named, partition)] = offset
    return keyed


def _recreated(
    topic: str, partition: int, named: int, now: int, group_id: str, *, given: bool
) -> TopicRecreatedError:
    source = "given as" if given else "read in"
    return TopicRecreatedError(
        f"group {group_id}: the offset for {topic}/{partition} was {source} incarnation "
        f"{named} of topic {topic!r}, which was deleted; {topic!r} is now incarnation {now}, "
        "a new log whose offsets name other records. Nothing was written. Read "
        f"{topic}/{partition} again from its start (start=None) and commit the offsets of "
        f"those reads; if these offsets are positions in the new topic, say so: "
        f"incarnations={{{topic!r}: {now}}}",
        topic=topic,
        recorded_incarnation=named,
        incarnation=now,
    )


@dataclass(frozen=True)
class GroupState:
    n: int = -1
    offsets: dict[str, int] = field(default_factory=dict)
    #: transactional id -> the last transaction epoch whose offsets were applied
    applied: dict[str, int] = field(default_factory=dict)
    #: transactional id -> the epoch of its transaction whose offsets await its end
    pending: dict[str, int] = field(default_factory=dict)


class GroupOffsets:
    """The committed offsets of one consumer group."""

    def __init__(
        self,
        store: Store,
        group_id: str,
        retry: RetryPolicy,
        *,
        resolver: TxnResolver | None = None,
    ) -> None:
        self._store = store
        self.group_id = check_id("group id", group_id)
        self._retry = retry
        # with a resolver, every write first settles the pending transactions
        # that have been decided (see _settled)
        self._resolver = resolver
        self._prefix = f"{GROUPS_PREFIX}{group_id}/"

    def _key(self, n: int) -> str:
        return f"{self._prefix}{entry_name(n)}"

    def latest(self) -> GroupState:
        """The newest entry: listed, then followed by key (a listing may miss
        the newest entries; see :meth:`CoordinatorLog.latest`)."""
        found = self._retry.call(lambda: list(self._store.list(self._prefix, limit=1)))
        if found and parse_entry_name(found[0].key[len(self._prefix) :]) is not None:
            state = self._read(found[0].key)
        else:  # no entry listed (perhaps only the start object cleanup left)
            state = self._read(self._key(0))
        while state is not None and (after := self._read(self._key(state.n + 1))) is not None:
            state = after
        return state or GroupState()

    def _read(self, key: str) -> GroupState | None:
        try:
            raw = self._retry.call(lambda: self._store.get(key))
        except FileNotFoundError:
            return None
        fields = _checked_json.load(raw, key=key, error=CorruptObjectError)
        return GroupState(
            int(fields["n"]),
            dict(fields["offsets"]),
            dict(fields["applied"]),
            dict(fields.get("pending", {})),
        )

    def position(
        self, resolver: TxnResolver, incarnation: Callable[[str], int | None]
    ) -> tuple[dict[tuple[str, int], int], set[tuple[str, int]]]:
        """The group's position with every decided transaction applied, and the
        partitions an undecided transaction may still move (for those the
        position is only a lower bound). ``incarnation`` gives a topic's current
        incarnation (None: deleted): offsets of another are left out."""
        state, unstable = _settle(self.latest(), self.group_id, resolver)
        current = functools.cache(incarnation)

        def live(keys: Iterable[str]) -> Iterator[tuple[str, tuple[str, int]]]:
            for key in keys:
                topic, k, partition = parse_offset_key(key)
                if current(topic) == k:
                    yield key, (topic, partition)

        offsets = {tp: state.offsets[key] for key, tp in live(state.offsets)}
        return offsets, {tp for _, tp in live(unstable)}

    def mark_pending(self, transactional_id: str, txn_epoch: int) -> None:
        """Record that the transaction ``txn_epoch`` of ``transactional_id`` has
        offsets for this group, before it can commit.

        Raises:
            ConcurrentTransactionsError: other commits kept winning until the deadline.
        """
        # Never over a newer mark: a zombie marking late (its transaction already
        # fenced and decided) must not hide the pending offsets of its successor.
        self._update(
            lambda s: (
                None
                if s.pending.get(transactional_id, -1) >= txn_epoch
                else replace(s, pending={**s.pending, transactional_id: txn_epoch})
            )
        )

    def settle(self, transactional_id: str, txn_epoch: int) -> None:
        """Drop the pending mark of an aborted transaction."""
        self._update(
            lambda s: (
                None
                if s.pending.get(transactional_id) != txn_epoch
                else replace(s, pending=_without(s.pending, transactional_id))
            )
        )

    def commit(
        self,
        offsets: Mapping[str, int],
        *,
        transactional_id: str | None = None,
        txn_epoch: int = -1,
    ) -> bool:
        """Merge ``offsets`` into the group's position. With a transactional id,
        apply at most once per transaction and clear its pending mark (False if
        it was applied already).

        Raises:
            ConcurrentTransactionsError: other commits kept winning until the deadline.
        """

        def change(s: GroupState) -> GroupState | None:
            if transactional_id is None:
                return replace(s, offsets={**s.offsets, **offsets})
            if s.applied.get(transactional_id, -1) >= txn_epoch:
                return None
            pending = s.pending
            if pending.get(transactional_id, -1) <= txn_epoch:
                pending = _without(pending, transactional_id)
            return replace(
                s,
                offsets={**s.offsets, **offsets},
                applied={**s.applied, transactional_id: txn_epoch},
                pending=pending,
            )

        return self._update(change)

    def exists(self) -> bool:
        """Whether the group has committed anything."""
        return self.latest().n >= 0

    def delete(self) -> int:
        """Remove the group's log (an operator's ``--delete``); returns the number
        of entries removed. Newest first, so that a reader racing the delete
        sees an older position or none, never a gap it would follow past.

        Raises:
            UnstableOffsetCommitError: a transaction that is not decided yet has
                offsets for the group (deleting them would let it commit into
                nothing); retriable.
        """
        if self._resolver is not None:
            _, unstable = _settle(self.latest(), self.group_id, self._resolver)
            if unstable:
                raise UnstableOffsetCommitError(
                    f"group {self.group_id}: an undecided transaction has offsets for it; "
                    "retry once it ends (or expires)",
                    partitions={(t, p) for t, _, p in map(parse_offset_key, unstable)},
                )
        keys = [info.key for info in self._retry.call(lambda: list(self._store.list(self._prefix)))]
        # the start objects cleanup left first (they sort last): a delete
        # killed midway must not leave one above the entries a new commit writes
        keys.sort(key=lambda k: parse_entry_name(k[len(self._prefix) :]) is not None)
        for key in keys:  # then the entries, newest first (inverted numbers)
            self._retry.call(lambda key=key: self._store.delete(key))  # type: ignore[misc]
        return len(keys)

    def _update(self, change: Callable[[GroupState], GroupState | None]) -> bool:
        """Write the entry after the latest, as ``change`` makes it from the latest
        (None: nothing to write). Returns whether an entry was written."""
        sleeps = self._retry.sleeps()
        while True:
            seen_at = _clock.elapsed()
            state = self.latest()
            settled = self._settled(state)
            new = change(settled)
            if new is None:
                if settled == state:
                    return False
                new = settled
            fields = {
                "n": state.n + 1,
                "offsets": new.offsets,
                "applied": new.applied,
                "pending": new.pending,
                "written_ms": int(time.time() * 1000),
            }
            try:
                self._store.put_if_absent(self._key(state.n + 1), _checked_json.dump(fields))
                if landed(self._store, self._retry, self._prefix, state.n + 1, seen_at):
                    return True
                # a stray below the log's entries: as if another commit had won
            except (FileExistsError, TransientStoreError):
                pass
            # Lost a race (or the reply): re-read and decide again; every change
            # is idempotent against the state it finds.
            pause = next(sleeps, None)
            if pause is None:
                raise ConcurrentTransactionsError(
                    f"group {self.group_id}: could not update offsets before the deadline"
                ) from None
            time.sleep(pause)

    def _settled(self, state: GroupState) -> GroupState:
        """``state`` with its decided pending transactions settled: a committed
        one's offsets applied, an aborted one's dropped. A write does this before
        its own change, so that a later commit (plain, or of another transactional
        id) lands on top of an earlier one whose committer died before applying
        it, never under it."""
        if self._resolver is None:
            return state
        return _settle(state, self.group_id, self._resolver)[0]


def _settle(state: GroupState, group_id: str, resolver: TxnResolver) -> tuple[GroupState, set[str]]:
    """``state`` with the pending transactions the coordinator has decided
    settled (the undecided ones stay pending), and the partitions ("topic/p")
    the undecided ones may still move."""
    if not state.pending:
        return state, set()
    offsets, applied, pending = dict(state.offsets), dict(state.applied), {}
    unstable: set[str] = set()
    for tid, epoch in sorted(state.pending.items()):
        if applied.get(tid, -1) >= epoch:
            continue
        outcome = resolver.outcome(tid, epoch)
        if outcome.decision is Decision.COMMITTED:
            offsets.update(outcome.offsets.get(group_id, {}))
            applied[tid] = epoch
        elif outcome.decision is Decision.UNDECIDED:
            pending[tid] = epoch
            unstable |= set(outcome.offsets.get(group_id, {}))
    return GroupState(state.n, offsets, applied, pending), unstable


def list_groups(store: Store, retry: RetryPolicy) -> list[str]:
    """The ids of every consumer group with committed offsets."""
    infos = retry.call(lambda: list(store.list(GROUPS_PREFIX)))
    return sorted({info.key[len(GROUPS_PREFIX) :].split("/", 1)[0] for info in infos})


def _without(d: dict[str, int], key: str) -> dict[str, int]:
    return {k: v for k, v in d.items() if k != key}
