"""Exactly-once under scheduled faults: each test replays, step by step, a schedule
that broke a guarantee (issue 7). Random faults never found these: each needs two
events in a given order, which a :class:`ScriptedStore` makes happen.

Every test runs on memory, a local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

import arrowlog
from arrowlog.errors import AppendOutcomeUnknownError
from arrowlog.format.topic import segment_key
from arrowlog.producer import ProducerState
from arrowlog.read.scan import ScanPlan, plan_scan
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.coordinator import CoordinatorLog, TxnState, entry_key
from arrowlog.txn.groups import GroupOffsets
from tests.support.schedules import FAST, SCHEMA, Background, rows
from tests.support.stores import (  # noqa: F401  (fixtures: these schedules run on the clouds' emulators too)
    StoreSpec,
    shared_store_spec_on_clouds_too,
    store_spec_on_clouds_too,
)


# Shared with the adversarial review's tests: the topic schema, rows, a short
# retry deadline (a schedule decides every outcome, the clock never should) and
# a call run in a thread.
@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def values(log: arrowlog.ArrowLog | arrowlog.Consumer, topic: str, partition: int = 0) -> list[int]:
    """The records of a partition: every one (a log), or the visible ones."""
    if isinstance(log, arrowlog.ArrowLog):
        column = log.partition(topic, partition).read().column("v")
    else:
        column = log.read(topic, partition).column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


# --- 1. a PUT that lands after its reply timed out ---------------------------------


def test_late_put_after_unknown_outcome_is_recognised_by_writer_identity(
    store: Store, scripted: ScriptedStore
) -> None:
    """send: the PUT times out on the client, the store applies it later.
    flush() resends with the same sequence: its tail check finds nothing yet, its
    PUT meets 503s, the late original lands, its next PUT finds the key taken.
    What sits there is the same (producer id, epoch, sequence): its own batch,
    not a rival's, so nothing is appended a second time."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    log = arrowlog.connect(scripted, config=FAST)
    p = log.producer()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    failing = scripted.fail("put_if_absent", seg0, nth=2, times=10**9)
    with pytest.raises(AppendOutcomeUnknownError):
        p.send("t", rows(1, 2), partition=0)
    failing.stop()
    scripted.throttle("put_if_absent", seg0, times=2)
    gate = scripted.hold("put_if_absent", seg0, nth=3)
    flush = Background(p.flush)
    gate.wait_reached()
    assert late.land()
    gate.release()
    flush.result()
    assert values(arrowlog.connect(store), "t") == [1, 2]
    r = p.send("t", rows(3), partition=0)
    assert r.base_offset == 2
    assert values(arrowlog.connect(store), "t") == [1, 2, 3]


# --- 2. two new instances initialise at once ---------------------------------------


def _dead_instance_leaves_ongoing(log: arrowlog.ArrowLog) -> int:
    """A producer begins a transaction, registers its partition (ONGOING: the
    fence must then write PREPARE_ABORT and COMPLETE_ABORT), sends, and dies;
    the entry number of its last coordinator entry."""
    dead = log.producer(transactional_id="tx")
    dead.init_transactions()
    dead.begin_transaction()
    dead.add_partitions([("t", 0)])
    dead.send("t", rows(0), partition=0)
    latest = CoordinatorLog(log.store, "tx", log.config.retry).latest()
    assert latest is not None and latest.state is TxnState.ONGOING
    return latest.n


def _can_commit(p: arrowlog.Producer) -> bool:
    try:
        p.begin_transaction()
        p.send("t", rows(7), partition=0)
        p.commit_transaction()
    except arrowlog.ProducerFencedError:
        return False
    return True


