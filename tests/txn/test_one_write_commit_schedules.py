"""Adversarial schedules against the one-coordinator-write commit
(docs/transactions.md): a transaction's data go out with no entry, the commit
waits for PREPARE alone, markers and COMPLETE follow in the background, and a
complete entry grants the next transaction its epoch.

Also the readers built on it that must see a transaction whole: the Spark
streaming source's micro-batches and the export-delta and export-iceberg jobs, and idempotence under
a skewed writer's clock.

Each test scripts one schedule with a ScriptedStore (gates, late PUTs, never
sleeps for ordering). Seven of them broke a guarantee when they were written
(docs/transactions.md, the third review round, says which and how each was
closed); the others held. All are regression tests now.
Memory and local-directory stores.

Origin: the attack on the one-write commit (was tests/attack/test_attack_onewrite.py).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import arrowlog
from arrowlog.format.topic import segment_key
from arrowlog.storage import Store
from arrowlog.storage.local import LocalStore
from arrowlog.storage.memory import MemoryStore
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.coordinator import CoordinatorLog, TxnState, entry_key
from tests.support.schedules import (
    FAST,
    FOREVER,
    SCHEMA,
    Background,
    everything,
    landed,
    rows,
    visible,
)


@pytest.fixture(params=["memory", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "memory":
        yield MemoryStore()
    else:
        yield LocalStore(str(tmp_path / "store"), fsync=False)


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def _settled(log: arrowlog.ArrowLog, topic: str = "t") -> bool:
    return log.stable_offsets(topic) == log.end_offsets(topic)


def _ends_with(store: Store, values: list[int]) -> None:
    """A fresh reader sees exactly ``values`` in t/0, and nothing is left undecided."""
    final = arrowlog.connect(store)
    assert visible(final.consumer()) == values
    assert _settled(final)


def _both(tables: dict) -> list[list[int]]:  # type: ignore[type-arg]
    return [tables[("t", p)].column("v").to_pylist() for p in (0, 1)]


# --- the next transaction runs while the last one's end is unfinished --------------


@pytest.mark.parametrize("end", ["commit", "abort"])
def test_next_transaction_lands_before_the_last_ones_failed_marker(
    store: Store, scripted: ScriptedStore, end: str
) -> None:
    """T1 commits (PREPARE, entry 1); its COMMIT marker into t/0 fails until
    the deadline (the background end fails, no COMPLETE). T2 begins and sends
    to t/0 under the epoch T1's COMPLETE will grant: its record lands at 1,
    before any marker of T1. Readers see T1 only; T2 holds the LSO. T2 then
    commits or aborts (finishing T1 first): T1 once, T2 iff committed."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    failing = scripted.fail("put_if_absent", segment_key("t", 0, 1), times=FOREVER,
                            maybe_applied=False)  # fmt: skip
    p.commit_transaction()
    with pytest.raises(arrowlog.ArrowLogError):
        p.flush()  # the background end failed (and again when flush retried it)
    failing.stop()
    p.begin_transaction()
    r = p.send("t", rows(2), partition=0)
    assert r.base_offset == 1  # before T1's marker
    reader = arrowlog.connect(store)
    assert visible(reader.consumer()) == [1]
    assert reader.stable_offsets("t") == {0: 1}
    tables = reader.consumer().read_many({("t", 0): (0, None)})
    assert tables[("t", 0)].column("v").to_pylist() == [1]
    if end == "commit":
        p.commit_transaction()
    else:
        p.abort_transaction()
    p.close()
    final = arrowlog.connect(store)
    assert visible(final.consumer()) == ([1, 2] if end == "commit" else [1])
    assert _settled(final)


# --- the commit point in doubt twice -------------------------------------------------


