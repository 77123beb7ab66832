"""The transaction manager a transactional producer holds (KIP-98).

It drives the producer's lifecycle through its transactions: taking the id
(fencing every older instance), running a transaction under the epoch the last
entry granted, registering partitions and consumer offsets where a reader or a
resuming process must find them, and ending it with one coordinator write on
the caller's path (PREPARE, the commit point); markers, offsets and the
COMPLETE entry, which grants the next epoch, follow in the background (see
:mod:`arrowlog.producer._coordinator_session`). docs/transactions.md argues
why each guarantee holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from arrowlog import _clock
from arrowlog.errors import (
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionTimeoutError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.topic import Topic
from arrowlog.partition import AppendResult, PartitionLog
from arrowlog.producer._coordinator_session import CoordinatorSession
from arrowlog.producer._idempotence import Idempotence, TopicPartition
from arrowlog.producer._state import Lifecycle, ProducerState
from arrowlog.txn.coordinator import TxnEntry, TxnState
from arrowlog.txn.finish import next_epoch
from arrowlog.txn.groups import GroupOffsets, keyed_offsets, tp_key
from arrowlog.txn.view import LogView


@dataclass(slots=True)
class _Transaction:
    """The transaction in progress (or the last one), as this instance knows it."""

    partitions: set[TopicPartition] = field(default_factory=set)
    #: topic -> the incarnation whose partitions the transaction registered
    incarnations: dict[str, int] = field(default_factory=dict)
    #: group -> the consumer offsets it commits, keyed as the group's log keeps them
    offsets: dict[str, dict[str, int]] = field(default_factory=dict)
    # where this instance's records of the transaction end, per partition; a
    # resumed transaction knows none (another instance wrote them)
    ends: dict[TopicPartition, int] = field(default_factory=dict)
    marked: set[str] = field(default_factory=set)  # groups whose log marks us pending
    # the segment of the transaction's first record (see TxnEntry.first_record)
    first_record: str = ""
    resumed: bool = False  # taken over from the instance that began it
    started_ms: int = 0
    began: float | None = None  # _clock.elapsed() at begin, in this instance


@dataclass(slots=True)
class _Ending:
    """A transaction past ENDING: the PREPARE entry it writes (again, after a
    failure whose outcome was unknown), and that entry once written."""

    state: TxnState
    reason: str
    fields: dict[str, object]
    #: the caller asked to commit, but the transaction ran past its timeout
    expired: bool
    prepared: TxnEntry | None = None


class TransactionManager:
    """Transactions of one transactional id: the state machine's transitions,
    the transaction's partitions and offsets, begin, resume, commit, abort, and
    the reactions to being fenced.

    Made by the :class:`~arrowlog.producer.Producer`, which calls it under its
    lock; it moves the producer's :class:`~arrowlog.producer._state.Lifecycle`
    and tells its :class:`~arrowlog.producer._idempotence.Idempotence` which
    producer id and epoch each entry grants.
    """

    def __init__(
        self,
        log: LogView,
        transactional_id: str,
        timeout_ms: int,
        *,
        lifecycle: Lifecycle,
        idempotence: Idempotence,
    ) -> None:
        self._log = log
        self._lifecycle = lifecycle
        self._idempotence = idempotence
        self._session = CoordinatorSession(log, transactional_id, lifecycle)
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self._txn = _Transaction()
        self._ending: _Ending | None = None  # while ENDING

    @property
    def last_entry(self) -> TxnEntry | None:
        """The latest coordinator entry this instance knows."""
        return self._session.entry

    # --- taking the id ------------------------------------------------------------

    def init(self) -> None:
        self._lifecycle.check_usable()
        if self._lifecycle.state is not ProducerState.UNINITIALIZED:
            raise InvalidTxnStateError("init_transactions was called already")
        entry = self._session.fence_and_recover(self.timeout_ms)
        self._idempotence.adopt(entry.producer_id, entry.producer_epoch)
        self._lifecycle.move(ProducerState.READY)

    def resume(self, producer_epoch: int) -> None:
        if self._lifecycle.state is not ProducerState.UNINITIALIZED:
            raise InvalidTxnStateError("resume_transaction on a producer already in use")
        latest = self._session.latest()
        if latest is None or latest.producer_epoch != producer_epoch:
            self._lifecycle.end(ProducerState.FENCED)
            raise ProducerFencedError(
                f"{self.transactional_id!r}: epoch {producer_epoch} is no longer current"
            )
        if latest.state is not TxnState.ONGOING or latest.txn_epoch != producer_epoch:
            raise InvalidTxnStateError(
                f"{self.transactional_id!r}: no registered transaction of epoch "
                f"{producer_epoch} (a transaction that another process resumes "
                "registers its partitions first: add_partitions)"
            )
        self._session.hold(latest)
        self._idempotence.adopt(latest.producer_id, producer_epoch)
        self._txn = _Transaction(
            partitions=set(latest.partitions),
            incarnations=dict(latest.incarnations),
            offsets={g: dict(o) for g, o in latest.offsets.items()},
            first_record=latest.first_record,
            resumed=True,  # marks groups only if it sends offsets of its own
            started_ms=latest.txn_started_ms,
        )
        self.timeout_ms = latest.timeout_ms
        self._lifecycle.move(ProducerState.IN_TRANSACTION)

    # --- running a transaction ----------------------------------------------------

    def begin(self) -> None:
        self._lifecycle.check_usable()
        if self._lifecycle.state is not ProducerState.READY:
            raise InvalidTxnStateError(
                f"begin_transaction in state {self._lifecycle.state.value}: "
                "init_transactions first, and finish the previous transaction"
            )
        self._lifecycle.move(ProducerState.IN_TRANSACTION)
        self._txn = _Transaction(started_ms=int(time.time() * 1000), began=_clock.elapsed())
        self._idempotence.restart_sequences()

    def add_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        self._lifecycle.check_usable()
        self._lifecycle.check_in_transaction("add_partitions")
        # re-reads each topic if beyond its count; every check before any write
        joining = [(tp, self._log.partition(*tp).opened_topic()) for tp in partitions]
        for _, topic in joining:
            self._check_joinable(topic)
        for tp, topic in joining:
            self._join(tp, topic)
        self._register()

    def send_offsets(
        self,
        offsets: Mapping[TopicPartition, int],
        group: str,
        *,
        read_in: Mapping[TopicPartition, int],
        incarnations: Mapping[str, int] | None,
    ) -> None:
        self._lifecycle.check_usable()
        self._lifecycle.check_in_transaction("send_offsets_to_transaction")
        keyed = keyed_offsets(
            self._log, offsets, read_in=read_in, incarnations=incarnations, group_id=group
        )
        merged = {**self._txn.offsets.get(group, {}), **keyed}
        self._register(offsets={**self._txn.offsets, group: merged})
        self._mark_pending(group)

    def check_sendable(self) -> None:
        """Before a send: only the instance that began a transaction sends in it.

        Raises:
            InvalidTxnStateError: no transaction that takes data, or a resumed one.
        """
        self._lifecycle.check_in_transaction("send")
        if self._txn.resumed:
            raise InvalidTxnStateError(
                "a resumed transaction can only be committed or aborted: the "
                "instance that began it (or its members) send"
            )

    def join_for_send(self, tp: TopicPartition, topic: Topic) -> None:
        """Before a send to ``tp``, after the producer id is known: the partition
        joins the transaction (registered in its entry first, if it has one)."""
        self._check_joinable(topic)
        self._join(tp, topic)
        if self._registered():
            self._register()  # a resumable transaction names it first

    def send_in_doubt(self) -> None:
        """A send's outcome is unknown: the transaction can only abort."""
        self._lifecycle.move(ProducerState.ABORTABLE_ERROR)

    def sent(self, tp: TopicPartition, part: PartitionLog, result: AppendResult) -> None:
        """A send landed: it bounds the transaction's records in ``tp``."""
        self._txn.ends[tp] = max(self._txn.ends.get(tp, 0), result.next_offset)
        if not self._txn.first_record:  # the transaction's age starts here
            self._txn.first_record = part.segment_key(result.base_offset)

    def _mark_pending(self, group_id: str) -> None:
        """After the coordinator entry names the offsets, before anything can
        commit them: from here on readers of the group ask how we ended."""
        if group_id not in self._txn.marked:
            groups = GroupOffsets(
                self._log.store, group_id, self._log.config.retry, resolver=self._log.resolver
            )
            groups.mark_pending(self.transactional_id, self._idempotence.epoch)
            self._txn.marked.add(group_id)

    def _register(self, *, offsets: dict[str, dict[str, int]] | None = None) -> None:
        """Write an ONGOING entry naming the transaction's partitions and consumer
        offsets, if it does not name them already. Consumer offsets are
        registered before the group's log marks the transaction pending: a
        reader of the group that meets the mark learns from this entry which
        positions are unstable."""
        self._session.settle()
        entry = self._session.entry
        assert entry is not None
        offsets = self._txn.offsets if offsets is None else offsets
        begins = entry.state is not TxnState.ONGOING
        partitions = tuple(sorted(self._txn.partitions))
        if not begins and (partitions, offsets) == (entry.partitions, entry.offsets):
            return
        self._write_entry(
            TxnState.ONGOING,
            reason="begin" if begins else "add",
            partitions=partitions,
            incarnations=dict(self._txn.incarnations),
            offsets=offsets,
            members=(),
            bounds={},
        )
        self._txn.offsets = offsets

    def _registered(self) -> bool:
        """Whether the transaction has an entry (ONGOING): then a partition is
        registered there before it gets data, for whoever resumes it."""
        entry = self._session.entry
        return entry is not None and entry.state is TxnState.ONGOING

    def _check_joinable(self, topic: Topic) -> None:
        """Before a partition of ``topic`` joins the transaction (nothing written yet).

        Raises:
            InvalidTransactionTimeoutError: the topic allows shorter transactions.
            UnknownTopicOrPartitionError: the topic is another incarnation than
                the one the transaction joined.
        """
        limit = topic.config.max_transaction_timeout_ms
        if self.timeout_ms > limit:
            raise InvalidTransactionTimeoutError(
                f"transaction_timeout_ms {self.timeout_ms} is above topic "
                f"{topic.name!r}'s max_transaction_timeout_ms {limit}"
            )
        self._check_incarnation(topic)

    def _join(self, tp: TopicPartition, topic: Topic) -> None:
        """Add a partition to the transaction before anything may land there:
        its PREPARE (or an abort) must name every partition it may have data in."""
        self._txn.partitions.add(tp)
        self._txn.incarnations.setdefault(topic.name, topic.incarnation)

    def _check_incarnation(self, topic: Topic) -> None:
        """Refuse to go on with a transaction that registered partitions of a
        topic since deleted and created anew: its markers would go to the old
        topic's partitions only, and records sent to the new one would never
        be decided. Like a send to a deleted topic, the transaction must abort.

        Raises:
            UnknownTopicOrPartitionError: the topic is another incarnation.
        """
        registered = self._txn.incarnations.get(topic.name, topic.incarnation)
        if registered != topic.incarnation:
            self._lifecycle.move(ProducerState.ABORTABLE_ERROR)
            raise UnknownTopicOrPartitionError(
                f"topic {topic.name!r} was deleted and created anew during this "
                "transaction; abort it"
            )

    def _write_entry(self, state: TxnState, *, reason: str, **changes: object) -> TxnEntry:
        """Write the next coordinator entry of this transaction (see
        :meth:`CoordinatorSession.write` for what a lost race means)."""

        def build(prev: TxnEntry) -> TxnEntry:
            epoch = self._idempotence.epoch
            fields: dict[str, object] = {
                "n": prev.n + 1,
                "state": state,
                "reason": reason,
                "producer_epoch": epoch,
                "txn_epoch": epoch,
                "timeout_ms": self.timeout_ms,
                "txn_started_ms": self._txn.started_ms,
                # the transaction's first entry: its time starts the timeout, or
                # its first record's if that came before
                "txn_begin_n": prev.txn_begin_n if prev.state is TxnState.ONGOING else prev.n + 1,
                "first_record": (
                    prev.first_record if prev.state is TxnState.ONGOING else self._txn.first_record
                ),
                **changes,
            }
            return replace(prev, **fields)  # type: ignore[arg-type]

        return self._session.write(build)

    # --- ending a transaction -----------------------------------------------------

    def end(
        self,
        *,
        commit: bool,
        members: tuple[int, ...] = (),
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        """Commit or abort: write PREPARE, then hand the rest to the background.

        Raises:
            InvalidTxnStateError: no transaction, or not this way of ending it.
            TransactionTimeoutError: a commit of a transaction past its timeout
                (aborted instead).
        """
        self._lifecycle.check_usable()
        verb = "commit" if commit else "abort"
        if self._lifecycle.state is ProducerState.ENDING:
            prepared = self._prepare_again(verb)
        else:
            if self._lifecycle.state is ProducerState.ABORTABLE_ERROR and commit:
                raise InvalidTxnStateError("the transaction failed and can only be aborted")
            if self._lifecycle.state not in (
                ProducerState.IN_TRANSACTION,
                ProducerState.ABORTABLE_ERROR,
            ):
                raise InvalidTxnStateError(f"{verb}_transaction without begin_transaction")
            self._session.settle()
            entry = self._session.entry
            assert entry is not None
            if not self._txn.partitions and entry.state is not TxnState.ONGOING:
                # nothing was sent and nothing reached the log (a resumed
                # transaction did, even with no partitions: a job that wrote
                # no row still ends it): no record has this epoch, which
                # the next transaction keeps
                self._lifecycle.move(ProducerState.READY)
                return
            prepared = self._prepare(commit, members, metadata)
        assert self._ending is not None
        expired = self._ending.expired
        self._ending = None
        # the next transaction may send at once, under the epoch the COMPLETE
        # entry grants (see CoordinatorSession.hand_off)
        self._idempotence.move_to_epoch(next_epoch(prepared))
        self._session.hand_off(prepared, verb, self.timeout_ms)
        self._lifecycle.move(ProducerState.READY)
        if expired:
            raise TransactionTimeoutError(
                f"transaction of {self.transactional_id!r} ran past its timeout "
                f"({self.timeout_ms} ms) and was aborted"
            )

    def _prepare_again(self, verb: str) -> TxnEntry:
        """A retry of the call whose PREPARE failed: write exactly that entry
        (recognised if the first attempt landed), never a second with new bounds.

        Raises:
            InvalidTxnStateError: the retry asks for the other outcome.
        """
        ending = self._ending
        assert ending is not None
        doing = "commit" if ending.state is TxnState.PREPARE_COMMIT else "abort"
        # (a commit that ran past its timeout prepared an abort: retrying the
        # commit finishes that abort)
        if doing != verb and not (ending.expired and verb == "commit"):
            raise InvalidTxnStateError(
                f"the transaction is past its point of no return ({doing}): "
                f"call {doing}_transaction again to finish it"
            )
        if ending.prepared is None:  # the PREPARE write itself was in doubt
            ending.prepared = self._write_entry(ending.state, reason=ending.reason, **ending.fields)
        return ending.prepared

    def _prepare(
        self, commit: bool, members: tuple[int, ...], metadata: Mapping[str, str] | None
    ) -> TxnEntry:
        """Write PREPARE_COMMIT (or PREPARE_ABORT): the point of no return. From
        here the producer is ENDING: it sends nothing more, and a retry of the
        call that failed finishes this very entry (:meth:`_prepare_again`)."""
        # this instance's own elapsed time, suspended time included (a resumed
        # transaction's age is the coordinator's to judge: an expirer's entry
        # makes PREPARE fail)
        began = self._txn.began
        expired = began is not None and _clock.elapsed() - began > self.timeout_ms / 1e3
        commit = commit and not expired
        fields: dict[str, object] = {}
        if commit:
            # every group's pending mark must be in place before the commit point
            # (a failed mark, or a resumed transaction that never saw them made)
            for group_id in sorted(self._txn.offsets):
                self._mark_pending(group_id)
            fields["members"] = members
            fields["bounds"] = self._bounds(members)
            if metadata is not None:
                fields["metadata"] = dict(metadata)
        else:
            fields["members"] = ()
            fields["bounds"] = {}
        # the entry names the whole transaction: the previous entry may be the
        # last transaction's COMPLETE
        fields["partitions"] = tuple(sorted(self._txn.partitions))
        fields["incarnations"] = dict(self._txn.incarnations)
        fields["offsets"] = self._txn.offsets
        planned = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        reason = "commit" if commit else "abort"
        # ENDING before the write: once it may have landed, nothing may be sent,
        # and a retry writes exactly this entry again (recognised if it landed)
        ending = self._ending = _Ending(planned, reason, fields, expired)
        self._lifecycle.move(ProducerState.ENDING)
        ending.prepared = self._write_entry(planned, reason=reason, **fields)
        return ending.prepared

    def _bounds(self, members: tuple[int, ...]) -> dict[str, int]:
        """Where the transaction's records end in each of its partitions, fixed
        in PREPARE_COMMIT: records of it written later (by an instance that lost
        the transaction to a resume, or a member's late retry) never join it.

        This instance's own sends give the bound without a request; partitions
        others wrote to (members, or a resumed transaction) are bounded by their
        high watermark now, before the point of no return: complete, not just
        what a listing shows, or an acknowledged record could fall outside.
        """
        own = not members and not self._txn.resumed
        unknown = [tp for tp in self._txn.partitions if not own or tp not in self._txn.ends]
        ends = dict(self._txn.ends) if own else {}
        if unknown:
            with ThreadPoolExecutor(max_workers=min(16, len(unknown))) as pool:
                found = pool.map(
                    lambda tp: self._log.partition(*tp).end_offset(complete=True), unknown
                )
                ends.update(zip(unknown, found, strict=True))
        return {tp_key(t, p): ends[(t, p)] for t, p in sorted(self._txn.partitions)}

    # --- the last transaction's background end ------------------------------------

    def settle(self) -> None:
        """Wait until the last transaction is finished (see
        :meth:`CoordinatorSession.settle`)."""
        self._session.settle()

    def settle_quietly(self) -> None:
        self._session.settle_quietly()
