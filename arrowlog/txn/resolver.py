"""How transactions ended, as readers and checkpoints ask: the
:class:`TxnResolver` every client holds, which reads a transactional id's
coordinator log (:class:`~arrowlog.txn.coordinator.CoordinatorLog`) and caches
what is decided, and the :class:`Snapshot` one read takes of it, so that a
read across several partitions sees each transaction everywhere or nowhere."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from arrowlog.config import RetryPolicy
from arrowlog.errors import InvalidNameError
from arrowlog.format.checkpoint import Decision, OpenTxn
from arrowlog.storage import Store
from arrowlog.txn.coordinator import CoordinatorLog, TxnEntry

_MAX_CACHED_DECISIONS = 100_000


@dataclass(frozen=True)
class Outcome:
    """How one transaction ended, as far as readers need to know."""

    decision: Decision
    #: producer ids whose batches commit with it: the owner and its members
    committers: frozenset[int] = frozenset()
    #: where its records end in each partition ("topic/partition" -> offset)
    bounds: Mapping[str, int] = field(default_factory=dict)
    #: the consumer offsets it carries: group -> {"topic/partition": offset}
    offsets: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def includes(self, producer_id: int, tp: str, offset: int) -> bool:
        """Whether the batch of ``producer_id`` at ``offset`` of partition ``tp``
        belongs to the committed transaction."""
        if self.decision is not Decision.COMMITTED or producer_id not in self.committers:
            return False
        return offset < self.bounds.get(tp, -1)

    def for_producer(self, producer_id: int) -> Decision:
        """The decision for batches of ``producer_id``: a committed transaction
        commits only its owner's and its members' batches."""
        if self.decision is Decision.COMMITTED and producer_id not in self.committers:
            return Decision.ABORTED
        return self.decision


UNDECIDED = Outcome(Decision.UNDECIDED)
ABORTED = Outcome(Decision.ABORTED)


def outcome_of(entry: TxnEntry | None, decision: Decision) -> Outcome:
    if entry is None or decision is Decision.ABORTED:
        return Outcome(decision)
    if decision is Decision.UNDECIDED:
        return Outcome(decision, offsets=entry.offsets)
    committers = frozenset((entry.producer_id, *entry.members))
    return Outcome(decision, committers, dict(entry.bounds), entry.offsets)


class TxnResolver:
    """Answers "how did this transaction end?" for readers and checkpoints.

    Decided outcomes never change and are cached for the resolver's life;
    UNDECIDED answers are cached only by a :meth:`snapshot`, so that one read
    across several partitions sees each transaction either everywhere or nowhere.
    """

    def __init__(self, store: Store, retry: RetryPolicy) -> None:
        self._store = store
        self._retry = retry
        self._decided: dict[tuple[str, int], Outcome] = {}
        self._lock = threading.Lock()

    def outcome(self, transactional_id: str, txn_epoch: int) -> Outcome:
        key = (transactional_id, txn_epoch)
        with self._lock:
            cached = self._decided.get(key)
        if cached is not None:
            return cached
        try:
            log = CoordinatorLog(self._store, transactional_id, self._retry)
        except InvalidNameError:
            return ABORTED
        decided, entry = log.outcome(txn_epoch)
        found = outcome_of(entry, decided)
        if decided is not Decision.UNDECIDED:
            with self._lock:
                if len(self._decided) >= _MAX_CACHED_DECISIONS:
                    self._decided.clear()  # a long-lived reader must not grow forever
                self._decided[key] = found
        return found

    def decide(self, txn: OpenTxn) -> Decision:
        """The decision for ``txn``'s batches: COMMITTED only for a committer."""
        return self.outcome(txn.transactional_id, txn.producer_epoch).for_producer(txn.producer_id)

    def snapshot(self) -> Snapshot:
        """Decisions that stay the same for the life of the snapshot."""
        return Snapshot(self)


class Snapshot:
    """One read's view of the coordinator: each transaction is asked about once.

    Called like a decide function (``snapshot(txn) -> Decision``). After
    :meth:`freeze`, only transactions *known decided* at the freeze keep their
    decision: those the coordinator had decided when asked, and those with a
    marker seen before the freeze (:meth:`note_marker`). Any other transaction
    counts as UNDECIDED for the rest of the read: a read that fixes its views
    of the partitions after freezing then sees whole every transaction that
    committed before the freeze (its records were all written before its
    PREPARE_COMMIT), and nothing of the others.
    """

    def __init__(self, resolver: TxnResolver) -> None:
        self._resolver = resolver
        self._seen: dict[tuple[str, int], Outcome] = {}
        self._marked: set[tuple[str, int]] = set()
        self._frozen = False

    def outcome(self, transactional_id: str, txn_epoch: int) -> Outcome:
        key = (transactional_id, txn_epoch)
        if key not in self._seen:
            if self._frozen and key not in self._marked:
                return UNDECIDED
            self._seen[key] = self._resolver.outcome(transactional_id, txn_epoch)
        return self._seen[key]

    def __call__(self, txn: OpenTxn) -> Decision:
        return self.outcome(txn.transactional_id, txn.producer_epoch).for_producer(txn.producer_id)

    def note_marker(self, transactional_id: str, txn_epoch: int) -> None:
        """A marker of this transaction was seen: it is decided."""
        if not self._frozen:
            self._marked.add((transactional_id, txn_epoch))

    def known(self, transactional_id: str, txn_epoch: int) -> bool:
        """Whether the transaction was known decided when the snapshot froze (or
        is now, if it has not frozen)."""
        key = (transactional_id, txn_epoch)
        if not self._frozen or key in self._marked:
            return True
        seen = self._seen.get(key)
        return seen is not None and seen.decision is not Decision.UNDECIDED

    def freeze(self) -> None:
        self._frozen = True
