"""Schedules that race an init, an expirer or an operator's abort against a
commit, land late replies and fenced zombies' data, and skew clocks: one epoch
holder, no early expiry, the LSO never held, read_committed whole. They held
when tried: regression tests. Each docstring gives the schedule.

Origin: what held in the review of issue 7's fixes (was tests/attack/test_held.py)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.errors import ArrowLogError
from arrowlog.format.topic import segment_key
from arrowlog.producer import ProducerState
from arrowlog.storage import Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.coordinator import CoordinatorLog, TxnState, entry_key
from tests.support.schedules import FAST, FOREVER, SCHEMA, Background, everything, rows, visible


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def _can_commit(p: arrowlog.Producer, value: int) -> bool:
    try:
        p.begin_transaction()
        p.send("t", rows(value), partition=0)
        p.commit_transaction()
        p.flush()  # the markers follow the commit in the background: wait for them
    except arrowlog.ProducerFencedError:
        return False
    return True


def _settled(log: arrowlog.ArrowLog, topic: str = "t") -> bool:
    return log.stable_offsets(topic) == log.end_offsets(topic)


def test_init_racing_a_commit_whose_complete_is_held_rolls_it_forward(
    store: Store, scripted: ScriptedStore
) -> None:
    """Old: PREPARE_COMMIT (entry 1: the data needed none) lands, commit
    returns; marker, COMPLETE (entry 2) held in the background. New
    initialises: restates PREPARE_COMMIT, completes it. Old's COMPLETE loses:
    its commit stands, but it is fenced from then on (flush says so); New can
    commit; the old transaction's record is visible exactly once."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    old = arrowlog.connect(scripted).producer(transactional_id="tx")
    old.init_transactions()
    old.begin_transaction()
    old.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 2))
    commit = Background(old.commit_transaction)
    gate.wait_reached()
    new = arrowlog.connect(store).producer(transactional_id="tx")
    new.init_transactions()
    gate.release()
    commit.result()
    with pytest.raises(arrowlog.ProducerFencedError):
        old.flush()
    assert old.state is ProducerState.FENCED
    assert not _can_commit(old, 8)
    assert _can_commit(new, 2)
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [1, 2]
    assert _settled(log)


