"""The transaction coordinator, as a log in the bucket (KIP-98 without a broker).

Each transactional id has its own ordered log of entries under
``_arrowlog/coordinator/<transactional id>/``. Entry ``n + 1`` is written with
put-if-absent, so of several clients that read entry ``n`` and want to change the
state, exactly one succeeds: the log is a linearizable state machine with no
server. Every entry holds the whole state (no deltas): the producer id, the
*producer epoch* (the fencing token: only its holder may write the next entry,
except a client that fences it by bumping the epoch), and the current or last
transaction: its epoch, state, partitions, consumer offsets and timeout.

Entry keys hold ``10**20 - 1 - n``, so the first key of a LIST is the latest entry.

Every transaction has its own epoch (the producer epoch when it began; completing
a transaction bumps the producer epoch, as KIP-890 does in Kafka). Data batches
carry it, so a reader can ask the coordinator log how *that* transaction ended
(:meth:`CoordinatorLog.decision`): late writes of a finished transaction can never
be taken for a live one.
"""

from __future__ import annotations

import contextlib
import enum
import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, TypeVar

from arrowlog import _checked_json, _clock
from arrowlog._clock import CLOCK_GRAIN_MS
from arrowlog.config import RetryPolicy
from arrowlog.errors import (
    ConcurrentTransactionsError,
    CorruptObjectError,
    InvalidNameError,
    InvalidTxnStateError,
    TransientStoreError,
)
from arrowlog.format.checkpoint import Decision
from arrowlog.partition.producer_ids import PRODUCER_IDS_PREFIX as PRODUCER_IDS_PREFIX
from arrowlog.storage import Store
from arrowlog.txn.entrylog import entry_name, landed, log_start, parse_entry_name, remove_entry

T = TypeVar("T")
COORDINATOR_PREFIX = "_arrowlog/coordinator/"
TXN_IDS_PREFIX = "_arrowlog/transactional-ids/"
#: reasons of the entries that clients other than the producer write
EXPIRE = "expire"  # the transaction outlived its timeout
EXPIRE_ID = "expire-id"  # the id was idle past the cleanup horizon (arrowlog.maintenance.cleanup)
OPERATOR_ABORT = "operator-abort"  # arrowlog abort-transaction
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,248}")


def check_id(kind: str, value: str) -> str:
    """Transactional ids and group ids: the same alphabet as topic names.

    Raises:
        InvalidNameError: the id could escape its prefix or is otherwise unsafe.
    """
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidNameError(
            f"invalid {kind} {value!r}: use 1-249 characters of [A-Za-z0-9._-], "
            "starting with a letter or digit"
        )
    return value


class TxnState(enum.Enum):
    """States of a transactional id's current or last transaction."""

    EMPTY = "EMPTY"  # initialised, no transaction yet
    # begun with an entry: consumer offsets registered, or a distributed job's
    # partitions (a plain transaction's first entry is its PREPARE)
    ONGOING = "ONGOING"
    PREPARE_COMMIT = "PREPARE_COMMIT"  # the point of no return
    PREPARE_ABORT = "PREPARE_ABORT"
    COMPLETE_COMMIT = "COMPLETE_COMMIT"  # every marker written
    COMPLETE_ABORT = "COMPLETE_ABORT"

    @property
    def decision(self) -> Decision:
        if self in (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT):
            return Decision.COMMITTED
        if self in (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT):
            return Decision.ABORTED
        return Decision.UNDECIDED

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_prepared(self) -> bool:
        """Decided, its markers and COMPLETE entry perhaps not written yet."""
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


# Allowed transitions, checked on every write. A state may follow itself: the
# restatement with a bumped producer epoch that fences an older instance.
#
# A complete state (EMPTY, COMPLETE_*) grants its producer epoch to the next
# transaction, which may begin without an entry of its own: its first entry is
# then its PREPARE (the commit point), or the COMPLETE_ABORT of whoever aborts
# it (an expirer, an operator).
_NEXT = frozenset(
    {TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT}
)
_TRANSITIONS: dict[TxnState | None, frozenset[TxnState]] = {
    None: frozenset({TxnState.EMPTY}),
    TxnState.EMPTY: frozenset({TxnState.EMPTY, *_NEXT}),
    TxnState.ONGOING: frozenset(
        {TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT}
    ),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.COMPLETE_COMMIT, *_NEXT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.COMPLETE_ABORT, *_NEXT}),
}


def is_transition_valid(old: TxnState | None, new: TxnState) -> bool:
    return new in _TRANSITIONS[old]