def test_a_prepare_in_doubt_twice_whose_first_attempt_lands_is_recognised(
    store: Store, scripted: ScriptedStore
) -> None:
    """commit_transaction: the PREPARE_COMMIT PUT (entry 1) times out on the
    client (it will land later) and every retry gets 503: the call fails. The
    caller retries the commit (as documented: it finishes that very entry): the
    retry's first PUT times out too (never lands), its retries get 503: fails
    again. Now the first attempt lands. The third call must recognise its own
    PREPARE and finish it: commit returns, the producer goes on. Instead it
    calls itself fenced though no other client ever wrote an entry."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    key = entry_key("tx", 1)
    late = scripted.late_put(key)
    refusing = scripted.throttle("put_if_absent", key, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.ArrowLogError):
        p.commit_transaction()
    refusing.stop()
    scripted.fail("put_if_absent", key, times=1, maybe_applied=True)
    refusing = scripted.throttle("put_if_absent", key, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.ArrowLogError):
        p.commit_transaction()
    refusing.stop()
    assert late.land()  # the first attempt's PREPARE_COMMIT
    reader = arrowlog.connect(store)
    assert visible(reader.consumer()) == [1]  # committed at the commit point
    p.commit_transaction()  # finishes its own PREPARE
    assert p.state is arrowlog.ProducerState.READY
    with p.transaction():
        p.send("t", rows(2), partition=0)
    p.close()
    _ends_with(store, [1, 2])


def test_offsets_in_doubt_twice_whose_first_attempt_lands_leave_nothing_hanging(
    store: Store, scripted: ScriptedStore
) -> None:
    """send_offsets_to_transaction: its ONGOING entry (entry 1) times out on the
    client (it lands later), retries get 503: the call fails (retriable). The
    caller retries: that attempt's PUT times out too (never lands), retries get
    503. The first attempt lands. The third try must recognise its own entry;
    instead the producer calls itself fenced (no other client wrote anything),
    and its transaction, ONGOING with nobody to end it, holds the LSO."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    log.create_topic("in", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    key = entry_key("tx", 1)
    late = scripted.late_put(key)
    refusing = scripted.throttle("put_if_absent", key, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.ArrowLogError):
        p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
    refusing.stop()
    scripted.fail("put_if_absent", key, times=1, maybe_applied=True)
    refusing = scripted.throttle("put_if_absent", key, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.ArrowLogError):
        p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
    refusing.stop()
    assert late.land()  # the first attempt's ONGOING entry
    try:
        p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
        p.commit_transaction()
        p.close()
    except arrowlog.ProducerFencedError:
        pass  # (today) the assertions below say what that leaves behind
    reader = arrowlog.connect(store)
    assert _settled(reader)  # nothing left undecided
    assert visible(reader.consumer()) == [1]
    assert reader.consumer(group_id="g").committed("in", 0) == 1


def test_offsets_registered_late_do_not_make_a_transaction_younger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A transaction (timeout 1 s) sends a record at store time B: no entry, its
    age counts from that record. At B + 0.9 s it registers consumer offsets
    (its first entry, ONGOING). At B + 2.6 s it is 2.6 s old, past its timeout
    and the second of slack: any client may expire it. The expirer measures
    from the ONGOING entry instead (1.7 s) and leaves it hanging, holding the
    LSO. (The store's clock is faked: the memory store stamps time.time_ns.)"""
    store = MemoryStore()
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    log.create_topic("in", SCHEMA)
    base = time.time_ns()
    clock = [base]
    monkeypatch.setattr(time, "time_ns", lambda: clock[0])
    p = arrowlog.connect(store).producer(transactional_id="tx", transaction_timeout_ms=1_000)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)  # the first record: store time B
    clock[0] = base + 900 * 10**6
    p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")  # ONGOING at B + 0.9 s
    now_ms = base // 10**6 + 2_600
    expired = arrowlog.connect(store).admin.expire_transactions(now_ms=now_ms)
    assert [t.transactional_id for t in expired] == ["tx"]
    assert _settled(arrowlog.connect(store))


# --- an operator's abort racing the commit point ------------------------------------