def test_init_winning_against_a_held_prepare_commit_fences_the_old_instance(
    store: Store, scripted: ScriptedStore
) -> None:
    """Old's PREPARE_COMMIT PUT (entry 1, its transaction's first) is held;
    New initialises (the log moves past Old's epoch: its records are aborted).
    Old's PREPARE_COMMIT then loses: ProducerFencedError, nothing visible,
    LSO = HW."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    old = arrowlog.connect(scripted).producer(transactional_id="tx")
    old.init_transactions()
    old.begin_transaction()
    old.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 1))
    commit = Background(old.commit_transaction)
    gate.wait_reached()
    arrowlog.connect(store).producer(transactional_id="tx").init_transactions()
    gate.release()
    with pytest.raises(arrowlog.ProducerFencedError):
        commit.result()
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == []
    assert _settled(log)


def test_a_late_prepare_commit_after_the_producer_gave_up_is_finished_by_the_next_instance(
    store: Store, scripted: ScriptedStore
) -> None:
    """PREPARE_COMMIT's PUT times out on the client, every retry gets 503 until
    the deadline (ConcurrentTransactionsError); then the PUT lands. The
    producer, in doubt past its point of no return, refuses an abort; its
    records are visible (decided at PREPARE_COMMIT) and its offsets count; its
    retried commit recognises its own entry and finishes it; the next instance
    commits on top; nothing hangs."""
    setup = arrowlog.connect(store)
    setup.create_topic("t", SCHEMA)
    setup.create_topic("in", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send_offsets_to_transaction({("in", 0): 4}, group_id="g")  # entry 1 (ONGOING)
    late = scripted.late_put(entry_key("tx", 2))
    refusing = scripted.throttle("put_if_absent", entry_key("tx", 2), nth=2, times=FOREVER)
    with pytest.raises(ArrowLogError):
        p.commit_transaction()
    refusing.stop()
    assert late.land()
    # in doubt about its PREPARE_COMMIT, the producer may only retry the commit
    with pytest.raises(arrowlog.InvalidTxnStateError, match="point of no return"):
        p.abort_transaction()
    reader = arrowlog.connect(store).consumer(group_id="g")
    assert visible(reader) == [1]
    assert reader.committed("in", 0) == 4
    p.commit_transaction()  # recognises its own landed entry and finishes it
    p.flush()
    nxt = arrowlog.connect(store).producer(transactional_id="tx")
    nxt.init_transactions()
    assert _can_commit(nxt, 2)
    assert visible(arrowlog.connect(store).consumer()) == [1, 2]
    assert _settled(arrowlog.connect(store))


def test_a_complete_entry_landing_late_leaves_one_epoch_holder(
    store: Store, scripted: ScriptedStore
) -> None:
    """COMPLETE_COMMIT (entry 2), written in the background after commit
    returned, times out on the client and every retry gets 503: flush raises.
    The COMPLETE lands late; a new instance initialises on top of it. The old
    instance's retried flush recognises its own COMPLETE (the transaction is
    committed); the instance, outlived by the new one, cannot commit again
    and is fenced; the new one can; the first transaction is visible once."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    old = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    old.init_transactions()
    old.begin_transaction()
    old.send("t", rows(1), partition=0)
    late = scripted.late_put(entry_key("tx", 2))
    refusing = scripted.throttle("put_if_absent", entry_key("tx", 2), nth=2, times=FOREVER)
    old.commit_transaction()
    with pytest.raises(ArrowLogError):
        old.flush()
    refusing.stop()
    assert late.land()
    new = arrowlog.connect(store).producer(transactional_id="tx")
    new.init_transactions()
    assert new.epoch > 1
    # the retry finishes what it prepared: the transaction is committed, and
    # the instance, outlived by the new one, is fenced at its next entry
    old.flush()
    assert not _can_commit(old, 8)
    assert old.state is arrowlog.ProducerState.FENCED
    assert _can_commit(new, 2)
    assert visible(arrowlog.connect(store).consumer()) == [1, 2]


def test_an_expirer_racing_a_commit_carries_the_commit_through(
    store: Store, scripted: ScriptedStore
) -> None:
    """The expirer finds the transaction's record (past its timeout on the
    store's clock, given as now_ms; the transaction has no entry yet) and is
    held before writing entry 1; the producer writes PREPARE_COMMIT there
    meanwhile and finishes. The expirer's write
    loses, it re-reads: the transaction is complete, so it leaves it alone.
    The record is visible once and nothing hangs."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(store).producer(transactional_id="tx", transaction_timeout_ms=1_000)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 1))
    expirer = arrowlog.connect(scripted)
    future = int(time.time() * 1000) + 60_000
    expire = Background(lambda: expirer.admin.expire_transactions(now_ms=future))
    gate.wait_reached()
    p.commit_transaction()
    gate.release()
    assert expire.result() == []
    assert p.state is ProducerState.READY
    assert visible(arrowlog.connect(store).consumer()) == [1]


def test_an_operator_abort_racing_an_init_leaves_one_epoch_holder(
    store: Store, scripted: ScriptedStore
) -> None:
    """Operator abort is held before its fencing entry; a new instance
    initialises; the abort's write loses and it fences again. The instance is
    fenced by the abort (it came later) and says so; the aborted record stays
    invisible; no two holders of one epoch."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    dead = arrowlog.connect(store).producer(transactional_id="tx")
    dead.init_transactions()
    dead.begin_transaction()
    dead.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 1))
    abort = Background(lambda: arrowlog.connect(scripted).admin.abort_transaction("tx"))
    gate.wait_reached()
    new = arrowlog.connect(store).producer(transactional_id="tx")
    new.init_transactions()
    gate.release()
    info = abort.result()
    assert isinstance(info, arrowlog.TransactionInfo)
    assert info.producer_epoch != new.epoch
    assert not _can_commit(new, 2)
    assert new.state is ProducerState.FENCED
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == []
    assert _settled(log)