def test_concurrent_inits_when_the_first_completion_loses_leave_one_epoch_holder(
    store: Store, scripted: ScriptedStore
) -> None:
    """N1 fences the dead instance (PREPARE_ABORT) and is held before its
    COMPLETE entry; N2 initialises meanwhile, fencing N1's entry. N1's COMPLETE
    loses: it must not adopt N2's entry (same epoch: two live instances) but
    fence again. N1 initialises last, so N1 alone may commit."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    n = _dead_instance_leaves_ongoing(arrowlog.connect(store))
    gate = scripted.hold("put_if_absent", entry_key("tx", n + 2))
    n1 = arrowlog.connect(scripted).producer(transactional_id="tx")
    init1 = Background(n1.init_transactions)
    gate.wait_reached()
    n2 = arrowlog.connect(store).producer(transactional_id="tx")
    n2.init_transactions()
    gate.release()
    init1.result()
    assert n1.epoch != n2.epoch
    assert _can_commit(n1)
    assert not _can_commit(n2)
    assert n2.state is ProducerState.FENCED
    assert values(arrowlog.connect(store).consumer(), "t") == [7]


def test_concurrent_inits_never_adopt_an_unfinished_entry(
    store: Store, scripted: ScriptedStore
) -> None:
    """Variant: N2 is itself held before its COMPLETE entry when N1's COMPLETE
    loses, so the latest entry N1 finds is N2's unfinished PREPARE_ABORT.
    Adopting it left N1 failing every send with InvalidTxnStateError, never
    marked fenced. Now N1 fences again; N2, released, loses in turn and fences
    again: it initialised last and alone may commit; N1 is fenced, and says so."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    n = _dead_instance_leaves_ongoing(arrowlog.connect(store))
    gate1 = scripted.hold("put_if_absent", entry_key("tx", n + 2))
    other = ScriptedStore(store)
    gate2 = other.hold("put_if_absent", entry_key("tx", n + 3))
    n1 = arrowlog.connect(scripted).producer(transactional_id="tx")
    n2 = arrowlog.connect(other).producer(transactional_id="tx")
    init1 = Background(n1.init_transactions)
    gate1.wait_reached()
    init2 = Background(n2.init_transactions)
    gate2.wait_reached()
    gate1.release()
    init1.result()
    gate2.release()
    init2.result()
    assert n1.epoch != n2.epoch
    assert not _can_commit(n1)
    assert n1.state is ProducerState.FENCED
    assert _can_commit(n2)
    assert values(arrowlog.connect(store).consumer(), "t") == [7]


# --- 3. a transaction that commits between two views of one read -------------------


def test_read_many_sees_a_transaction_committing_between_its_views_whole_or_not_at_all(
    store: Store, scripted: ScriptedStore
) -> None:
    """The reader fixes its view of t/0, is held before listing t/1; a
    transaction writes t/0 and t/1 and commits; the reader's view of t/1 shows
    it committed. It must then show it in t/0 too (or in neither)."""
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    writer = arrowlog.connect(store).producer(transactional_id="w")
    writer.init_transactions()
    reader = arrowlog.connect(scripted).consumer()
    gate = scripted.hold("list", "t/1/segments/")
    read = Background(lambda: reader.read_many({("t", 0): (0, None), ("t", 1): (0, None)}))
    gate.wait_reached()
    with writer.transaction():
        writer.send("t", rows(1), partition=0)
        writer.send("t", rows(2), partition=1)
    gate.release()
    tables = read.result()
    assert isinstance(tables, dict)
    seen = [tables[("t", p)].column("v").to_pylist() for p in (0, 1)]
    assert seen in ([[1], [2]], [[], []])