def test_an_operator_abort_held_while_the_producer_commits_fences_its_next_transaction(
    store: Store, scripted: ScriptedStore
) -> None:
    """The operator's abort reads the latest entry (the init's, granting the
    running transaction's epoch) and is held before writing entry 1. The
    producer's PREPARE_COMMIT takes entry 1 and its COMPLETE entry 2. The
    abort's write loses; it re-reads and aborts what now runs under the epoch
    entry 2 grants: the producer's next transaction. T1 stays committed; T2's
    record is never visible; the producer hears of the operator."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(store).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 1))
    abort = Background(lambda: arrowlog.connect(scripted).admin.abort_transaction("tx"))
    gate.wait_reached()
    p.commit_transaction()
    p.flush()  # COMPLETE (entry 2) written
    p.begin_transaction()
    p.send("t", rows(2), partition=0)
    gate.release()
    info = abort.result()
    assert isinstance(info, arrowlog.TransactionInfo)
    with pytest.raises(arrowlog.ProducerFencedError, match="operator"):
        p.commit_transaction()
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [1]
    assert _settled(log)


def test_a_prepare_held_while_an_operator_aborts_is_fenced_and_invisible(
    store: Store, scripted: ScriptedStore
) -> None:
    """The producer's PREPARE_COMMIT (entry 1, the transaction's first) is held;
    the operator aborts the id (COMPLETE_ABORT of the running epoch at entry 1).
    The PREPARE loses: the producer is told the operator aborted it; its record
    never shows; a new instance commits on top."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 1))
    commit = Background(p.commit_transaction)
    gate.wait_reached()
    arrowlog.connect(store).admin.abort_transaction("tx")
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == []
    assert _settled(log)
    gate.release()
    with pytest.raises(arrowlog.ProducerFencedError, match="operator"):
        commit.result()
    new = arrowlog.connect(store).producer(transactional_id="tx")
    new.init_transactions()
    with new.transaction():
        new.send("t", rows(2), partition=0)
    new.close()
    _ends_with(store, [2])


# --- two instances initialise at once over a transaction with no entry ---------------


def test_concurrent_inits_over_a_dead_transaction_with_no_entry_leave_one_holder(
    store: Store, scripted: ScriptedStore
) -> None:
    """A dead instance sent a record under the epoch of entry 0 (no entry of its
    own). N1's fencing entry 1 is held; N2 initialises (takes entry 1), begins
    and sends. N1's entry loses, it fences again (entry 2). N2's record is
    aborted at once (no transaction may begin under its epoch any more), N2 is
    fenced at its commit, N1 commits; nothing hangs."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    dead = arrowlog.connect(store).producer(transactional_id="tx")
    dead.init_transactions()
    dead.begin_transaction()
    dead.send("t", rows(0), partition=0)
    gate = scripted.hold("put_if_absent", entry_key("tx", 1))
    n1 = arrowlog.connect(scripted).producer(transactional_id="tx")
    init1 = Background(n1.init_transactions)
    gate.wait_reached()
    n2 = arrowlog.connect(store).producer(transactional_id="tx")
    n2.init_transactions()
    n2.begin_transaction()
    n2.send("t", rows(2), partition=0)
    reader = arrowlog.connect(store)
    assert visible(reader.consumer()) == []
    assert reader.stable_offsets("t") == {0: 1}  # N2's record: undecided
    gate.release()
    init1.result()
    assert n1.epoch > n2.epoch
    reader = arrowlog.connect(store)
    assert reader.stable_offsets("t") == reader.end_offsets("t")  # aborted at once
    with pytest.raises(arrowlog.ProducerFencedError):
        n2.commit_transaction()
    with n1.transaction():
        n1.send("t", rows(1), partition=0)
    n1.close()
    _ends_with(store, [1])


# --- a zombie paused inside a send ----------------------------------------------------


def test_a_zombie_paused_inside_a_send_neither_lands_visibly_nor_commits(
    store: Store, scripted: ScriptedStore
) -> None:
    """Zombie Z's data PUT to t/0 offset 0 is held (Z is paused "for a minute"
    inside send). N initialises and commits two transactions into t/0 (taking
    offsets 0..). Z resumes: its PUT finds the offset taken and the newer epoch
    there; Z cannot commit; only N's records are visible."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    z = arrowlog.connect(scripted).producer(transactional_id="tx")
    z.init_transactions()
    z.begin_transaction()
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 0))
    send = Background(lambda: z.send("t", rows(9), partition=0))
    gate.wait_reached()
    n = arrowlog.connect(store).producer(transactional_id="tx")
    n.init_transactions()
    for v in (1, 2):
        with n.transaction():
            n.send("t", rows(v), partition=0)
    n.flush()
    gate.release()
    with pytest.raises(arrowlog.ArrowLogError):
        send.result()
    with pytest.raises(arrowlog.ArrowLogError):
        z.commit_transaction()
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [1, 2]
    assert 9 not in everything(log)
    assert _settled(log)


# --- an expirer while the last commit finishes and the next one sends -----------------