@dataclass(frozen=True, kw_only=True)
class TxnEntry:
    """One entry of a coordinator log: the whole state after a change."""

    n: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    txn_epoch: int = -1
    partitions: tuple[tuple[str, int], ...] = ()
    #: group id -> {"topic/partition": next offset to consume}
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    timeout_ms: int = 60_000
    #: the producer's own clock at begin: informative only, never used for expiry
    txn_started_ms: int = 0
    #: the entry that began the transaction: its time on the store's clock starts
    #: the timeout (one clock for every client)
    txn_begin_n: int = -1
    #: the segment holding the transaction's first record, when it sent records
    #: before its first entry: the timeout starts at that segment's time on the
    #: store if it is earlier than the entry's ("" when it sent none before)
    first_record: str = ""
    written_ms: int = 0
    #: producer ids besides ``producer_id`` whose batches of this transaction commit
    #: with it (the tasks of a Spark job, each with its own sequences); set at
    #: PREPARE_COMMIT, so batches of any other producer id are never committed
    members: tuple[int, ...] = ()
    #: user metadata of the last transaction that reached PREPARE_COMMIT (for
    #: example a job's idempotence version), carried forward by every entry
    metadata: dict[str, str] = field(default_factory=dict)
    #: "topic/partition" -> the offset where the transaction's records in that
    #: partition end, fixed at PREPARE_COMMIT: records of the transaction at or
    #: past it (a late send of an instance that lost the transaction) never join it
    bounds: dict[str, int] = field(default_factory=dict)
    #: topic -> the incarnation of it whose partitions the transaction registered
    #: (absent: 0, as in entries written before topics could be created anew).
    #: Markers go only where the topic is still that incarnation: a transaction
    #: begun on a topic since deleted and created anew has nothing in the new one.
    incarnations: dict[str, int] = field(default_factory=dict)
    #: why this entry was written: begin, add, commit, abort, init (fencing), expire
    reason: str = ""
    #: unique per write: recognises our own entry after a lost reply
    write_id: str = ""
    #: not stored: when (on :func:`arrowlog._clock.elapsed`) the request that
    #: showed this entry began (its read, or its own write); 0 if unknown. A
    #: write after it whose outcome arrives much later is checked (see write)
    seen_at: float = field(default=0.0, compare=False, repr=False)

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(sorted(self.offsets))

    def to_json(self) -> bytes:
        fields = asdict(self)
        del fields["seen_at"]
        fields["state"] = self.state.value
        fields["partitions"] = [list(p) for p in self.partitions]
        fields["members"] = list(self.members)
        return _checked_json.dump(fields)

    @classmethod
    def from_json(cls, raw: bytes | memoryview, *, key: str) -> TxnEntry:
        fields = _checked_json.load(raw, key=key, error=CorruptObjectError)
        try:
            fields["state"] = TxnState(fields["state"])
            fields["partitions"] = tuple((str(t), int(p)) for t, p in fields["partitions"])
            fields["members"] = tuple(int(m) for m in fields.get("members", ()))
            return cls(**fields)
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptObjectError(f"unreadable coordinator entry: {e}", key=key) from e


class EntryConflictError(Exception):
    """Internal: another client wrote the entry we meant to write."""

    def __init__(self, latest: TxnEntry | None) -> None:
        super().__init__("coordinator entry taken")
        self.latest = latest


def entry_key(tid: str, n: int) -> str:
    return f"{COORDINATOR_PREFIX}{tid}/{entry_name(n)}"


def parse_entry_key(key: str) -> int | None:
    """The entry number of an :func:`entry_key` (None for other keys)."""
    return parse_entry_name(key.rpartition("/")[2])