def test_read_many_cuts_where_an_undecided_transaction_hides_part_of_a_committed_one(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    """An open transaction U holds the LSO of t/0; T then writes t/0 (after U)
    and t/1, and commits. t/1 alone would show T: the read ends t/1 before T."""
    log = make_log()
    log.create_topic("t", SCHEMA, partitions=2)
    u = log.producer(transactional_id="u")
    u.init_transactions()
    u.begin_transaction()
    u.send("t", rows(0), partition=0)
    plain = log.producer()
    plain.send("t", rows(5), partition=1)
    t = log.producer(transactional_id="t")
    t.init_transactions()
    with t.transaction():
        t.send("t", rows(1), partition=0)
        t.send("t", rows(2), partition=1)
    tables = log.consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    assert [tables[("t", p)].column("v").to_pylist() for p in (0, 1)] == [[], [5]]
    u.commit_transaction()
    tables = log.consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    assert [tables[("t", p)].column("v").to_pylist() for p in (0, 1)] == [[0, 1], [5, 2]]


# --- 5. the original instance of a resumed transaction sends after the commit ------


@pytest.mark.parametrize("late", ["after-marker", "before-marker"])
def test_records_sent_after_the_commit_point_never_join_the_transaction(
    store: Store, scripted: ScriptedStore, late: str
) -> None:
    """A begins and sends; B resumes the transaction and commits; A sends again
    to the same partition (no coordinator write needed). A's late record lands
    after B's marker, or between B's PREPARE_COMMIT and its marker: either way
    it is past the bound fixed at PREPARE_COMMIT and is never visible."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    a = arrowlog.connect(store).producer(transactional_id="job")
    a.init_transactions()
    a.begin_transaction()
    a.add_partitions([("t", 0)])  # resumable: the partition is registered
    a.send("t", rows(1), partition=0)
    b = arrowlog.connect(scripted).producer(transactional_id="job")
    b.resume_transaction(a.epoch)
    if late == "after-marker":
        b.commit_transaction()
        b.flush()  # the marker follows in the background: it lands now
        a.send("t", rows(2), partition=0)
    else:
        gate = scripted.hold("put_if_absent", "t/0/segments/*")
        commit = Background(b.commit_transaction)
        gate.wait_reached()  # PREPARE_COMMIT is written; the marker is held
        a.send("t", rows(2), partition=0)
        gate.release()
        commit.result()
        b.flush()  # the marker, released, lands before the LSO and the end are compared
    fresh = arrowlog.connect(store)
    assert values(fresh.consumer(), "t") == [1]
    assert fresh.consumer().read_many({("t", 0): (0, None)})[("t", 0)].num_rows == 1
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")  # nothing left hanging


# --- 4. consumer offsets are decided with the records -------------------------------


def test_offsets_count_from_prepare_commit_even_if_the_committer_dies_there(
    store: Store, scripted: ScriptedStore
) -> None:
    """The committer writes PREPARE_COMMIT and dies before its markers and
    offsets (every later write fails). Its records are visible at once; so must
    its consumer offsets be, for any reader of the group: one that took over
    under another transactional id would otherwise reprocess them."""
    setup = arrowlog.connect(store)
    setup.create_topic("in", SCHEMA, partitions=2)
    setup.create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="copier")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
    reader = arrowlog.connect(store).consumer(group_id="g")
    with pytest.raises(arrowlog.UnstableOffsetCommitError) as unstable:
        reader.committed("in", 0)  # it may yet commit: the old position is not safe
    assert unstable.value.partitions == {("in", 0)} and unstable.value.retriable
    assert reader.committed("in", 1) is None  # a partition it does not name is stable
    scripted.fail("put_if_absent", "t/0/segments/*", times=10**9, maybe_applied=False)
    scripted.fail("put_if_absent", "_arrowlog/groups/*", times=10**9, maybe_applied=False)
    p.commit_transaction()  # returns at PREPARE_COMMIT: then the "crash"
    with pytest.raises(arrowlog.ArrowLogError):
        p.flush()  # its markers and offsets never land
    assert values(reader, "t") == [1]
    assert reader.committed("in", 0) == 1
    # the next instance finishes the transaction: the same answer, now applied
    arrowlog.connect(store).producer(transactional_id="copier").init_transactions()
    assert reader.committed("in", 0) == 1
    assert GroupOffsets(store, "g", FAST.retry).latest().pending == {}


def test_offsets_of_an_aborted_transaction_never_count(store: Store) -> None:
    log = arrowlog.connect(store)
    log.create_topic("in", SCHEMA)
    log.create_topic("t", SCHEMA)
    reader = log.consumer(group_id="g")
    reader.commit({("in", 0): 5})
    p = log.producer(transactional_id="copier")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send_offsets_to_transaction({("in", 0): 9}, group_id="g")
    p.abort_transaction()
    assert reader.committed("in", 0) == 5
    p.flush()  # the pending mark is dropped in the background
    assert GroupOffsets(store, "g", FAST.retry).latest().pending == {}


@pytest.mark.parametrize("nth", [1, 2, 3], ids=["offsets", "first-round", "second-round"])
def test_a_scan_plan_sees_a_transaction_committing_between_its_views_whole_or_not_at_all(
    store: Store, scripted: ScriptedStore, nth: int
) -> None:
    """The Spark source's planner, held before its n-th listing of t/1 while a
    transaction writes t/0 and t/1 and commits."""
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    writer = arrowlog.connect(store).producer(transactional_id="w")
    writer.init_transactions()
    gate = scripted.hold("list", "t/1/segments/", nth=nth)
    log = arrowlog.connect(scripted)
    plan = Background(lambda: plan_scan(log, ["t"]))
    gate.wait_reached()
    with writer.transaction():
        writer.send("t", rows(1), partition=0)
        writer.send("t", rows(2), partition=1)
    gate.release()
    scan = plan.result()
    assert isinstance(scan, ScanPlan)
    ends = [r.end for r in scan.ranges]
    segments = [sum(len(t.segments) for t in scan.tasks if t.partition == p) for p in (0, 1)]
    assert (ends, segments) in (([1, 1], [1, 1]), ([0, 0], [0, 0]))


# --- one clock ----------------------------------------------------------------------


def test_a_producer_whose_clock_runs_a_day_ahead_cannot_hold_the_lso(
    shared_store_spec: StoreSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Expiry measured the transaction's age from the start time the producer
    wrote: a producer a day ahead held the LSO for a day. Now the age is measured
    on the store's clock alone, so an expirer a day behind expires it on time
    too (and one a day ahead would not expire it early)."""
    log = shared_store_spec.connect()
    log.create_topic("t", SCHEMA)
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 86_400)
    skewed = log.producer(transactional_id="skewed", transaction_timeout_ms=1_000)
    skewed.init_transactions()
    skewed.begin_transaction()
    skewed.send("t", rows(1), partition=0)
    monkeypatch.setattr(time, "time", lambda: real() - 86_400)  # the expirer is a day behind
    expirer = shared_store_spec.connect()
    assert expirer.admin.expire_transactions() == []  # not yet past its timeout
    monkeypatch.setattr(time, "time", lambda: real() + 86_400)
    assert expirer.admin.expire_transactions() == []  # nor for an expirer a day ahead
    monkeypatch.setattr(time, "time", lambda: real() - 86_400)
    assert expirer.stable_offsets("t") == {0: 0}
    # the timeout, plus a second of slack, plus up to a second lost when S3 rounds
    # both object times down to the second
    time.sleep(3.5)
    assert [t.transactional_id for t in expirer.admin.expire_transactions()] == ["skewed"]
    assert expirer.stable_offsets("t") == expirer.end_offsets("t")