def test_an_expirer_while_the_complete_is_held_keeps_the_commit_and_aborts_the_next(
    store: Store, scripted: ScriptedStore
) -> None:
    """T1 commits; its COMPLETE (entry 2) is held; T2 sends under the epoch it
    would grant. An expirer (the store's clock far ahead) finds T1 prepared and
    past its timeout: it rolls T1 forward and completes it. T1 stays visible;
    T2's record is aborted for good; the producer is fenced; nothing hangs."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted).producer(transactional_id="tx", transaction_timeout_ms=1_000)
    p.init_transactions()
    gate = scripted.hold("put_if_absent", entry_key("tx", 2))
    with p.transaction():
        p.send("t", rows(1), partition=0)
    gate.wait_reached()
    p.begin_transaction()
    p.send("t", rows(2), partition=0)
    future = int(time.time() * 1000) + 600_000
    expired = arrowlog.connect(store).admin.expire_transactions(now_ms=future)
    assert [t.transactional_id for t in expired] == ["tx"]
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [1]
    assert _settled(log)
    gate.release()
    with pytest.raises((arrowlog.ProducerFencedError, arrowlog.TransactionTimeoutError)):
        p.commit_transaction()
    _ends_with(store, [1])


# --- the last COMPLETE lost and landing late, the next transaction in between ---------


def test_a_lost_complete_landing_late_while_the_next_transaction_sends(
    store: Store, scripted: ScriptedStore
) -> None:
    """T1 commits with consumer offsets; its COMPLETE (entry 3) times out on the
    client and every retry gets 503 (the background end fails). T2 sends to
    t/0 under the epoch that COMPLETE grants and registers offsets of its own
    (which must first finish T1: that fails too). The late COMPLETE lands; T2's
    retried offsets and commit recognise it as T1's own. T1 and T2 each count
    once; offsets move 1 then 2; nothing hangs."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=arrowlog.TopicConfig(checkpoint_interval=1))
    log.create_topic("in", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")  # entry 1
    late = scripted.late_put(entry_key("tx", 3))
    refusing = scripted.throttle("put_if_absent", entry_key("tx", 3), nth=2, times=FOREVER)
    p.commit_transaction()  # entry 2
    with pytest.raises(arrowlog.ArrowLogError):
        p.flush()
    p.begin_transaction()
    p.send("t", rows(2), partition=0)
    with pytest.raises(arrowlog.ArrowLogError):
        p.send_offsets_to_transaction({("in", 0): 2}, group_id="g")
    reader = arrowlog.connect(store)
    assert visible(reader.consumer()) == [1]
    assert reader.consumer(group_id="g").committed("in", 0) == 1
    assert late.land()
    refusing.stop()
    reader = arrowlog.connect(store)
    assert visible(reader.consumer()) == [1]
    assert reader.stable_offsets("t")[0] < reader.end_offsets("t")[0]  # T2 undecided
    p.send_offsets_to_transaction({("in", 0): 2}, group_id="g")
    p.commit_transaction()
    p.close()
    final = arrowlog.connect(store)
    assert visible(final.consumer()) == [1, 2]
    assert final.consumer(group_id="g").committed("in", 0) == 2
    assert _settled(final)
    latest = CoordinatorLog(store, "tx", FAST.retry).latest()
    assert latest is not None and latest.state is TxnState.COMPLETE_COMMIT


# --- two inits over a dead committer whose next transaction had sent ------------------


def test_two_inits_over_a_dead_committer_whose_next_transaction_sent(
    store: Store, scripted: ScriptedStore
) -> None:
    """P commits T1 (PREPARE, entry 1) and dies before its COMPLETE, after T2
    sent a record under the epoch that COMPLETE would grant. N1 restates T1's
    PREPARE (entry 2) and is held before its COMPLETE (entry 3); N2 restates
    again (entry 3), completes (entry 4). N1's COMPLETE loses: it fences again
    (entry 5). T1 is visible once, T2 never; N1 alone commits; nothing hangs."""
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    dying = ScriptedStore(store)
    p = arrowlog.connect(dying, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send("t", rows(1), partition=1)
    dying.fail("put_if_absent", entry_key("tx", 2), times=FOREVER, maybe_applied=False)
    p.commit_transaction()
    with pytest.raises(arrowlog.ArrowLogError):
        p.flush()
    p.begin_transaction()
    p.send("t", rows(2), partition=1)  # then P is gone
    gate = scripted.hold("put_if_absent", entry_key("tx", 3))
    n1 = arrowlog.connect(scripted).producer(transactional_id="tx")
    init1 = Background(n1.init_transactions)
    gate.wait_reached()
    reader = arrowlog.connect(store)
    tables = reader.consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    assert _both(tables) in ([[1], [1]], [[], []])
    n2 = arrowlog.connect(store).producer(transactional_id="tx")
    n2.init_transactions()
    reader = arrowlog.connect(store)
    assert _settled(reader)  # T2 aborted: no transaction may begin under its epoch
    gate.release()
    init1.result()
    with pytest.raises(arrowlog.ProducerFencedError):
        n2.begin_transaction()
        n2.send("t", rows(8), partition=0)
        n2.commit_transaction()
    with n1.transaction():
        n1.send("t", rows(3), partition=0)
    n1.close()
    final = arrowlog.connect(store)
    tables = final.consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    assert _both(tables) == [[1, 3], [1]]
    assert _settled(final)


# --- the commit point's reply lost; it lands between another init's read and write ---


def test_a_lost_prepare_landing_inside_another_inits_fence_is_rolled_forward(
    store: Store, scripted: ScriptedStore
) -> None:
    """P's PREPARE_COMMIT (entry 1) times out on the client, retries get 503:
    commit fails, P is ENDING. N initialises: it reads entry 0 and its fence
    (entry 1) is held. P's PREPARE lands there. N's fence loses; N re-reads,
    finds the commit point and rolls it forward. P's retried commit knows its
    own entry and returns; P is fenced from then on. The record is visible
    once; N commits on top; nothing hangs."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    key = entry_key("tx", 1)
    late = scripted.late_put(key)
    refusing = scripted.throttle("put_if_absent", key, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.ArrowLogError):
        p.commit_transaction()
    refusing.stop()
    other = ScriptedStore(store)
    gate = other.hold("put_if_absent", key)
    n = arrowlog.connect(other).producer(transactional_id="tx")
    init = Background(n.init_transactions)
    gate.wait_reached()
    assert late.land()
    gate.release()
    init.result()
    assert visible(arrowlog.connect(store).consumer()) == [1]
    p.commit_transaction()  # its own PREPARE: the commit stands
    with pytest.raises(arrowlog.ProducerFencedError):
        p.flush()
    with n.transaction():
        n.send("t", rows(2), partition=0)
    n.close()
    _ends_with(store, [1, 2])


# --- a marker held in one partition while the next transaction sends in another -------


def test_a_held_marker_in_one_partition_while_the_next_transaction_sends_in_another(
    store: Store, scripted: ScriptedStore
) -> None:
    """T1 writes t/0 and t/1 and commits; its t/0 marker lands, its t/1 marker
    is held. T2 sends to t/0 under the next epoch. Every kind of read shows T1
    whole and T2 not at all: Consumer.read of each partition, read_many, and a
    scan plan. Released, T2 commits: both whole."""
    from arrowlog.read.scan import plan_scan

    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    p = arrowlog.connect(scripted).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send("t", rows(1), partition=1)
    marker = scripted.hold("put_if_absent", segment_key("t", 1, 1))
    p.commit_transaction()
    marker.wait_reached()
    landed(store, segment_key("t", 0, 1))  # markers follow the commit point in the background
    p.begin_transaction()
    p.send("t", rows(2), partition=0)
    reader = arrowlog.connect(store)
    assert [visible(reader.consumer(), "t", q) for q in (0, 1)] == [[1], [1]]
    tables = reader.consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    assert _both(tables) == [[1], [1]]
    scan = plan_scan(reader, ["t"])
    assert [r.end for r in scan.ranges] == [2, 1]  # t/0: T2 starts at 2 (after the marker)
    marker.release()
    p.commit_transaction()
    p.close()
    final = arrowlog.connect(store)
    tables = final.consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    assert _both(tables) == [[1, 2], [1]]
    assert _settled(final)


# --- idempotence: producer state forgotten on another writer's clock -------------------


def test_a_skewed_writer_never_makes_a_lost_reply_retry_duplicate(
    store: Store, scripted: ScriptedStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Idempotent P's first batch to t/0 times out on the client (it lands at
    offset 0 later; retries get 503): P keeps it to resend. A writer on another
    host, whose clock runs 8 days ahead, appends at 1 (its segment says so).
    A writer sharing P's connection appends at 2: the checkpoint of the window
    [0, 2) forgets producers whose latest batch is 7 days older than the
    window's last segment, by that segment's clock: P, written a second ago.
    P's flush resends its batch, finds no state for itself, and appends it
    again. Producer-state expiry must not run on a writer's clock (one clock:
    the store's), and a lost reply's retry must never duplicate."""
    arrowlog.connect(store).create_topic(
        "t", SCHEMA, config=arrowlog.TopicConfig(checkpoint_interval=2)
    )
    log = arrowlog.connect(scripted, config=FAST)
    p = log.producer()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    refusing = scripted.throttle("put_if_absent", seg0, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.AppendOutcomeUnknownError):
        p.send("t", rows(1), partition=0)
    refusing.stop()
    assert late.land()  # P's batch is at offset 0
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 8 * 86_400)
    arrowlog.connect(store).append("t", rows(2), partition=0)  # the skewed host
    monkeypatch.setattr(time, "time", real)
    log.append("t", rows(3), partition=0)  # P's own connection, the right time
    p.flush()  # settles the in-doubt batch
    assert everything(arrowlog.connect(store)) == [1, 2, 3]


# --- export-delta: ranges ended at LSOs asked one partition after another --------------


_REAL_CONNECT = arrowlog.connect


def test_export_delta_never_splits_a_transaction_across_its_commits(
    store: Store, scripted: ScriptedStore, tmp_path: Path
) -> None:
    """The export asked the topic's LSOs (log.stable_offsets: a view of t/0,
    then of t/1) and exported [previous end, LSO) of each partition in one
    Delta commit. Its listing of t/1 is held; meanwhile T writes t/0 and t/1
    and commits. t/0's LSO predated T, t/1's showed it committed: the Delta
    commit held T's t/1 row without its t/0 row (the next export added that
    one). A Delta reader of that version saw half a transaction; the ends must
    come from one snapshot (plan_snapshot / read_snapshot), as the streaming
    source's do. (The export then read the range through Spark, here a stand-in
    that planned it as the Spark source does; it now reads it without Spark.)"""
    pytest.importorskip("deltalake")
    from arrowlog.jobs.export_delta import read_delta, run_export

    _REAL_CONNECT(store).create_topic("t", SCHEMA, partitions=2)
    w = _REAL_CONNECT(store).producer(transactional_id="w")
    w.init_transactions()
    delta = str(tmp_path / "delta")
    gate = scripted.hold("list", "t/1/segments/")
    run = Background(lambda: run_export(_REAL_CONNECT(scripted), "t", delta))
    gate.wait_reached()  # t/0's end is fixed: nothing there yet
    with w.transaction():
        w.send("t", rows(1), partition=0)
        w.send("t", rows(2), partition=1)
    w.close()
    gate.release()
    run.result()
    first = sorted(v for v in read_delta(delta).column("v").to_pylist() if v is not None)
    assert first in ([], [1, 2])  # the transaction whole, or not yet


def test_export_iceberg_never_splits_a_transaction_across_its_snapshots(
    store: Store, scripted: ScriptedStore, tmp_path: Path
) -> None:
    """The schedule above against the Iceberg export, which reads the range
    without Spark: its view of t/1 is held while T writes t/0 and t/1 and
    commits. Its snapshot holds T whole or not at all, and the next export
    brings the rest: each of T's records exactly once."""
    from arrowlog.jobs.export_iceberg import CatalogConfig, export, read_iceberg

    _REAL_CONNECT(store).create_topic("t", SCHEMA, partitions=2)
    w = _REAL_CONNECT(store).producer(transactional_id="w")
    w.init_transactions()
    catalog = CatalogConfig.sqlite(str(tmp_path / "warehouse"))
    gate = scripted.hold("list", "t/1/segments/")
    run = Background(lambda: export(_REAL_CONNECT(scripted), "t", "ns.t", catalog=catalog))
    gate.wait_reached()  # t/0's end is fixed: nothing there yet
    with w.transaction():
        w.send("t", rows(1), partition=0)
        w.send("t", rows(2), partition=1)
    w.close()
    gate.release()
    run.result()
    first = sorted(v for v in read_iceberg(catalog, "ns.t").column("v").to_pylist() if v)
    assert first in ([], [1, 2])  # the transaction whole, or not yet
    export(_REAL_CONNECT(store), "t", "ns.t", catalog=catalog)
    assert sorted(v for v in read_iceberg(catalog, "ns.t").column("v").to_pylist() if v) == [1, 2]
    assert read_iceberg(catalog, "ns.t").num_rows == 2


# --- streaming: maxOffsetsPerTrigger cuts micro-batches inside a transaction ----------


def test_a_rate_limited_micro_batch_never_holds_part_of_a_transaction(tmp_path: Path) -> None:
    """T commits two records into t/0 and two into t/1 (one batch each). A
    stream from earliest with maxOffsetsPerTrigger=2 asks where its first
    micro-batch ends: one offset into each partition, in the middle of T's
    batches. That micro-batch's plan holds T's first record of each partition
    and not the others; the next one the rest. A micro-batch is a
    read_committed read, planned from one snapshot so that a transaction is
    in it whole (arrowlog/spark/streaming.py): the limit must end it at a
    transaction's edge (fewer rows, or more), never inside."""
    pytest.importorskip("pyspark")
    from pyspark.sql.streaming.datasource import ReadMaxRows
    from pyspark.sql.types import StructType

    from arrowlog.spark.options import ReadOptions
    from arrowlog.spark.streaming import ArrowLogStreamReader

    root = str(tmp_path / "log")
    log = _REAL_CONNECT(root)
    log.create_topic("t", SCHEMA, partitions=2)
    w = log.producer(transactional_id="w")
    w.init_transactions()
    with w.transaction():
        w.send("t", rows(1, 2), partition=0)
        w.send("t", rows(3, 4), partition=1)
    w.close()
    raw = {"path": root, "topic": "t", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "2"}
    options = ReadOptions.parse({k.lower(): v for k, v in raw.items()}, streaming=True)
    reader = ArrowLogStreamReader(options, StructType())
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadMaxRows(2))
    planned = reader.partitions(start, end)
    rows_in_batch = sum(p.task.rows for p in planned)  # type: ignore[attr-defined]
    assert rows_in_batch in (0, 4)  # T whole, or not yet