def test_a_fenced_zombies_late_data_is_invisible_and_does_not_hold_the_lso(
    store: Store,
) -> None:
    """Zombie Z sends to t/0; New initialises (aborts Z's transaction) and
    commits rows(2); Z sends again to the registered partition (lands), then
    tries to commit (fenced). Readers see [2]; LSO = HW."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    z = arrowlog.connect(store).producer(transactional_id="tx")
    z.init_transactions()
    z.begin_transaction()
    z.send("t", rows(1), partition=0)
    new = arrowlog.connect(store).producer(transactional_id="tx")
    new.init_transactions()
    assert _can_commit(new, 2)
    with contextlib.suppress(ArrowLogError):
        z.send("t", rows(3), partition=0)
    with pytest.raises(arrowlog.ProducerFencedError):
        z.commit_transaction()
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [2]
    assert _settled(log)


def test_an_in_doubt_batch_that_lands_late_is_recognised_by_the_next_send(
    store: Store, scripted: ScriptedStore
) -> None:
    """Idempotent P: send(rows(1)) times out (late PUT) and stays unknown; the
    PUT lands; P sends rows(2): the in-doubt batch is found (not written
    again), rows(2) follows at 1. Offsets contiguous, each batch once."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    scripted.throttle("put_if_absent", seg0, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.AppendOutcomeUnknownError):
        p.send("t", rows(1), partition=0)
    assert late.land()
    assert p.send("t", rows(2), partition=0).base_offset == 1
    assert everything(arrowlog.connect(store)) == [1, 2]