def test_an_operator_abort_reaches_the_producer_as_such(store: Store) -> None:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    p = log.producer(transactional_id="job")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    arrowlog.connect(store).admin.abort_transaction("job")
    with pytest.raises(arrowlog.ProducerFencedError, match="aborted by an operator"):
        p.commit_transaction()
    assert values(arrowlog.connect(store).consumer(), "t") == []


# --- listings that stop short where completeness matters -----------------------------


def test_a_resumed_commit_bounds_the_transaction_past_what_its_listing_shows(
    store: Store, scripted: ScriptedStore
) -> None:
    """The writer sends and is acknowledged; the driver resumes and commits, but
    its listing of the partition misses the writer's fresh segment. The bound it
    fixes at PREPARE_COMMIT must still cover it: an acknowledged record of a
    committed transaction is never lost."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    a = arrowlog.connect(store).producer(transactional_id="job")
    a.init_transactions()
    a.begin_transaction()
    a.add_partitions([("t", 0)])  # resumable: the partition is registered
    a.send("t", rows(1, 2), partition=0)
    scripted.hide(segment_key("t", 0, 0), times=10**9)
    b = arrowlog.connect(scripted).producer(transactional_id="job")
    b.resume_transaction(a.epoch)
    b.commit_transaction()
    assert values(arrowlog.connect(store).consumer(), "t") == [1, 2]


def test_read_many_sees_a_committed_transaction_whole_where_a_listing_misses_its_records(
    store: Store, scripted: ScriptedStore
) -> None:
    """A transaction wrote t/0 and t/1 and committed before the read. The
    reader's listings of t/1 miss its segment there (and the marker behind the
    gap); t/0 shows it committed. The read's second-round views must still hold
    it whole."""
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    w = arrowlog.connect(store).producer(transactional_id="w")
    w.init_transactions()
    with w.transaction():
        w.send("t", rows(1), partition=0)
        w.send("t", rows(2), partition=1)
    scripted.hide(segment_key("t", 1, 0), times=10**9)
    tables = (
        arrowlog.connect(scripted).consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    )
    seen = [tables[("t", p)].column("v").to_pylist() for p in (0, 1)]
    assert seen in ([[1], [2]], [[], []])


def test_a_writer_that_loses_a_race_its_listing_cannot_see_moves_on(
    store: Store, scripted: ScriptedStore
) -> None:
    """A writer loses the race for the offset it knows as the end, and its
    listings keep missing the segment that won: it must follow the chain past
    it (by HEAD), not retry the same key forever."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    writer = arrowlog.connect(scripted, config=FAST)
    assert writer.end_offsets("t") == {0: 0}
    arrowlog.connect(store).append("t", rows(1))  # the rival, unseen
    scripted.hide(segment_key("t", 0, 0), times=10**9)
    r = writer.append("t", rows(2))
    assert r.base_offset == 1
    assert values(arrowlog.connect(store), "t") == [1, 2]


