"""The transactional half of a producer: fencing older instances, running a
transaction under the epoch the last entry granted, and ending it with one
coordinator write on the caller's path (PREPARE, the commit point); markers,
offsets and the COMPLETE entry, which grants the next epoch, follow in the
background. docs/transactions.md argues why each guarantee still holds.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Self

from arrowlog import _clock
from arrowlog.errors import (
    ArrowLogError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    ProducerFencedError,
    TransactionTimeoutError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.topic import Topic
from arrowlog.producer._base import ProducerState, _ProducerBase
from arrowlog.txn.coordinator import (
    EXPIRE,
    EXPIRE_ID,
    OPERATOR_ABORT,
    EntryConflictError,
    TxnEntry,
    TxnState,
    check_id,
)
from arrowlog.txn.finish import fence_and_recover, finish, next_epoch
from arrowlog.txn.groups import ConsumerGroupMetadata, GroupOffsets, keyed_offsets, tp_key


@dataclass(frozen=True, slots=True)
class _Unfinished:
    """A transaction past PREPARE whose COMPLETE entry is not known written."""

    prepared: TxnEntry
    reason: str
    #: the COMPLETE entry's write id: a retry recognises an earlier attempt
    write_id: str
    #: the background finishing, or None to finish again in the caller
    future: Future[TxnEntry | None] | None


class _Transactions(_ProducerBase):
    """Transactions (KIP-98); mixed into :class:`~arrowlog.producer.Producer`."""

    # --- transactions -------------------------------------------------------------

    def init_transactions(self) -> None:
        """Become the one live instance of this transactional id: bump the epoch
        (fencing every older instance) and finish the previous instance's
        transaction (roll forward after PREPARE_COMMIT, roll back otherwise).

        Raises:
            ConcurrentTransactionsError: other clients kept changing the id's state.
        """
        coordinator = self._require_transactional()
        with self._lock:
            self._check_usable()
            if self._state is not ProducerState.UNINITIALIZED:
                raise InvalidTxnStateError("init_transactions was called already")
            entry = fence_and_recover(
                self._log, coordinator, reason="init", timeout_ms=self.transaction_timeout_ms
            )
            assert entry is not None
            self._entry = entry
            self._producer_id = entry.producer_id
            self._epoch = entry.producer_epoch
            self._set_state(ProducerState.READY)

    def resume_transaction(self, producer_epoch: int) -> None:
        """Take over, in another process, the open transaction of epoch
        ``producer_epoch`` that another instance of this id began (the driver of a
        distributed job commits what its writer set up). No epoch bump: if anyone
        fenced that epoch meanwhile, this raises ProducerFencedError.

        Raises:
            ProducerFencedError: the epoch is no longer current.
            InvalidTxnStateError: no transaction of that epoch is open.
        """
        coordinator = self._require_transactional()
        with self._lock:
            if self._state is not ProducerState.UNINITIALIZED:
                raise InvalidTxnStateError("resume_transaction on a producer already in use")
            latest = coordinator.latest()
            if latest is None or latest.producer_epoch != producer_epoch:
                self._state = ProducerState.FENCED
                raise ProducerFencedError(
                    f"{self.transactional_id!r}: epoch {producer_epoch} is no longer current"
                )
            if latest.state is not TxnState.ONGOING or latest.txn_epoch != producer_epoch:
                raise InvalidTxnStateError(
                    f"{self.transactional_id!r}: no registered transaction of epoch "
                    f"{producer_epoch} (a transaction that another process resumes "
                    "registers its partitions first: add_partitions)"
                )
            self._entry = latest
            self._producer_id = latest.producer_id
            self._epoch = producer_epoch
            self._txn_partitions = set(latest.partitions)
            self._txn_incarnations = dict(latest.incarnations)
            self._txn_offsets = {g: dict(o) for g, o in latest.offsets.items()}
            self._txn_ends = {}
            self._txn_first_record = latest.first_record
            self._txn_marked = set()  # marks only if it sends offsets of its own
            self._resumed = True
            self._txn_began = None
            self._txn_started_ms = latest.txn_started_ms
            self.transaction_timeout_ms = latest.timeout_ms
            self._state = ProducerState.IN_TRANSACTION

    def begin_transaction(self) -> None:
        """Start a transaction, locally: it runs under the epoch the latest entry
        granted, and reaches the coordinator log at its commit (or with consumer
        offsets). Records it sends stay undecided until then."""
        self._require_transactional()
        with self._lock:
            self._check_usable()
            if self._state is not ProducerState.READY:
                raise InvalidTxnStateError(
                    f"begin_transaction in state {self._state.value}: "
                    "init_transactions first, and finish the previous transaction"
                )
            self._set_state(ProducerState.IN_TRANSACTION)
            self._txn_partitions = set()
            self._txn_incarnations = {}
            self._txn_offsets = {}
            self._txn_ends = {}
            self._txn_first_record = ""
            self._txn_marked = set()
            self._resumed = False
            self._txn_started_ms = int(time.time() * 1000)
            self._txn_began = _clock.elapsed()
            self._sequences = {}

    def add_partitions(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Register partitions with the transaction in one coordinator write.

        Only a transaction that another process will take over needs it
        (:meth:`resume_transaction` finds the partitions there): from this
        entry on, each partition the transaction sends to is registered before
        its data, one write each. Any other transaction skips the call: a send
        adds its partition without a request, and the coordinator log learns
        the partitions at PREPARE."""
        self._require_transactional()
        with self._lock:
            self._check_usable()
            self._check_in_transaction("add_partitions")
            # re-reads each topic if beyond its count; every check before any write
            joining = [(tp, self._log.partition(*tp).opened_topic()) for tp in partitions]
            for _, topic in joining:
                self._check_joinable(topic)
            for tp, topic in joining:
                self._join(tp, topic)
            self._register()

    def send_offsets_to_transaction(
        self,
        offsets: Mapping[tuple[str, int], int],
        group_id: str | ConsumerGroupMetadata,
        *,
        incarnations: Mapping[str, int] | None = None,
    ) -> None:
        """Commit consumer offsets (next offset to read, per (topic, partition))
        for a group as part of the transaction: they become the group's
        position only if the transaction commits.

        Give the group as the consuming consumer's ``group_metadata()`` (as
        Kafka's ``sendOffsetsToTransaction(offsets, consumer.groupMetadata())``):
        each offset is then kept as a position in the incarnation of the topic
        that consumer read the partition in (see :meth:`Consumer.commit`). With
        a bare group id, offsets are taken as positions in their topics as they
        are now, unless ``incarnations`` (topic -> incarnation) names theirs.

        The offsets stay positions in the incarnation checked here: if the
        topic is deleted and created again before the transaction commits, the
        commit keeps them for the old topic, and the group's position in the
        new one is untouched.

        Raises:
            TopicRecreatedError: an offset belongs to an incarnation that is no
                longer its topic's (it was deleted and created again since the
                read); nothing was written, and the transaction goes on (abort
                it, or commit it without these offsets).
            InvalidConfigError: a bad offset or incarnation.
            InvalidTxnStateError: no transaction.
            UnknownTopicOrPartitionError: no such topic or partition.
        """
        self._require_transactional()
        if isinstance(group_id, ConsumerGroupMetadata):
            group, read_in = group_id.group_id, group_id.incarnations
        else:
            group, read_in = check_id("group id", group_id), {}
        with self._lock:
            self._check_usable()
            self._check_in_transaction("send_offsets_to_transaction")
            keyed = keyed_offsets(
                self._log, offsets, read_in=read_in, incarnations=incarnations, group_id=group
            )
            merged = {**self._txn_offsets.get(group, {}), **keyed}
            self._register(offsets={**self._txn_offsets, group: merged})
            self._mark_pending(group)

    def _mark_pending(self, group_id: str) -> None:
        """After the coordinator entry names the offsets, before anything can
        commit them: from here on readers of the group ask how we ended."""
        if group_id not in self._txn_marked:
            groups = GroupOffsets(
                self._log.store, group_id, self._log.config.retry, resolver=self._log.resolver
            )
            groups.mark_pending(self.transactional_id or "", self._epoch)
            self._txn_marked.add(group_id)

    def _register(self, *, offsets: dict[str, dict[str, int]] | None = None) -> None:
        """Write an ONGOING entry naming the transaction's partitions and consumer
        offsets, if it does not name them already. Consumer offsets are
        registered before the group's log marks the transaction pending: a
        reader of the group that meets the mark learns from this entry which
        positions are unstable."""
        self._settle()
        assert self._entry is not None
        offsets = self._txn_offsets if offsets is None else offsets
        begins = self._entry.state is not TxnState.ONGOING
        partitions = tuple(sorted(self._txn_partitions))
        if not begins and (partitions, offsets) == (self._entry.partitions, self._entry.offsets):
            return
        self._write_entry(
            TxnState.ONGOING,
            reason="begin" if begins else "add",
            partitions=partitions,
            incarnations=dict(self._txn_incarnations),
            offsets=offsets,
            members=(),
            bounds={},
        )
        self._txn_offsets = offsets

    def _registered(self) -> bool:
        """Whether the transaction has an entry (ONGOING): then a partition is
        registered there before it gets data, for whoever resumes it."""
        return self._entry is not None and self._entry.state is TxnState.ONGOING

    def _check_joinable(self, topic: Topic) -> None:
        """Before a partition of ``topic`` joins the transaction (nothing written yet).

        Raises:
            InvalidTransactionTimeoutError: the topic allows shorter transactions.
            UnknownTopicOrPartitionError: the topic is another incarnation than
                the one the transaction joined.
        """
        limit = topic.config.max_transaction_timeout_ms
        if self.transaction_timeout_ms > limit:
            raise InvalidTransactionTimeoutError(
                f"transaction_timeout_ms {self.transaction_timeout_ms} is above topic "
                f"{topic.name!r}'s max_transaction_timeout_ms {limit}"
            )
        self._check_incarnation(topic)

    def _join(self, tp: tuple[str, int], topic: Topic) -> None:
        """Add a partition to the transaction before anything may land there:
        its PREPARE (or an abort) must name every partition it may have data in."""
        self._txn_partitions.add(tp)
        self._txn_incarnations.setdefault(topic.name, topic.incarnation)

    def _check_incarnation(self, topic: Topic) -> None:
        """Refuse to go on with a transaction that registered partitions of a
        topic since deleted and created anew: its markers would go to the old
        topic's partitions only, and records sent to the new one would never
        be decided. Like a send to a deleted topic, the transaction must abort.

        Raises:
            UnknownTopicOrPartitionError: the topic is another incarnation.
        """
        registered = self._txn_incarnations.get(topic.name, topic.incarnation)
        if registered != topic.incarnation:
            self._set_state(ProducerState.ABORTABLE_ERROR)
            raise UnknownTopicOrPartitionError(
                f"topic {topic.name!r} was deleted and created anew during this "
                "transaction; abort it"
            )

    def _write_entry(self, state: TxnState, *, reason: str, **changes: object) -> TxnEntry:
        coordinator = self._require_transactional()
        self._settle()
        prev = self._entry
        assert prev is not None
        fields: dict[str, object] = {
            "n": prev.n + 1,
            "state": state,
            "reason": reason,
            "producer_epoch": self._epoch,
            "txn_epoch": self._epoch,
            "timeout_ms": self.transaction_timeout_ms,
            "txn_started_ms": self._txn_started_ms,
            # the transaction's first entry: its time starts the timeout, or its
            # first record's if that came before
            "txn_begin_n": prev.txn_begin_n if prev.state is TxnState.ONGOING else prev.n + 1,
            "first_record": (
                prev.first_record if prev.state is TxnState.ONGOING else self._txn_first_record
            ),
            **changes,
        }
        write_id = uuid.uuid4().hex
        try:
            entry = coordinator.write(prev, replace(prev, **fields), write_id=write_id)  # type: ignore[arg-type]
        except ArrowLogError as e:
            if e.retriable:
                # it may land later, after attempts of its own: each is ours
                self._doubtful_writes.add((prev.n + 1, write_id))
            raise
        except EntryConflictError as conflict:
            # The entry that took our place says why; later ones may be anything.
            winner = coordinator.entry(prev.n + 1) or conflict.latest
            doubtful = winner is not None and (winner.n, winner.write_id) in self._doubtful_writes
            if doubtful and winner is not None and coordinator.is_stray(winner.n):
                # our attempt landed, but in a key cleanup had freed, below
                # the log: not the log's entry (docs/protocol.md, "Cleaning up")
                coordinator.remove_stray(winner.n)
                winner, doubtful = coordinator.latest(), False
            if doubtful and winner is not None:
                # our own earlier attempt, landed after we gave up on it: it is
                # ours (only hold what you wrote: we wrote it). If it is this very
                # change, it is done; else build this change on top of it.
                self._entry = winner
                self._doubtful_writes.clear()
                intended = replace(prev, **fields)  # type: ignore[arg-type]
                if (
                    replace(intended, written_ms=winner.written_ms, write_id=winner.write_id)
                    == winner
                ):
                    return winner
                return self._write_entry(state, reason=reason, **changes)
            self._state = ProducerState.FENCED
            if winner is not None and winner.reason == EXPIRE_ID:
                raise ProducerFencedError(
                    f"transactional id {self.transactional_id!r} expired: it was idle "
                    "longer than vacuum's retain_ms; a new producer with this id can "
                    "init_transactions() and go on"
                ) from None
            ours = winner is not None and winner.txn_epoch == self._epoch
            name = f"transaction of {self.transactional_id!r} (epoch {self._epoch})"
            if ours and winner is not None and winner.reason == EXPIRE:
                raise TransactionTimeoutError(
                    f"{name} ran past its timeout and was aborted"
                ) from None
            if ours and winner is not None and winner.reason == OPERATOR_ABORT:
                raise ProducerFencedError(
                    f"{name} was aborted by an operator (abort-transaction)"
                ) from None
            epoch = winner.producer_epoch if winner else "?"
            raise ProducerFencedError(
                f"producer for {self.transactional_id!r} (epoch {self._epoch}) was fenced: "
                f"a newer instance has epoch {epoch}"
            ) from None
        self._entry = entry
        self._doubtful_writes.clear()
        return entry

    def commit_transaction(
        self, *, members: Iterable[int] = (), metadata: Mapping[str, str] | None = None
    ) -> None:
        """Commit: write PREPARE_COMMIT, the commit point, and return; markers,
        consumer offsets and COMPLETE_COMMIT follow in the background (the next
        coordinator write of this producer, ``flush`` and ``close`` wait for
        them). The records are visible to read_committed readers from PREPARE on.

        ``members`` names other producer ids whose batches of this transaction
        commit with it (the tasks of a distributed job); ``metadata`` is kept in
        the coordinator log as the last committed transaction's metadata.

        Raises:
            InvalidTxnStateError: no transaction, or it can only be aborted.
            ProducerFencedError: a newer instance owns the transactional id.
            TransactionTimeoutError: the transaction outlived its timeout; it was
                aborted.
        """
        self._end_transaction(commit=True, members=tuple(members), metadata=metadata)

    def abort_transaction(self) -> None:
        """Abort: write PREPARE_ABORT and return (ABORT markers and COMPLETE_ABORT
        follow in the background). Nothing the transaction wrote is ever visible
        under read_committed. A transaction that sent nothing ends locally."""
        self._end_transaction(commit=False)

    def _end_transaction(
        self,
        *,
        commit: bool,
        members: tuple[int, ...] = (),
        metadata: Mapping[str, str] | None = None,
    ) -> None:
        self._require_transactional()
        with self._lock:
            self._check_usable()
            verb = "commit" if commit else "abort"
            if self._state is ProducerState.ENDING:
                assert self._prepare_plan is not None
                planned, reason, extra = self._prepare_plan
                doing = "commit" if planned is TxnState.PREPARE_COMMIT else "abort"
                # (a commit that ran past its timeout prepared an abort: retrying
                # the commit finishes that abort)
                if doing != verb and not (self._prepared_expired and commit):
                    raise InvalidTxnStateError(
                        f"the transaction is past its point of no return ({doing}): "
                        f"call {doing}_transaction again to finish it"
                    )
                prepared = self._prepared
                if prepared is None:  # the PREPARE write itself was in doubt
                    prepared = self._prepared = self._write_entry(planned, reason=reason, **extra)
            else:
                if self._state is ProducerState.ABORTABLE_ERROR and commit:
                    raise InvalidTxnStateError("the transaction failed and can only be aborted")
                if self._state not in (
                    ProducerState.IN_TRANSACTION,
                    ProducerState.ABORTABLE_ERROR,
                ):
                    raise InvalidTxnStateError(f"{verb}_transaction without begin_transaction")
                self._settle()
                assert self._entry is not None
                if not self._txn_partitions and self._entry.state is not TxnState.ONGOING:
                    # nothing was sent and nothing reached the log (a resumed
                    # transaction did, even with no partitions: a job that wrote
                    # no row still ends it): no record has this epoch, which
                    # the next transaction keeps
                    self._set_state(ProducerState.READY)
                    return
                prepared = self._prepare(commit, members, metadata)
            expired = self._prepared_expired
            self._prepared = self._prepare_plan = None
            self._hand_off(prepared, verb)
            self._set_state(ProducerState.READY)
            if expired:
                raise TransactionTimeoutError(
                    f"transaction of {self.transactional_id!r} ran past its timeout "
                    f"({self.transaction_timeout_ms} ms) and was aborted"
                )

    def _prepare(
        self, commit: bool, members: tuple[int, ...], metadata: Mapping[str, str] | None
    ) -> TxnEntry:
        """Write PREPARE_COMMIT (or PREPARE_ABORT): the point of no return. From
        here the producer is ENDING: it sends nothing more, and a retry of the
        call that failed finishes this very entry (never a second PREPARE with
        new bounds)."""
        # this instance's own elapsed time, suspended time included (a resumed
        # transaction's age is the coordinator's to judge: an expirer's entry
        # makes PREPARE fail)
        began = self._txn_began
        expired = began is not None and _clock.elapsed() - began > self.transaction_timeout_ms / 1e3
        commit = commit and not expired
        extra: dict[str, object] = {}
        if commit:
            # every group's pending mark must be in place before the commit point
            # (a failed mark, or a resumed transaction that never saw them made)
            for group_id in sorted(self._txn_offsets):
                self._mark_pending(group_id)
            extra["members"] = members
            extra["bounds"] = self._bounds(members)
            if metadata is not None:
                extra["metadata"] = dict(metadata)
        else:
            extra["members"] = ()
            extra["bounds"] = {}
        # the entry names the whole transaction: the previous entry may be the
        # last transaction's COMPLETE
        extra["partitions"] = tuple(sorted(self._txn_partitions))
        extra["incarnations"] = dict(self._txn_incarnations)
        extra["offsets"] = self._txn_offsets
        planned = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        reason = "commit" if commit else "abort"
        # ENDING before the write: once it may have landed, nothing may be sent,
        # and a retry writes exactly this entry again (recognised if it landed)
        self._prepare_plan = (planned, reason, extra)
        self._prepared_expired = expired
        self._set_state(ProducerState.ENDING)
        self._prepared = self._write_entry(planned, reason=reason, **extra)
        return self._prepared

    def _hand_off(self, prepared: TxnEntry, reason: str) -> None:
        """After PREPARE: finish the transaction in the background and hold, from
        now on, the epoch its COMPLETE entry grants. The next transaction may
        send under that epoch at once: until the COMPLETE lands, readers count
        its records undecided (coordinator.may_begin), and if the COMPLETE loses
        its place to another client's entry, that entry moves the log past the
        epoch, which decides those records aborted. The next coordinator write
        of this producer waits for the COMPLETE (:meth:`_settle`)."""
        coordinator = self._require_transactional()
        write_id = uuid.uuid4().hex
        self._entry = prepared
        self._epoch = next_epoch(prepared)
        self._unfinished = _Unfinished(prepared, reason, write_id, None)
        if self._finisher is None or self._finisher_pid != os.getpid():
            # (a pool copied into a forked child has no thread: it would never run)
            self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="arrowlog-finish")
            self._finisher_pid = os.getpid()
        try:
            future = self._finisher.submit(
                finish, self._log, coordinator, prepared, reason=reason,
                timeout_ms=self.transaction_timeout_ms, write_id=write_id,
            )  # fmt: skip
        except RuntimeError:  # the interpreter is exiting: finish here
            with contextlib.suppress(ArrowLogError):
                self._settle()
            return
        self._unfinished = _Unfinished(prepared, reason, write_id, future)

    def _settle(self) -> None:
        """Wait for the background end of the last transaction, and take the
        COMPLETE entry it wrote as our latest. Finishing that failed (the store
        unreachable until the retry deadline) is done again here.

        Raises:
            ProducerFencedError: another client wrote the entry our COMPLETE
                meant to take; the transaction's outcome stands, but this
                instance holds no epoch any more.
            ArrowLogError: finishing failed again (retriable: call again).
        """
        unfinished = self._unfinished
        if unfinished is None:
            return
        try:
            if unfinished.future is not None:
                complete = unfinished.future.result()
            else:
                complete = finish(
                    self._log, self._require_transactional(), unfinished.prepared,
                    reason=unfinished.reason, timeout_ms=self.transaction_timeout_ms,
                    write_id=unfinished.write_id,
                )  # fmt: skip
        except ArrowLogError:
            self._unfinished = replace(unfinished, future=None)
            raise
        self._unfinished = None
        if complete is None:
            self._state = ProducerState.FENCED
            raise ProducerFencedError(
                f"producer for {self.transactional_id!r} (epoch {self._epoch}) was fenced "
                "while its last transaction finished (that transaction's outcome stands)"
            )
        assert complete.producer_epoch == self._epoch
        self._entry = complete

    def _settle_quietly(self) -> None:
        """:meth:`_settle` for ``close``: the outcome is fixed either way, and a
        transaction left prepared is finished by the next instance."""
        with contextlib.suppress(ArrowLogError):
            self._settle()
        if self._finisher is not None:
            self._finisher.shutdown(wait=True)
            self._finisher = None

    def _bounds(self, members: tuple[int, ...]) -> dict[str, int]:
        """Where the transaction's records end in each of its partitions, fixed
        in PREPARE_COMMIT: records of it written later (by an instance that lost
        the transaction to a resume, or a member's late retry) never join it.

        This instance's own sends give the bound without a request; partitions
        others wrote to (members, or a resumed transaction) are bounded by their
        high watermark now, before the point of no return: complete, not just
        what a listing shows, or an acknowledged record could fall outside.
        """
        own = not members and not self._resumed
        unknown = [tp for tp in self._txn_partitions if not own or tp not in self._txn_ends]
        ends = dict(self._txn_ends) if own else {}
        if unknown:
            with ThreadPoolExecutor(max_workers=min(16, len(unknown))) as pool:
                found = pool.map(
                    lambda tp: self._log.partition(*tp).end_offset(complete=True), unknown
                )
                ends.update(zip(unknown, found, strict=True))
        return {tp_key(t, p): ends[(t, p)] for t, p in sorted(self._txn_partitions)}

    @contextmanager
    def transaction(self) -> Iterator[Self]:
        """``with producer.transaction(): ...`` begins a transaction, commits it on
        a clean exit and aborts it on an exception (which propagates)."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if self._state in (ProducerState.IN_TRANSACTION, ProducerState.ABORTABLE_ERROR):
                self.abort_transaction()
            raise
        self.commit_transaction()