def test_a_rate_limit_lowers_ends_to_transaction_edges_and_still_moves_on(
    tmp_path: Path,
) -> None:
    """Three transactions of 2 + 2 records (t/0 and t/1), then plain records.
    With maxOffsetsPerTrigger=5, the proportional cut (3 and 2) would split the
    second transaction; the ends are lowered to its edge: the first micro-batch
    holds the first transaction whole (4 records). Micro-batch after
    micro-batch, every transaction is read whole, and the stream reaches the end."""
    pytest.importorskip("pyspark")
    from pyspark.sql.streaming.datasource import ReadMaxRows
    from pyspark.sql.types import StructType

    from arrowlog.spark.options import ReadOptions
    from arrowlog.spark.streaming import ArrowLogStreamReader, parse_stream_position

    root = str(tmp_path / "log")
    log = _REAL_CONNECT(root)
    log.create_topic("t", SCHEMA, partitions=2)
    w = log.producer(transactional_id="w")
    w.init_transactions()
    for k in range(3):
        with w.transaction():
            w.send("t", rows(10 * k, 10 * k + 1), partition=0)
            w.send("t", rows(10 * k + 2, 10 * k + 3), partition=1)
    w.close()
    log.append("t", rows(100, 101, 102), partition=0)
    raw = {"path": root, "topic": "t", "startingOffsets": "earliest", "maxOffsetsPerTrigger": "5"}
    options = ReadOptions.parse({k.lower(): v for k, v in raw.items()}, streaming=True)
    reader = ArrowLogStreamReader(options, StructType())
    start = reader.initialOffset()
    sizes = []
    held: list[list[int]] = []  # the ids each micro-batch holds
    for _ in range(10):
        end = reader.latestOffset(start, ReadMaxRows(5))
        planned = reader.partitions(start, end)
        sizes.append(sum(p.task.rows for p in planned))  # type: ignore[attr-defined]
        froms, tos = parse_stream_position(start)[0], parse_stream_position(end)[0]
        held.append(
            [
                row["v"]
                for tp, to in tos.items()
                for row in log.read("t", tp[1], froms.get(tp, 0), to).to_pylist()
            ]
        )
        if end == start:
            break
        start = end
    assert sizes[0] == 4  # the first transaction, whole; not 5 records
    assert sum(sizes) == 15 and sizes[-1] == 0  # every record once; the stream got to the end
    assert sorted(i for ids in held for i in ids) == [
        0,
        1,
        2,
        3,
        10,
        11,
        12,
        13,
        20,
        21,
        22,
        23,
        100,
        101,
        102,
    ]
    # no micro-batch holds a part of a transaction (k's records are 10k .. 10k+3);
    # where the markers' offsets fall decides how the plain tail is cut (markers
    # are written after the next transaction's records when the producer is slow)
    for k in range(3):
        whole = {10 * k + i for i in range(4)}
        assert [set(ids) & whole for ids in held if set(ids) & whole] == [whole]
    final, _ = parse_stream_position(start)
    assert final == {("t", 0): 12, ("t", 1): 9}  # each transaction's marker takes an offset