def test_an_expected_offset_mismatch_carries_the_real_end_past_a_listing_gap(
    store: Store, scripted: ScriptedStore
) -> None:
    """A loader resuming at the end it last wrote while its listing misses a
    segment: the log does end there, so the append lands (no spurious
    mismatch); and a mismatch reports the real end, not the listing's."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    other = arrowlog.connect(store)
    other.append("t", rows(1, 2))
    other.append("t", rows(3))
    scripted.hide(segment_key("t", 0, 2), times=10**9)
    loader = arrowlog.connect(scripted)
    assert loader.append("t", rows(4), expected_offset=3).base_offset == 3
    with pytest.raises(arrowlog.OffsetMismatchError) as e:
        arrowlog.connect(scripted).append("t", rows(5), expected_offset=9)
    assert e.value.log_end_offset == 4


def test_a_transaction_unknown_when_a_read_froze_holds_its_end_instead_of_being_skipped(
    store: Store, scripted: ScriptedStore
) -> None:
    """A transaction committed before the read, but the read's first listing
    missed its segment (and its marker behind the gap): unknown when the
    snapshot froze, it is undecided for this read. It must hold the read's end
    like an LSO; hiding it inside the range would lose it for a consumer that
    goes on from where the read ended."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0))
    w = log.producer(transactional_id="w")
    w.init_transactions()
    with w.transaction():
        w.send("t", rows(1), partition=0)
    log.append("t", rows(3))
    scripted.hide(segment_key("t", 0, 1), times=1)
    reader = arrowlog.connect(scripted).consumer()
    first = reader.read_snapshot({("t", 0): (0, None)})
    got = first.tables[("t", 0)].column("v").to_pylist()
    end = first.ends[("t", 0)]
    second = reader.read_snapshot({("t", 0): (end, None)})
    got += second.tables[("t", 0)].column("v").to_pylist()
    assert got == [0, 1, 3]