def test_an_expected_offset_send_whose_late_put_lands_is_not_written_twice(
    store: Store, scripted: ScriptedStore
) -> None:
    """send(rows(1), expected_offset=0): PUT times out (late), retries get 503,
    unknown outcome; the late PUT lands; flush settles it as the same batch;
    a retried send(expected_offset=0) gets OffsetMismatchError. rows(1) is at 0
    exactly once."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    scripted.throttle("put_if_absent", seg0, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.AppendOutcomeUnknownError):
        p.send("t", rows(1), partition=0, expected_offset=0)
    assert late.land()
    p.flush()
    with pytest.raises(arrowlog.OffsetMismatchError):
        arrowlog.connect(store).producer().send("t", rows(1), partition=0, expected_offset=0)
    assert everything(arrowlog.connect(store)) == [1]


def test_skewed_clocks_neither_expire_early_nor_hold_the_lso(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A producer whose time.time runs a day ahead begins a transaction; an
    expirer a day ahead, then a day behind, expires nothing (the store's clock
    says it is fresh); with now_ms past its timeout on the store's clock, it
    is expired and the LSO moves."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 86_400)
    p = arrowlog.connect(store).producer(transactional_id="tx", transaction_timeout_ms=5_000)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    expirer = arrowlog.connect(store)
    assert expirer.admin.expire_transactions() == []
    monkeypatch.setattr(time, "time", lambda: real() - 86_400)
    assert expirer.admin.expire_transactions() == []
    monkeypatch.setattr(time, "time", real)
    assert expirer.stable_offsets("t") == {0: 0}
    later = int(real() * 1000) + 10_000
    assert [t.transactional_id for t in expirer.admin.expire_transactions(now_ms=later)] == ["tx"]
    assert _settled(expirer)
    with pytest.raises(arrowlog.TransactionTimeoutError):
        p.commit_transaction()


def test_read_committed_never_shows_control_or_aborted_records(store: Store) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(store).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.abort_transaction()
    with p.transaction():
        p.send("t", rows(2), partition=0)
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [2]
    assert everything(log) == [1, 2]  # markers are never returned as data


def test_a_read_many_racing_an_abort_and_a_commit_is_atomic(
    store: Store, scripted: ScriptedStore
) -> None:
    """The reader is held before its second-round listing of t/1 while T1
    (t/0, t/1) aborts and T2 (t/0, t/1) commits: each in both or neither."""
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    w = arrowlog.connect(store).producer(transactional_id="w")
    w.init_transactions()
    w.begin_transaction()
    w.send("t", rows(1), partition=0)
    w.send("t", rows(1), partition=1)
    gate = scripted.hold("list", "t/1/segments/", nth=2)
    read = Background(
        lambda: (
            arrowlog.connect(scripted)
            .consumer()
            .read_many({("t", 0): (0, None), ("t", 1): (0, None)})
        )
    )
    gate.wait_reached()
    w.abort_transaction()
    with w.transaction():
        w.send("t", rows(2), partition=0)
        w.send("t", rows(2), partition=1)
    gate.release()
    tables = read.result()
    assert isinstance(tables, dict)
    seen = [tables[("t", p)].column("v").to_pylist() for p in (0, 1)]
    assert seen in ([[], []], [[2], [2]])


def test_a_deleted_segment_inside_a_checkpoint_window_is_a_typed_error(store: Store) -> None:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    for i in range(4):
        log.append("t", rows(i), partition=0)
    store.delete(segment_key("t", 0, 1))
    with pytest.raises(arrowlog.SegmentNotFoundError):
        arrowlog.connect(store).read("t", 0)


@pytest.mark.parametrize(
    "bad",
    ["wrong-schema", "empty", "not-arrow", "bad-partition", "bool-partition", "bad-topic"],
)
def test_bad_input_gets_a_typed_error_and_writes_nothing(bad: str) -> None:
    inner = MemoryStore()
    arrowlog.connect(inner).create_topic("t", SCHEMA)
    counting = CountingStore(inner)
    log = arrowlog.connect(counting)
    log.topic("t")
    p = log.producer()
    counting.reset()
    batch: object = rows(1)
    partition: object = 0
    topic = "t"
    if bad == "wrong-schema":
        batch = pa.record_batch({"v": pa.array([1], pa.int32())})
    elif bad == "empty":
        batch = rows()
    elif bad == "not-arrow":
        batch = {"v": [1]}
    elif bad == "bad-partition":
        partition = 7
    elif bad == "bool-partition":
        partition = True
    else:
        topic = "../x"
    with pytest.raises(ArrowLogError):
        p.send(topic, batch, partition=partition)  # type: ignore[arg-type]
    assert counting.counts["put_if_absent"] == 0


def test_no_transaction_left_hanging_after_recovery(store: Store, scripted: ScriptedStore) -> None:
    """Committer dies after its t/0 marker (t/1 marker and COMPLETE fail); the
    next instance rolls forward; both partitions show it; LSO = HW; the
    coordinator's latest entry is complete."""
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send("t", rows(2), partition=1)
    scripted.fail("put_if_absent", "t/1/segments/*", times=FOREVER, maybe_applied=False)
    scripted.fail("put_if_absent", "_arrowlog/coordinator/*", nth=2, times=FOREVER,
                  maybe_applied=False)  # fmt: skip
    p.commit_transaction()  # returns at PREPARE_COMMIT
    with pytest.raises(ArrowLogError):
        p.flush()  # the "crash" behind it
    arrowlog.connect(store).producer(transactional_id="tx").init_transactions()
    log = arrowlog.connect(store)
    assert [visible(log.consumer(), "t", q) for q in (0, 1)] == [[1], [2]]
    assert _settled(log)
    latest = CoordinatorLog(store, "tx", FAST.retry).latest()
    assert latest is not None and latest.state is TxnState.COMPLETE_COMMIT