# --- streaming: a partition added while a micro-batch's ends are fixed -----------------


def test_a_micro_batch_never_holds_part_of_a_transaction_into_a_new_partition(
    store: Store, scripted: ScriptedStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream reads t's partition count (1), then is held before its view
    of t/0. Meanwhile t grows to 2 partitions and T writes t/0 and t/1 and
    commits. The micro-batch's snapshot shows T committed in t/0, and t/1 is not
    in it: the micro-batch holds T's t/0 record alone (t/1 is read, from its
    start, by a later one). The partitions must be fixed within the snapshot
    (as plan_scan's iter_partitions does), or the end cut before T."""
    pytest.importorskip("pyspark")
    from pyspark.sql.streaming.datasource import ReadAllAvailable
    from pyspark.sql.types import StructType

    from arrowlog.spark.options import ReadOptions
    from arrowlog.spark.streaming import ArrowLogStreamReader

    _REAL_CONNECT(store).create_topic("t", SCHEMA)
    monkeypatch.setattr(arrowlog, "connect", lambda *_a, **_k: _REAL_CONNECT(scripted))
    raw = {"path": str(tmp_path / "log"), "topic": "t", "startingOffsets": "earliest"}
    options = ReadOptions.parse({k.lower(): v for k, v in raw.items()}, streaming=True)
    reader = ArrowLogStreamReader(options, StructType())
    start = reader.initialOffset()
    gate = scripted.hold("list", "t/0/segments/")
    latest = Background(lambda: reader.latestOffset(start, ReadAllAvailable()))
    gate.wait_reached()  # the partition count is read
    _REAL_CONNECT(store).create_partitions("t", 2)
    w = _REAL_CONNECT(store).producer(transactional_id="w")
    w.init_transactions()
    with w.transaction():
        w.send("t", rows(1), partition=0)
        w.send("t", rows(2), partition=1)
    w.close()
    gate.release()
    end = latest.result()
    assert isinstance(end, dict)
    planned = reader.partitions(start, end)
    assert sum(p.task.rows for p in planned) in (0, 2)  # type: ignore[attr-defined]


def test_a_scan_plan_never_holds_part_of_a_transaction_into_a_new_partition(
    store: Store, scripted: ScriptedStore
) -> None:
    """The streaming schedule above, against plan_scan (the Spark source's batch
    planner): it lists t's partitions (one) and is held before its snapshot's
    first view of t/0; meanwhile t grows to 2 partitions and T writes t/0 and
    t/1 and commits. Held: the plan's ends come from its first views (t/0
    empty then), so T is in it nowhere; a later plan has it whole."""
    from arrowlog.read.scan import ScanPlan, plan_scan

    _REAL_CONNECT(store).create_topic("t", SCHEMA)
    log = _REAL_CONNECT(scripted)
    gate = scripted.hold("list", "t/0/segments/", nth=2)  # the snapshot's first view
    plan = Background(lambda: plan_scan(log, ["t"]))
    gate.wait_reached()
    _REAL_CONNECT(store).create_partitions("t", 2)
    w = _REAL_CONNECT(store).producer(transactional_id="w")
    w.init_transactions()
    with w.transaction():
        w.send("t", rows(1), partition=0)
        w.send("t", rows(2), partition=1)
    w.close()
    gate.release()
    scan = plan.result()
    assert isinstance(scan, ScanPlan)
    planned = sum(t.rows for t in scan.tasks)
    assert planned in (0, 2)  # T whole, or not at all
    again = plan_scan(_REAL_CONNECT(store), ["t"])
    assert sum(t.rows for t in again.tasks) == 2