def test_a_zombie_marking_its_offsets_pending_late_never_hides_its_successors(
    store: Store, scripted: ScriptedStore
) -> None:
    """Zombie A registers offsets and is held before marking them pending in
    the group log; B initialises (fencing A), sends offsets, marks them and
    commits, but dies before applying them. A's late mark must not replace
    B's: B's records are visible, so B's offsets count."""
    setup = arrowlog.connect(store)
    setup.create_topic("in", SCHEMA)
    setup.create_topic("t", SCHEMA)
    a = arrowlog.connect(scripted).producer(transactional_id="copier")
    a.init_transactions()
    a.begin_transaction()
    gate = scripted.hold("put_if_absent", "_arrowlog/groups/g/*")
    zombie = Background(lambda: a.send_offsets_to_transaction({("in", 0): 1}, group_id="g"))
    gate.wait_reached()
    dying = ScriptedStore(store)
    b = arrowlog.connect(dying, config=FAST).producer(transactional_id="copier")
    b.init_transactions()
    b.begin_transaction()
    b.send("t", rows(2), partition=0)
    b.send_offsets_to_transaction({("in", 0): 2}, group_id="g")
    dying.fail("put_if_absent", "_arrowlog/groups/*", times=10**9, maybe_applied=False)
    b.commit_transaction()  # committed at PREPARE_COMMIT
    with pytest.raises(arrowlog.ArrowLogError):
        b.flush()  # applying its offsets failed
    gate.release()
    zombie.result()
    reader = arrowlog.connect(store).consumer(group_id="g")
    assert values(reader, "t") == [2]
    assert reader.committed("in", 0) == 2


# --- commits on the critical path of one request (issue 9) --------------------------
#
# A transaction's data go out before any coordinator entry names it, and the
# producer's next transaction sends before its last one's COMPLETE entry has
# landed. The epoch such records carry is undecided only while a transaction
# may still write its first entry under it; then it is decided for good.


def test_the_next_transaction_sends_before_the_last_completes_and_commits_after(
    store: Store, scripted: ScriptedStore
) -> None:
    """T1 commits (PREPARE, entry 1) and its COMPLETE (entry 2) is held; T2
    sends under the epoch that COMPLETE will grant. Readers see T1, and T2's
    record undecided (holding the LSO), not aborted; COMPLETE lands, T2 commits."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted).producer(transactional_id="tx")
    p.init_transactions()
    gate = scripted.hold("put_if_absent", entry_key("tx", 2))
    with p.transaction():
        p.send("t", rows(1), partition=0)
    gate.wait_reached()
    p.begin_transaction()
    r = p.send("t", rows(2), partition=0)
    reader = arrowlog.connect(store)
    assert values(reader.consumer(), "t") == [1]
    assert reader.stable_offsets("t") == {0: r.base_offset}  # undecided, not aborted
    commit = Background(p.commit_transaction)  # waits for the COMPLETE, then PREPARE
    time.sleep(0.2)
    assert values(arrowlog.connect(store).consumer(), "t") == [1]
    gate.release()
    commit.result()
    p.close()
    after = arrowlog.connect(store)
    assert values(after.consumer(), "t") == [1, 2]
    assert after.stable_offsets("t") == after.end_offsets("t")


def test_a_fence_while_the_last_commit_finishes_aborts_the_next_transactions_records(
    store: Store, scripted: ScriptedStore
) -> None:
    """T1 commits; its COMPLETE is held; the producer sends T2's record under
    the epoch that COMPLETE would grant. A new instance initialises: it rolls
    T1 forward and takes the COMPLETE's place. T2's record is then aborted for
    good (never visible, never holding the LSO), though no entry ever named it;
    the old producer learns it is fenced at its next commit."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    old = arrowlog.connect(scripted).producer(transactional_id="tx")
    old.init_transactions()
    gate = scripted.hold("put_if_absent", entry_key("tx", 2))
    with old.transaction():
        old.send("t", rows(1), partition=0)
    gate.wait_reached()
    old.begin_transaction()
    old.send("t", rows(2), partition=0)
    new = arrowlog.connect(store).producer(transactional_id="tx")
    new.init_transactions()
    reader = arrowlog.connect(store)
    assert values(reader.consumer(), "t") == [1]
    assert reader.stable_offsets("t") == reader.end_offsets("t")
    gate.release()
    with pytest.raises(arrowlog.ProducerFencedError):
        old.commit_transaction()
    assert old.state is ProducerState.FENCED
    with new.transaction():
        new.send("t", rows(3), partition=0)
    new.close()
    final = arrowlog.connect(store)
    assert values(final.consumer(), "t") == [1, 3]
    assert final.stable_offsets("t") == final.end_offsets("t")