class CoordinatorLog:
    """The coordinator log of one transactional id."""

    def __init__(self, store: Store, transactional_id: str, retry: RetryPolicy) -> None:
        self._store = store
        self.transactional_id = check_id("transactional id", transactional_id)
        self._retry = retry
        self._prefix = f"{COORDINATOR_PREFIX}{self.transactional_id}/"

    def _call(self, call: Callable[[], T]) -> T:
        return self._retry.call(call)

    def latest(self) -> TxnEntry | None:
        """The newest entry. A listing is not a snapshot: it may miss the newest
        entries, so after it the entries that follow are read by key until one
        is missing (one GET more when the listing was right). Deciding on a stale
        entry could call a live transaction aborted, for good."""
        seen_at = _clock.elapsed()
        found = self._call(lambda: list(self._store.list(self._prefix, limit=1)))
        latest = None
        if found and parse_entry_name(found[0].key[len(self._prefix) :]) is not None:
            key = found[0].key
            raw = self._call(lambda: self._store.get(key))
            latest = replace(TxnEntry.from_json(raw, key=key), seen_at=seen_at)
        while (after := self.entry(0 if latest is None else latest.n + 1)) is not None:
            latest = after
        return latest

    def started_ms(self, entry: TxnEntry) -> int | None:
        """When ``entry``'s transaction began, on the store's clock: the time its
        first entry was written, or its first record if that came earlier (a
        transaction that sent records, then registered consumer offsets, is as
        old as its records). None if the store cannot tell."""
        if entry.txn_begin_n < 0:
            return None
        times = []
        for key in (entry_key(self.transactional_id, entry.txn_begin_n), entry.first_record):
            if key and (modified := self._modified_ms(key)) is not None:
                times.append(modified)
        return min(times) if times else None

    def _modified_ms(self, key: str) -> int | None:
        try:
            return self._call(lambda: self._store.head(key)).modified_ms
        except FileNotFoundError:
            return None  # a record's segment removed since: the entry still counts

    def expired(self, entry: TxnEntry, now_ms: int) -> bool:
        """Whether ``entry``'s transaction is unfinished and older than its
        timeout. Its age is measured from the store's own time for the entry that
        began it, never from a time the producer wrote: a producer whose clock
        runs a day ahead must not hold the LSO for a day."""
        if entry.state.is_complete:
            return False
        started = self.started_ms(entry)
        # S3 keeps object times to the second: allow for that much rounding
        return started is not None and now_ms > started + entry.timeout_ms + CLOCK_GRAIN_MS

    def entry(self, n: int) -> TxnEntry | None:
        key = entry_key(self.transactional_id, n)
        seen_at = _clock.elapsed()
        try:
            raw = self._call(lambda: self._store.get(key))
        except FileNotFoundError:
            return None
        return replace(TxnEntry.from_json(raw, key=key), seen_at=seen_at)

    def first_kept(self) -> int:
        """The number of the log's first entry: cleanup (docs/protocol.md,
        "Cleaning up") removes old entries from the bottom after putting a
        start object; what lies below is a stray. One LIST."""
        return log_start(self._store, self._retry, self._prefix)

    def is_stray(self, n: int) -> bool:
        """Whether entry ``n`` lies below the log: a write that landed in a key
        cleanup had freed. One LIST."""
        return n < self.first_kept()

    def remove_stray(self, n: int) -> None:
        remove_entry(self._store, self._retry, self._prefix, n)

    def write(
        self, prev: TxnEntry | None, new: TxnEntry, *, write_id: str | None = None
    ) -> TxnEntry:
        """Write ``new`` as the entry after ``prev`` (with ``write_id``, a retry of
        an attempt whose outcome was unknown: that attempt counts as ours).

        Raises:
            EntryConflictError: another client wrote that entry first (with the
                latest entry, for the caller to decide: fenced, or retry).
            InvalidTxnStateError: the transition is not allowed (a bug).
        """
        expected_n = 0 if prev is None else prev.n + 1
        old_state = None if prev is None else prev.state
        if new.n != expected_n or not is_transition_valid(old_state, new.state):
            raise InvalidTxnStateError(
                f"{self.transactional_id}: cannot go from "
                f"{prev.state.value if prev else 'nothing'} to {new.state.value}"
            )
        # a caller retrying a write whose outcome it could not tell passes the
        # write id of that attempt: if it landed, it is recognised as ours
        new = replace(
            new, written_ms=int(time.time() * 1000), write_id=write_id or uuid.uuid4().hex
        )
        if new.n == 0:
            # before the entry: an id with entries is always listed, so expiry
            # finds every transaction it could leave open
            self._register()
        key = entry_key(self.transactional_id, new.n)
        started = _clock.elapsed()
        new = replace(new, seen_at=started)
        data = new.to_json()
        sleeps = self._retry.sleeps()
        while True:
            try:
                self._store.put_if_absent(key, data)
                break
            except FileExistsError:
                there = self.entry(new.n)
                if there is not None and there.write_id == new.write_id:
                    break  # our own write, its reply lost
                raise EntryConflictError(self.latest()) from None
            except TransientStoreError as e:
                if e.maybe_applied:
                    there = self.entry(new.n)
                    if there is not None:
                        if there.write_id == new.write_id:
                            break
                        raise EntryConflictError(self.latest()) from None
                pause = next(sleeps, None)
                if pause is None:
                    raise ConcurrentTransactionsError(
                        f"{self.transactional_id}: coordinator unavailable: {e}"
                    ) from e
                time.sleep(pause)
        # A write whose outcome came long after the read it followed (or the
        # first entry of a log, whose "no entry yet" no later check can date)
        # may have landed in a key cleanup had freed: then it is not the log's
        # entry, and counts as lost to whoever wrote after (docs/protocol.md,
        # "Cleaning up").
        seen_at = started if prev is None else prev.seen_at
        if not landed(self._store, self._retry, self._prefix, new.n, seen_at):
            raise EntryConflictError(self.latest())
        return new

    def _register(self) -> None:
        # Operators list transactional ids from here, without listing every entry.
        key = f"{TXN_IDS_PREFIX}{self.transactional_id}"
        with contextlib.suppress(FileExistsError):
            self._call(lambda: self._store.put_if_absent(key, b""))

    def decision(self, producer_id: int, txn_epoch: int) -> Decision:
        """How the transaction ``txn_epoch`` of this id ended for batches of
        ``producer_id``: UNDECIDED while it runs; COMMITTED if it committed and
        the producer is its owner or a member; else ABORTED."""
        decided, entry = self.outcome(txn_epoch)
        if decided is not Decision.COMMITTED or entry is None:
            return decided
        committed = producer_id == entry.producer_id or producer_id in entry.members
        return Decision.COMMITTED if committed else Decision.ABORTED

    def outcome(self, txn_epoch: int) -> tuple[Decision, TxnEntry | None]:
        """How the transaction ``txn_epoch`` ended, with the entry that says so.

        The latest entry answers for the current transaction. An older one is
        found by binary search over entry numbers (transaction epochs never
        decrease along the log), and its last entry says how it ended.

        A transaction may write data before its first entry (its PREPARE): it
        runs under the epoch the latest entry grants, or, while its producer's
        previous transaction is prepared and not yet complete, the epoch that
        COMPLETE will grant. Such an epoch is UNDECIDED. Any other epoch the log
        has no entry for is ABORTED, for good: an entry of a transaction is only
        ever written right after the entry that granted its epoch, and that
        place is taken once the log has moved past the epoch.
        """
        latest = self.latest()
        if latest is None:
            return Decision.ABORTED, None
        if latest.txn_epoch < txn_epoch:
            return (Decision.UNDECIDED if may_begin(latest, txn_epoch) else Decision.ABORTED), None
        if latest.txn_epoch == txn_epoch:
            return latest.state.decision, latest
        found, first = self.last_at_or_below(latest, txn_epoch)
        if found is None and first > 0:
            # every entry up to it was removed by cleanup: no record of it is
            # stored outside a compacted object (or it has none)
            return Decision.FORGOTTEN, None
        if found is None or found.txn_epoch != txn_epoch:
            return Decision.ABORTED, None
        # A transaction is superseded only once complete: ONGOING here cannot be
        # its last word unless entries were lost, and then nothing was committed.
        decided = found.state.decision
        return (Decision.ABORTED if decided is Decision.UNDECIDED else decided), found

    def last_at_or_below(self, latest: TxnEntry, txn_epoch: int) -> tuple[TxnEntry | None, int]:
        """The last entry from the log's first to ``latest`` with a transaction
        epoch at most ``txn_epoch`` (the one that answers for it), and the
        first: a binary search (epochs never decrease along the log) that
        starts again if cleanup removes more meanwhile."""
        for _ in range(_SEARCH_ATTEMPTS):
            first = self.first_kept()
            lo, hi = first, latest.n
            found: TxnEntry | None = None
            while lo <= hi:
                mid = (lo + hi) // 2
                entry = self.entry(mid)
                if entry is None:
                    break
                if entry.txn_epoch <= txn_epoch:
                    found, lo = entry, mid + 1
                else:
                    hi = mid - 1
            else:
                return found, first
            if mid >= self.first_kept():
                raise CorruptObjectError(
                    "coordinator log has a hole", key=entry_key(self.transactional_id, mid)
                )
        raise ConcurrentTransactionsError(
            f"{self.transactional_id}: cleanup kept removing entries during a search"
        )


#: how often a search of old outcomes starts again above entries removed under it
_SEARCH_ATTEMPTS = 5


def may_begin(latest: TxnEntry, txn_epoch: int) -> bool:
    """Whether a transaction of ``txn_epoch``, with no entry yet, may still
    write its first entry after ``latest``: the epoch is the one ``latest``
    grants, or the one the COMPLETE after a prepared ``latest`` will grant (a
    producer sends its next transaction while its last one finishes)."""
    if txn_epoch <= latest.txn_epoch:
        return False
    if txn_epoch == latest.producer_epoch:
        return True
    return (
        latest.state.is_prepared
        and latest.producer_epoch == latest.txn_epoch
        and txn_epoch == latest.producer_epoch + 1
    )


def describe(entry: TxnEntry) -> dict[str, Any]:
    """A JSON-friendly view of an entry, for operators."""
    view = json.loads(entry.to_json())
    view.pop("crc32c", None)
    return dict(view)