def test_an_epoch_no_transaction_can_begin_under_is_aborted_at_once(store: Store) -> None:
    """A record under an epoch ahead of anything the log grants (no producer
    writes one; a forged or corrupt header could) is aborted at once: it does
    not hold the LSO waiting for an entry that may never come."""
    from arrowlog.format.segment import WriterIdentity

    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    p = log.producer(transactional_id="tx")
    p.init_transactions()  # grants epoch 0
    forged = WriterIdentity(producer_id=p.producer_id + 1, producer_epoch=2, base_sequence=0,
                            transactional=True, transactional_id="tx")  # fmt: skip
    log.partition("t", 0).append(rows(9), identity=forged)
    assert log.stable_offsets("t") == log.end_offsets("t")
    for _ in range(3):  # epochs 0, 1, 2 each commit one record
        with p.transaction():
            p.send("t", rows(1), partition=0)
    p.close()
    fresh = arrowlog.connect(store)
    assert values(fresh.consumer(), "t") == [1, 1, 1]
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")


def test_an_operator_abort_of_a_transaction_with_no_entry_tells_its_producer(
    store: Store,
) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(store).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    info = arrowlog.connect(store).admin.abort_transaction("tx")
    assert info.state is TxnState.COMPLETE_ABORT and info.txn_epoch == 0
    reader = arrowlog.connect(store)
    assert reader.stable_offsets("t") == reader.end_offsets("t")
    with pytest.raises(arrowlog.ProducerFencedError, match="operator"):
        p.commit_transaction()
    assert values(arrowlog.connect(store).consumer(), "t") == []


def test_an_abort_after_an_in_doubt_send_decides_the_epoch_and_the_next_moves_on(
    store: Store, scripted: ScriptedStore
) -> None:
    """A send's PUT times out and lands later: the producer cannot tell whether
    its record is there. Its abort must write PREPARE_ABORT (the record may be
    there, and no entry names the epoch yet), and the next transaction runs
    under a new epoch, so the late record never joins it."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    failing = scripted.fail("put_if_absent", seg0, nth=2, times=10**9)
    with pytest.raises(AppendOutcomeUnknownError):
        p.send("t", rows(1), partition=0)
    failing.stop()
    # the abort's marker, written in the background, goes for offset 0 first:
    # hold it there while the late record lands, then let it find the offset taken
    marker = scripted.hold("put_if_absent", seg0)
    p.abort_transaction()
    marker.wait_reached()
    assert late.land()  # the record of epoch 0 is there after all
    marker.release()
    p.flush()
    assert p.epoch == 1
    with p.transaction():
        p.send("t", rows(2), partition=0)
    p.close()
    reader = arrowlog.connect(store)
    assert values(reader, "t") == [1, 2]  # both landed (and the markers are not rows)
    assert values(reader.consumer(), "t") == [2]
    assert reader.stable_offsets("t") == reader.end_offsets("t")


def test_a_transaction_that_sent_nothing_ends_without_a_request(store: Store) -> None:
    from arrowlog.storage.wrappers import CountingStore

    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.create_topic("t", SCHEMA)
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    counting.reset()
    for end in (p.commit_transaction, p.abort_transaction):
        p.begin_transaction()
        end()
    assert counting.counts == {}
    assert p.epoch == 0  # no record carries it: the next transaction keeps it
