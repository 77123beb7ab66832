"""Adversarial schedules against the cleanup of bookkeeping by ``vacuum()``
(arrowlog/maintenance/cleanup.py): producer-id claims, coordinator entries, expired
transactional ids, consumer-group entries and staged files, and the writers'
check of a late outcome for a freed key (``LATE_OUTCOME_MS``).

Days pass instantly: a :class:`ClockStore` dates every object on a fake store
clock and :class:`Clocks` moves it with this process's clocks (including
``arrowlog._clock.elapsed``). Orderings are decided with the gates of
``ScriptedStore`` (a held PUT lands when the test releases it).

Written by an independent review of the change; its seven findings are fixed
(each test below failed before its fix), and every schedule stays as a
regression test. The findings, in short, and what closed them:

- a first entry (coordinator entry 0, group entry 0) has no predecessor to
  check, so a late landing in a freed key 0 is taken as written: a lost
  group commit; a forked coordinator log where two instances both commit;
- a late write its writer gave up on lands in a freed key right below the
  kept entries: nobody checks it, ``first_kept`` counts it in the log and
  ``outcome()`` finds it (a fenced transaction turns COMMITTED); a live
  writer retrying recognises it as its own (``_doubtful_writes``) and writes
  markers;
- ``outcome()`` computes ``first_kept`` once: a prune between two probes of
  its binary search raises CorruptObjectError ("hole");
- records that compaction moved out of segments are not noted as in use, but
  readers of a range without the marker still ask the coordinator about them;
- an expired id's producer-id claim is released, and the id keeps using it.

Fixes: cleanup puts a start object before it removes entries, and an entry
below the start is a stray (``arrowlog.txn.entrylog``), checked for every first
entry, every late outcome and every doubtful write adopted; ``outcome()``
searches from the start, again if cleanup moves it meanwhile; an epoch whose
entries cleanup removed is FORGOTTEN, decided below the compaction mark by
the compacted object; an expired id keeps its claim. Scenarios whose exact
pruning changed with the second round's fixes (the entry answering for an
epoch still stored stays) delete the zombie's record first, so that its keys
are freed as the schedule needs.

Origin: the first attack on cleanup (was tests/attack/test_cleanup_attack.py).
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

import arrowlog
from arrowlog import InvalidConfigError, ProducerFencedError, TopicConfig
from arrowlog.format.checkpoint import Decision
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.coordinator import COORDINATOR_PREFIX, PRODUCER_IDS_PREFIX, CoordinatorLog
from arrowlog.txn.groups import GROUPS_PREFIX
from tests.support.cleanup import (
    DAY,
    HOUR,
    MIN,
    WEEK_AND_A_DAY,
    commit_one,
    committed_values,
    connect,
    entry_numbers,
    keys,
    make_topic,
    reinit,
)
from tests.support.clocks import Clocks, ClockStore
from tests.support.schedules import FAST, SCHEMA, Background, rows

# --- 1. a writer whose first entry lands late, in a key cleanup freed ----------------------


def test_group_first_commit_landing_late_in_freed_key_is_not_lost(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: consumer A commits p0=7 to the new group "g": it lists no entry
    and its PUT of entry 0 is held. Consumer B commits p1 three times (entries
    0..2). Eight days pass; B commits p1 once more (entry 3); vacuum removes
    entries 0 and 1 (their successors are older than retain_ms). A's PUT lands
    in the freed key 0 and A's commit returns. Guarantee: an acknowledged
    commit is in the group's position (B never committed p0)."""
    make_topic(scripted, partitions=2)
    a = connect(scripted).consumer(group_id="g")
    b = connect(scripted).consumer(group_id="g")
    gate = scripted.hold("put_if_absent", f"{GROUPS_PREFIX}g/*")
    held = Background(lambda: a.commit({("t", 0): 7}))
    gate.wait_reached()
    for off in (1, 2, 3):
        b.commit({("t", 1): off})
    clocks.advance(WEEK_AND_A_DAY)
    b.commit({("t", 1): 4})
    removed = connect(scripted).maintenance.vacuum()
    assert any(r.key.startswith(f"{GROUPS_PREFIX}g/") for r in removed)
    gate.release()
    held.result()  # acknowledged
    c = connect(scripted).consumer(group_id="g")
    assert c.committed("t", 1) == 4
    assert c.committed("t", 0) == 7


def test_group_commit_landing_late_in_freed_key_is_retried(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: the group has entry 0 (B: p1=1). A commits p0=7: it reads
    entry 0 and its PUT of entry 1 is held. B commits p1 = 2, 3 (entries 1, 2);
    eight days pass; B commits p1=4 (entry 3); vacuum frees entries 0 and 1.
    A's PUT lands in key 1. Guarantee: A finds its view's entry gone, removes
    its stray and commits again on top: p0=7 and p1=4 both hold."""
    make_topic(scripted, partitions=2)
    a = connect(scripted).consumer(group_id="g")
    b = connect(scripted).consumer(group_id="g")
    b.commit({("t", 1): 1})
    gate = scripted.hold("put_if_absent", f"{GROUPS_PREFIX}g/*")
    held = Background(lambda: a.commit({("t", 0): 7}))
    gate.wait_reached()
    for off in (2, 3):
        b.commit({("t", 1): off})
    clocks.advance(WEEK_AND_A_DAY)
    b.commit({("t", 1): 4})
    connect(scripted).maintenance.vacuum()
    gate.release()
    held.result()
    c = connect(scripted).consumer(group_id="g")
    assert (c.committed("t", 0), c.committed("t", 1)) == (7, 4)


def test_first_coordinator_entry_landing_late_in_freed_key_forks_the_log(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of the new id "x" initialises: it lists no entry,
    claims a producer id and its PUT of entry 0 is held. Instance B initialises
    (entry 0), then four more instances do (entries 1..4). Eight days pass; a
    sixth instance B6 initialises (entry 5); vacuum removes entries 0..3 (no
    record needs them). A's PUT lands in the freed key 0; A's init returns.
    A commits record 1 (PREPARE and COMPLETE land in freed keys 1, 2: their
    predecessor, A's own stray, is there). B6 commits record 2.
    Guarantee: of two instances of one id, only the last to initialise can
    commit: at most one of the records is visible."""
    log = make_topic(scripted)
    a = connect(scripted).producer(transactional_id="x")
    gate = scripted.hold("put_if_absent", f"{COORDINATOR_PREFIX}x/*")
    held = Background(a.init_transactions)
    gate.wait_reached()
    reinit(scripted, "x", 5)
    clocks.advance(WEEK_AND_A_DAY)
    b6 = reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    assert entry_numbers(scripted, "x") == [4, 5]
    gate.release()
    outcomes = []
    try:
        held.result()
        commit_one(a, 1)
        outcomes.append("a")
    except arrowlog.ArrowLogError:
        pass
    try:
        commit_one(b6, 2)
        outcomes.append("b6")
    except arrowlog.ArrowLogError:
        pass
    seen = committed_values(connect(scripted))
    assert len(seen) <= 1 and len(outcomes) <= 1, (outcomes, seen)
    del log


def test_zombie_prepare_landing_late_in_freed_key_is_fenced(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" (entry 0) begins, sends record 1 and commits:
    its PREPARE (entry 1) is held. Instances B.. initialise (entries 1..4),
    eight days pass, another initialises (5); vacuum frees 0..3 (A's record is
    stored: its epoch 0 is needed... only entries below it may go). A's PREPARE
    lands in key 1 if freed. Guarantee: A's commit raises (fenced) and record 1
    is never visible."""
    make_topic(scripted)
    a = reinit(scripted, "x", 1)
    a.begin_transaction()
    a.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", f"{COORDINATOR_PREFIX}x/*")
    held = Background(a.commit_transaction)
    gate.wait_reached()
    reinit(scripted, "x", 4)
    clocks.advance(WEEK_AND_A_DAY)
    reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    gate.release()
    with pytest.raises(arrowlog.ArrowLogError):
        held.result()
    assert committed_values(connect(scripted)) == []


def test_zombie_prepare_landing_late_after_records_deleted_is_fenced(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """As above, but A's record went to a topic whose records were deleted and
    vacuumed, so nothing keeps entry 0 of the old epoch and every old entry is
    removed: A's PREPARE lands in freed key 1 with its predecessor gone.
    Guarantee: A's commit raises, the stray is removed, B's log intact."""
    log = make_topic(scripted)
    a = reinit(scripted, "x", 1)
    a.begin_transaction()
    a.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", f"{COORDINATOR_PREFIX}x/*")
    held = Background(a.commit_transaction)
    gate.wait_reached()
    b = reinit(scripted, "x", 4)
    log.append("t", rows(50))
    log.append("t", rows(51))
    log.delete_records("t", 0, 2)
    clocks.advance(WEEK_AND_A_DAY)
    b = reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    connect(scripted).maintenance.vacuum()
    gate.release()
    with pytest.raises(arrowlog.ArrowLogError):
        held.result()
    commit_one(b, 3)
    assert committed_values(connect(scripted)) == [51, 3]
    assert min(entry_numbers(scripted, "x")) >= 2


# --- 2. readers deciding old transactions ---------------------------------------------------


def test_outcome_binary_search_racing_a_second_prune_does_not_raise(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: "x" has 16 fencing entries (0..15, transaction epoch 0); eight
    days pass; 4 more (16..19), then a transaction of epoch e commits record 1
    (20, 21) and one of epoch e2 record 2 (22, 23). Vacuum 1 prunes 0..14.
    Eight days pass. A reader decides epoch e (as a reader whose range leaves
    out the marker does): probe 11 is missing (first kept: 15), probe 19 is
    held; vacuum 2 prunes 15..19 (epoch 0 < e, nothing needs them); the probe
    goes on. Guarantee: the reader gets COMMITTED (or retries), never a
    CorruptObjectError."""
    make_topic(scripted)
    reinit(scripted, "x", 16)
    clocks.advance(WEEK_AND_A_DAY)
    p = reinit(scripted, "x", 4)
    commit_one(p, 1)
    e = p.epoch - 1
    commit_one(p, 2)
    assert entry_numbers(scripted, "x") == list(range(24))
    connect(scripted).maintenance.vacuum()
    assert entry_numbers(scripted, "x") == list(range(15, 24))
    clocks.advance(WEEK_AND_A_DAY)
    from arrowlog.txn.coordinator import entry_key

    gate = scripted.hold("get", entry_key("x", 19))
    coordinator = CoordinatorLog(scripted, "x", FAST.retry)
    reader = Background(lambda: coordinator.outcome(e))
    gate.wait_reached()
    connect(scripted).maintenance.vacuum()
    kept = entry_numbers(scripted, "x")
    assert min(kept) >= 20 and set(range(21, 24)) <= set(kept)
    gate.release()
    outcome = reader.result()
    assert isinstance(outcome, tuple)
    assert outcome[0] is Decision.COMMITTED


def test_old_commit_read_without_its_marker_after_prune(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: "x" commits record 1 to t/0 (offset 0, marker at 1) after a
    few fencing entries, then commits records 2, 3 to t/1 and re-initialises
    many times. Eight days pass twice, a vacuum after each. A reader reads
    only offset 0 of t/0 (its marker outside the range). Guarantee: record 1
    is visible (its epoch's entries stay while it is stored)."""
    make_topic(scripted, partitions=2)
    p = reinit(scripted, "x", 3)
    commit_one(p, 1)
    commit_one(p, 2, partition=1)
    commit_one(p, 3, partition=1)
    reinit(scripted, "x", 6)
    clocks.advance(WEEK_AND_A_DAY)
    reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    clocks.advance(WEEK_AND_A_DAY)
    reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    assert min(entry_numbers(scripted, "x")) > 0  # something was pruned
    fresh = connect(scripted)
    col = fresh.consumer(isolation_level="read_committed").read("t", 0, start=0, end=1)
    assert col.column("v").to_pylist() == [1]
    assert committed_values(fresh, "t", 1) == [2, 3]


def test_fenced_epoch_without_markers_stays_aborted_after_prune(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" sends record 1 and dies (no entry, no
    marker); B initialises (fences A's epoch) and commits record 2. Many
    re-initialisations; eight days, vacuum; eight days, vacuum. Guarantee:
    record 1 never visible, record 2 visible, from a fresh reader reading each
    offset alone."""
    make_topic(scripted)
    a = reinit(scripted, "x", 2)
    a.begin_transaction()
    a.send("t", rows(1), partition=0)
    b = reinit(scripted, "x", 1)
    commit_one(b, 2)
    reinit(scripted, "x", 5)
    for _ in range(2):
        clocks.advance(WEEK_AND_A_DAY)
        reinit(scripted, "x", 1)
        connect(scripted).maintenance.vacuum()
    fresh = connect(scripted)
    reader = fresh.consumer(isolation_level="read_committed")
    assert reader.read("t", 0, start=0, end=1).column("v").to_pylist() == []
    assert committed_values(fresh) == [2]
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")


def test_pending_offsets_of_an_unsettled_commit_survive_cleanup(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: "x" sends record 1 and offsets (in/0 -> 5) for group "g",
    commits: the PREPARE lands, then the group write that would apply the
    offsets fails for good (the committer dies). Eight days pass twice with
    vacuums (no one touches the group). Guarantee: committed() is 5 and
    record 1 visible, as they were right after the PREPARE."""
    log = make_topic(scripted)
    log.create_topic("in", SCHEMA)
    p = reinit(scripted, "x", 2)
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.send_offsets_to_transaction({("in", 0): 5}, group_id="g")
    # every later write to the group (settling) and the COMPLETE fail
    scripted.fail("put_if_absent", f"{GROUPS_PREFIX}g/*", times=10**6, maybe_applied=False)
    from arrowlog.txn.coordinator import entry_key

    latest = CoordinatorLog(scripted, "x", FAST.retry).latest()
    assert latest is not None
    scripted.fail("put_if_absent", entry_key("x", latest.n + 2), times=10**6, maybe_applied=False)
    with pytest.raises(arrowlog.ArrowLogError):
        p.commit_transaction()
        p.flush()
    before = connect(scripted).consumer(group_id="g").committed("in", 0)
    for _ in range(2):
        clocks.advance(WEEK_AND_A_DAY)
        connect(scripted).maintenance.vacuum()
    fresh = connect(scripted)
    assert before == 5
    assert fresh.consumer(group_id="g").committed("in", 0) == 5
    assert committed_values(fresh) == [1]


# --- 3. vacuum's own inputs: dry run, bad horizons, named topics ----------------------------


def _lots_to_clean(store: Any, clocks: Clocks) -> arrowlog.ArrowLog:
    """A store where a vacuum of everything has bookkeeping of every kind to
    remove: superseded group and coordinator entries, an idle id to expire,
    claims of idle idempotent producers, a stale staged file."""
    log = make_topic(store)
    c = log.consumer(group_id="g")
    for off in range(4):
        c.commit({("t", 0): off})
    reinit(store, "idle", 4)
    p = log.producer()
    p.send("t", rows(1), partition=0)
    p.flush()
    store.put_if_absent("_arrowlog/staging/job/part-0.arrow", b"x")
    clocks.advance(WEEK_AND_A_DAY)
    return log


def test_dry_run_writes_and_removes_nothing(clock: ClockStore, clocks: Clocks) -> None:
    """Schedule: a store with bookkeeping of every kind past retain_ms; a dry
    run of vacuum. Guarantee: it reports removals and makes no PUT or DELETE;
    a real run afterwards removes at least what it reported (the tombstone of
    an expired id is reported as "this entry stays", i.e. written)."""
    _lots_to_clean(clock, clocks)
    before = {i.key for i in clock.list("")}
    clock.writes.clear()
    planned = connect(clock).maintenance.vacuum(dry_run=True)
    assert planned
    assert clock.writes == []
    assert {i.key for i in clock.list("")} == before
    done = connect(clock).maintenance.vacuum()
    gone = before - {i.key for i in clock.list("")}
    assert {r.key for r in planned if "stays" not in r.reason} <= gone | {
        r.key for r in done if "stays" in r.reason
    }


@pytest.mark.parametrize(
    "bad", [0, -1, 1, 3_599_999, 3651 * DAY, 7.0 * DAY, True, "604800000", float("nan")]
)
def test_bad_retain_ms_raises_and_writes_nothing(
    clock: ClockStore, clocks: Clocks, bad: object
) -> None:
    """Guarantee: a retain_ms that is not an int in [1 hour, 10 years] raises
    InvalidConfigError before any request writes (dry run or not, all topics
    or named ones)."""
    _lots_to_clean(clock, clocks)
    clock.writes.clear()
    for kwargs in ({}, {"dry_run": True}, {"topics": ["t"]}):
        with pytest.raises(InvalidConfigError):
            connect(clock).maintenance.vacuum(retain_ms=bad, **kwargs)  # type: ignore[arg-type]
    assert clock.writes == []


def test_named_topic_vacuum_leaves_shared_bookkeeping(clock: ClockStore, clocks: Clocks) -> None:
    """Guarantee: vacuum(topics=["t"]) touches no group entry, coordinator
    entry, producer-id claim or staged file: only a vacuum of every topic
    knows what still refers to them."""
    _lots_to_clean(clock, clocks)
    shared = (
        "_arrowlog/groups/",
        "_arrowlog/coordinator/",
        PRODUCER_IDS_PREFIX,
        "_arrowlog/staging/",
    )
    before = {k for p in shared for k in keys(clock, p)}
    clock.writes.clear()
    removed = connect(clock).maintenance.vacuum(topics=["t"])
    assert not [r for r in removed if r.key.startswith(shared)]
    assert {k for p in shared for k in keys(clock, p)} == before
    assert not [k for _, k in clock.writes if k.startswith(shared)]


def test_minimum_retain_keeps_a_live_commit_in_flight(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: vacuum with the shortest horizon (1 hour). "x" has a few
    entries; its producer's PREPARE is held for 20 minutes (a late outcome:
    checked) while nothing else happens; a vacuum runs. Guarantee: the commit
    succeeds and its record is visible (nothing it needs was removed)."""
    make_topic(scripted)
    p = reinit(scripted, "x", 3)
    clocks.advance(2 * HOUR)
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    gate = scripted.hold("put_if_absent", f"{COORDINATOR_PREFIX}x/*")
    held = Background(p.commit_transaction)
    gate.wait_reached()
    clocks.advance(20 * MIN)
    connect(scripted).maintenance.vacuum(retain_ms=HOUR)
    gate.release()
    held.result()
    p.flush()
    assert committed_values(connect(scripted)) == [1]


# --- 4. producers idle past retain_ms, expired ids ------------------------------------------


def test_idle_transactional_producer_returning_after_expiry_is_fenced(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: "x" commits record 1 to topic "old", whose records are then
    deleted and vacuumed; its producer stays idle eight days; vacuum expires
    the id. The producer returns: begins, sends record 2, commits.
    Guarantee: the commit raises ProducerFencedError, record 2 never visible;
    a new instance initialises and commits record 3, visible once."""
    log = make_topic(clock)
    log.create_topic("old", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    p = reinit(clock, "x", 1)
    commit_one(p, 1, topic="old")
    log.append("old", rows(9))
    log.delete_records("old", 0, 2)
    clocks.advance(HOUR)
    connect(clock).maintenance.vacuum(topics=["old"])
    clocks.advance(WEEK_AND_A_DAY)
    removed = connect(clock).maintenance.vacuum()
    assert any("expired" in r.reason for r in removed)
    p.begin_transaction()
    p.send("t", rows(2), partition=0)
    with pytest.raises(ProducerFencedError):
        p.commit_transaction()
    q = reinit(clock, "x", 1)
    commit_one(q, 3)
    fresh = connect(clock)
    assert committed_values(fresh) == [3]
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")


def test_expiry_racing_a_send_of_an_idle_producer(scripted: ScriptedStore, clocks: Clocks) -> None:
    """Schedule: "x" initialised and stayed idle eight days (no records).
    A vacuum has read every partition and is held at its listing of the
    coordinator logs; the producer begins and sends record 1 (it lands);
    the vacuum goes on and expires the id. The producer commits.
    Guarantee: either the commit succeeds and record 1 is visible, or it
    raises and record 1 is never visible; the LSO is not held."""
    make_topic(scripted)
    p = reinit(scripted, "x", 1)
    clocks.advance(WEEK_AND_A_DAY)
    gate = scripted.hold("list", COORDINATOR_PREFIX)
    vac = Background(lambda: connect(scripted).maintenance.vacuum())
    gate.wait_reached()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    gate.release()
    vac.result()
    try:
        p.commit_transaction()
        p.flush()
        ok = True
    except ProducerFencedError:
        ok = False
    fresh = connect(scripted)
    assert committed_values(fresh) == ([1] if ok else [])
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")


def test_reinitialised_expired_id_keeps_its_producer_id_claimed(
    clock: ClockStore, clocks: Clocks, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schedule: "x" initialises (claims producer id P) and stays idle eight
    days; vacuum expires the id and removes P's claim (no id holds it any
    more). An application initialises "x" again: it runs with P. Then an
    idempotent producer draws P (a collision, forced here) and appends.
    Guarantee: a producer id is claimed while a producer uses it, so two
    producers never share one (here: the transactional producer's records and
    the idempotent producer's appends both succeed)."""
    make_topic(clock)
    pid = reinit(clock, "x", 1).producer_id
    clocks.advance(WEEK_AND_A_DAY)
    connect(clock).maintenance.vacuum()
    x = reinit(clock, "x", 1)
    assert x.producer_id == pid
    claimed = f"{PRODUCER_IDS_PREFIX}{pid:020d}" in keys(clock, PRODUCER_IDS_PREFIX)
    import random

    draws = iter([pid, pid + 1])  # the collision first, then any other id
    monkeypatch.setattr(random.SystemRandom, "randrange", lambda self, a, b: next(draws))
    other = connect(clock).producer()
    commit_one(x, 1)
    other.send("t", rows(2), partition=0)
    other.flush()
    assert other.producer_id != pid
    commit_one(x, 3)
    other.send("t", rows(4), partition=0)
    other.flush()
    assert claimed
    assert sorted(committed_values(connect(clock))) == [1, 2, 3, 4]


def test_idle_idempotent_producer_returns_after_its_claim_is_removed(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: an idempotent producer appends 1, 2; stays idle eight days
    while others append and checkpoint; vacuum removes its claim (no state
    holds it); it appends 3 and flushes twice. Guarantee: 1, 2, 3 each once."""
    log = make_topic(clock)
    p = log.producer()
    for v in (1, 2):
        p.send("t", rows(v), partition=0)
    p.flush()
    clocks.advance(WEEK_AND_A_DAY)
    for v in range(10, 16):
        log.append("t", rows(v))
    connect(clock).maintenance.vacuum()
    clocks.advance(WEEK_AND_A_DAY)
    for v in range(16, 20):
        log.append("t", rows(v))
    connect(clock).maintenance.vacuum()
    p.send("t", rows(3), partition=0)
    p.flush()
    p.flush()
    got = committed_values(connect(clock))
    assert sorted(got) == [1, 2, 3, *range(10, 20)]


def test_expired_id_keeps_its_last_committed_metadata(clock: ClockStore, clocks: Clocks) -> None:
    """Schedule: a Spark-like job "job" commits version 4 (metadata
    txnVersion) to topic "old", whose records are deleted and vacuumed; eight
    days later vacuum expires the id; the job restarts (init). Guarantee: the
    last committed version is still 4 (a replay of version 4 writes nothing)."""
    log = make_topic(clock)
    log.create_topic("old", SCHEMA)
    p = reinit(clock, "job", 1)
    p.begin_transaction()
    p.send("old", rows(1), partition=0)
    p.commit_transaction(metadata={"txnVersion": "4"})
    p.flush()
    log.append("old", rows(2))
    log.delete_records("old", 0, 2)
    clocks.advance(HOUR)
    for _ in range(2):
        clocks.advance(WEEK_AND_A_DAY)
        connect(clock).maintenance.vacuum()
    latest = CoordinatorLog(clock, "job", FAST.retry).latest()
    assert latest is not None and latest.metadata.get("txnVersion") == "4"
    q = reinit(clock, "job", 1)
    assert q.last_committed_metadata.get("txnVersion") == "4"


def test_open_transaction_of_idle_id_is_not_expired_by_cleanup(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: "x" registers partitions (add_partitions: an ONGOING entry,
    a distributed job's writer) and sends record 1, then nothing happens for
    eight days... and a driver resumes and commits. Transactions past their
    timeout are expired by expire_transactions, not vacuum: vacuum alone must
    leave the ONGOING transaction resumable.
    Guarantee: after vacuum the resumed commit succeeds and record 1 is
    visible (or the commit raises and it is not)."""
    make_topic(clock)
    p = connect(clock).producer(transactional_id="x", transaction_timeout_ms=900_000)
    p.init_transactions()
    p.begin_transaction()
    p.add_partitions([("t", 0)])
    p.send("t", rows(1), partition=0)
    epoch = p.epoch
    clocks.advance(WEEK_AND_A_DAY)
    connect(clock).maintenance.vacuum()
    d = connect(clock).producer(transactional_id="x")
    try:
        d.resume_transaction(epoch)
        d.commit_transaction()
        d.flush()
        ok = True
    except arrowlog.ArrowLogError:
        ok = False
    assert committed_values(connect(clock)) == ([1] if ok else [])


def test_idle_producer_with_stored_records_returns_and_commits(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: "x" commits records 1, 2 (kept: stored), then its producer is
    idle eight days; two vacuums run (not expired: records stored). It
    returns: commits 3, then init of a new instance and commit 4.
    Guarantee: 1, 2, 3, 4 visible once; its late-view writes pass the check."""
    make_topic(clock)
    p = reinit(clock, "x", 3)
    commit_one(p, 1)
    commit_one(p, 2)
    for _ in range(2):
        clocks.advance(WEEK_AND_A_DAY)
        removed = connect(clock).maintenance.vacuum()
        assert not any("expired" in r.reason for r in removed)
    commit_one(p, 3)
    commit_one(reinit(clock, "x", 1), 4)
    assert committed_values(connect(clock)) == [1, 2, 3, 4]


def test_background_complete_finished_after_idle_week(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: "x" commits record 1: the PREPARE lands, the COMPLETE fails
    (background); the producer is idle eight days; vacuum runs; the producer
    flushes (finishing the COMPLETE) and commits record 2.
    Guarantee: 1 and 2 visible, no error."""
    make_topic(scripted)
    p = reinit(scripted, "x", 2)
    latest = CoordinatorLog(scripted, "x", FAST.retry).latest()
    assert latest is not None
    from arrowlog.txn.coordinator import entry_key

    rule = scripted.fail(
        "put_if_absent", entry_key("x", latest.n + 2), times=10**6, maybe_applied=False
    )
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    p.commit_transaction()
    with pytest.raises(arrowlog.ArrowLogError):
        p.flush()
    rule.stop()
    clocks.advance(WEEK_AND_A_DAY)
    connect(scripted).maintenance.vacuum()
    p.flush()
    commit_one(p, 2)
    assert committed_values(connect(scripted)) == [1, 2]


# --- 5. a vacuum killed midway, then run again --------------------------------------------


def _history(store: Any, clocks: Clocks) -> arrowlog.ArrowLog:
    """Commits with offsets, plain commits, idle ids, staged files; eight days."""
    log = make_topic(store, partitions=2)
    log.create_topic("in", SCHEMA)
    x = reinit(store, "x", 3)
    for v in range(1, 4):
        x.begin_transaction()
        x.send("t", rows(v), partition=v % 2)
        x.send_offsets_to_transaction({("in", 0): v}, group_id="g")
        x.commit_transaction()
        x.flush()
    c = log.consumer(group_id="h")
    for off in range(3):
        c.commit({("t", 0): off})
    reinit(store, "idle", 3)
    store.put_if_absent("_arrowlog/staging/q/a.arrow", b"x")
    clocks.advance(WEEK_AND_A_DAY)
    x2 = reinit(store, "x", 1)
    commit_one(x2, 10)
    c.commit({("t", 0): 5})
    return log


def _observed(store: Any) -> tuple[object, ...]:
    log = connect(store)
    return (
        committed_values(log, "t", 0),
        committed_values(log, "t", 1),
        log.consumer(group_id="g").committed("in", 0),
        log.consumer(group_id="h").committed("t", 0),
        log.stable_offsets("t"),
    )


#: every DELETE of the vacuum on memory and a local directory; on SeaweedFS the
#: first, one in the middle and the last: the failure is scripted above the store
#: and the clock injected, so its other steps are the same requests again
VACUUM_DELETES = [
    *(
        pytest.param(kind, n, id=f"{kind}-{n}")
        for kind in ("memory", "local")
        for n in range(1, 17)
    ),
    *(pytest.param("s3", n, id=f"s3-{n}", marks=pytest.mark.s3) for n in (1, 8, 16)),
]


@pytest.mark.parametrize(("store_spec", "dies_at"), VACUUM_DELETES, indirect=["store_spec"])
def test_vacuum_dying_after_each_delete_then_rerun(
    scripted: ScriptedStore, clocks: Clocks, dies_at: int
) -> None:
    """Schedule: a vacuum of everything fails for good at its ``dies_at``-th
    DELETE (a crash there); a second vacuum runs to the end.
    Guarantee: what readers see (records, group offsets, LSOs) is the same
    before, after the crash and after the rerun; both ids commit again."""
    _history(scripted, clocks)
    before = _observed(scripted)
    rule = scripted.fail("delete", "*", nth=dies_at, times=10**6, maybe_applied=False)
    with contextlib.suppress(arrowlog.ArrowLogError):
        connect(scripted).maintenance.vacuum()
    rule.stop()
    assert _observed(scripted) == before
    connect(scripted).maintenance.vacuum()
    assert _observed(scripted) == before
    commit_one(reinit(scripted, "x", 1), 20, partition=1)
    commit_one(reinit(scripted, "idle", 1), 21, partition=1)
    assert committed_values(connect(scripted), "t", 1)[-2:] == [20, 21]


def test_zombie_prepare_in_doubt_landing_late_in_freed_key_commits_nothing(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" (entry 0) sends record 1 to t/0 and commits:
    every attempt at its PREPARE (entry 1) times out without landing; A gives
    up and dies. Instance B initialises (entry 1: A is fenced, record 1
    ABORTED) and commits 2 and 3 (entries 2..5). Eight days pass; B commits 4
    (6, 7); vacuum removes entries 0 and 1 (epochs below A's, whose record is
    stored). A's first PREPARE attempt lands now, in the freed key 1.
    Guarantee: record 1 stays invisible (a decision never changes; a fenced
    instance commits nothing)."""
    make_topic(scripted)
    a = reinit(scripted, "x", 1)
    a.begin_transaction()
    a.send("t", rows(1), partition=0)
    from arrowlog.txn.coordinator import entry_key

    armed = [True]
    late = scripted.late_put(lambda k: armed[0] and k == entry_key("x", 1), times=10**6)
    with pytest.raises(arrowlog.ArrowLogError):
        a.commit_transaction()
    armed[0] = False  # A dies here
    b = reinit(scripted, "x", 1)
    commit_one(b, 2)
    commit_one(b, 3)
    assert committed_values(connect(scripted)) == [2, 3]
    # A's record deleted: while it is stored, the entry answering for its
    # epoch stays, and so does key 1 (A's PREPARE would find it taken)
    connect(scripted).delete_records("t", 0, 1)
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(b, 4)
    connect(scripted).maintenance.vacuum()
    assert 1 not in entry_numbers(scripted, "x")
    assert late.land()
    assert committed_values(connect(scripted)) == [2, 3, 4]
    outcome = CoordinatorLog(scripted, "x", FAST.retry).outcome(a.epoch)
    assert outcome[0] is not Decision.COMMITTED


def test_zombie_retrying_its_prepare_in_doubt_after_it_landed_in_freed_key(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: as above (A's PREPARE in doubt, B fences A and commits, eight
    days, vacuum frees entries 0 and 1, A's first attempt lands in key 1), but
    A is alive and retries commit_transaction(): its attempt is recognised as
    its own. Guarantee: A's commit raises (fenced), the stray is gone and
    record 1 is never visible; B's records stay."""
    make_topic(scripted)
    a = reinit(scripted, "x", 1)
    a.begin_transaction()
    a.send("t", rows(1), partition=0)
    from arrowlog.txn.coordinator import entry_key

    armed = [True]
    late = scripted.late_put(lambda k: armed[0] and k == entry_key("x", 1), times=10**6)
    with pytest.raises(arrowlog.ArrowLogError):
        a.commit_transaction()
    armed[0] = False
    b = reinit(scripted, "x", 1)
    commit_one(b, 2)
    commit_one(b, 3)
    connect(scripted).delete_records("t", 0, 1)  # as above
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(b, 4)
    connect(scripted).maintenance.vacuum()
    assert late.land()
    with pytest.raises(ProducerFencedError):
        a.commit_transaction()
        a.flush()
    # no COMMIT marker of A's: t/0 holds B's three records and markers
    assert len([k for k in keys(scripted, "t/0/segments/") if k.endswith(".arrow")]) == 6
    assert committed_values(connect(scripted)) == [2, 3, 4]
    assert 1 not in entry_numbers(scripted, "x")


# --- 6. weeks of traffic with compaction and daily vacuums ----------------------------------


def test_three_weeks_of_daily_compaction_and_vacuum_read_the_same(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: 20 days; each day "x" commits two records (one per partition)
    with consumer offsets for group "g", "y" aborts one, "z" sends one and
    its instance dies (fenced the next day by a new instance), plain appends;
    a group "h" commits; then compact and vacuum (default retain_ms).
    Guarantee: every committed record visible once, no aborted or fenced one,
    each partition's LSO at its high watermark, the groups' positions the
    last committed. (Reading offsets alone: see the next test.)"""
    from arrowlog.maintenance.compaction import MIN_TARGET_BYTES

    log = make_topic(clock, partitions=2)
    log.create_topic("in", SCHEMA)
    want: dict[int, list[int]] = {0: [], 1: []}
    h = log.consumer(group_id="h")
    x = reinit(clock, "x", 1)
    y = reinit(clock, "y", 1)
    v = 0
    for day in range(20):
        x.begin_transaction()
        for p in (0, 1):
            v += 1
            x.send("t", rows(v), partition=p)
            want[p].append(v)
        x.send_offsets_to_transaction({("in", 0): day + 1}, group_id="g")
        x.commit_transaction()
        x.flush()
        y.begin_transaction()
        y.send("t", rows(-1), partition=day % 2)
        y.abort_transaction()
        y.flush()  # its marker lands now, not during the day's vacuum or the last reads
        z = reinit(clock, "z", 1)
        z.begin_transaction()
        z.send("t", rows(-2), partition=(day + 1) % 2)
        v += 1
        log.append("t", rows(v), partition=0)
        want[0].append(v)
        h.commit({("t", 1): day})
        clocks.advance(DAY)
        fresh = connect(clock)
        fresh.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
        fresh.maintenance.vacuum()
    reinit(clock, "z", 1)
    clocks.advance(DAY)
    connect(clock).maintenance.vacuum()
    fresh = connect(clock)
    for p in (0, 1):
        assert committed_values(fresh, "t", p) == want[p]
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")
    assert fresh.consumer(group_id="g").committed("in", 0) == 20
    assert fresh.consumer(group_id="h").committed("t", 1) == 19


def test_compacted_commit_read_without_its_marker_after_cleanup(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: "x" commits record 1 to t/0 (offset 0, its marker at 1); plain
    appends 2..9; "x" commits 101, 102 to t/1 (later epochs, stored).
    compact, then a day later vacuum removes the compacted segments; eight
    days pass, "x" initialises again, vacuum prunes entries of epochs no
    stored segment has. A reader reads offset 0 alone (the marker outside its
    range), as a consumer reading in small chunks or a micro-batch cut there
    does. Guarantee: record 1 is visible, as it is in a read of [0, 2)."""
    from arrowlog.maintenance.compaction import MIN_TARGET_BYTES

    log = make_topic(clock, partitions=2)
    x = reinit(clock, "x", 1)
    commit_one(x, 1)
    for v in range(2, 10):
        log.append("t", rows(v))
    commit_one(x, 101, partition=1)
    commit_one(x, 102, partition=1)
    clocks.advance(HOUR)
    assert connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DAY)
    connect(clock).maintenance.vacuum()
    clocks.advance(WEEK_AND_A_DAY)
    reinit(clock, "x", 1)
    connect(clock).maintenance.vacuum()
    reader = connect(clock).consumer(isolation_level="read_committed")
    assert reader.read("t", 0, start=0, end=2).column("v").to_pylist() == [1]
    assert reader.read("t", 0, start=0, end=1).column("v").to_pylist() == [1]


# --- 7. vacuum racing writers and another vacuum ----------------------------------------


def test_expiry_tombstone_racing_a_new_instance_init(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: "x" is idle eight days (no records). A vacuum decides to
    expire it and its PUT of the tombstone is held; a new instance
    initialises (takes that entry) and commits record 1; the tombstone's PUT
    goes on (the key is taken). Guarantee: the new instance's commit stands,
    record 1 visible, its producer id's claim kept; "x" commits again."""
    make_topic(scripted)
    reinit(scripted, "x", 2)
    clocks.advance(WEEK_AND_A_DAY)
    latest = CoordinatorLog(scripted, "x", FAST.retry).latest()
    assert latest is not None
    from arrowlog.txn.coordinator import entry_key

    gate = scripted.hold("put_if_absent", entry_key("x", latest.n + 1))
    vac = Background(lambda: connect(scripted).maintenance.vacuum())
    gate.wait_reached()
    q = connect(scripted).producer(transactional_id="x")
    q.init_transactions()
    commit_one(q, 1)
    gate.release()
    vac.result()
    commit_one(q, 2)
    assert committed_values(connect(scripted)) == [1, 2]
    assert f"{PRODUCER_IDS_PREFIX}{q.producer_id:020d}" in keys(scripted, PRODUCER_IDS_PREFIX)


def test_two_vacuums_at_once(scripted: ScriptedStore, clocks: Clocks) -> None:
    """Schedule: the history of the kill test; vacuum A is held at its first
    DELETE while vacuum B runs to the end; A goes on. Guarantee: both finish
    without error; readers see what they saw; both ids commit again."""
    _history(scripted, clocks)
    before = _observed(scripted)
    gate = scripted.hold("delete", "*")
    a = Background(lambda: connect(scripted).maintenance.vacuum())
    gate.wait_reached()
    connect(scripted).maintenance.vacuum()
    gate.release()
    a.result()
    assert _observed(scripted) == before
    commit_one(reinit(scripted, "x", 1), 20, partition=1)
    commit_one(reinit(scripted, "idle", 1), 21, partition=1)
    assert committed_values(connect(scripted), "t", 1)[-2:] == [20, 21]


def test_vacuum_racing_a_commit_with_offsets(scripted: ScriptedStore, clocks: Clocks) -> None:
    """Schedule: after eight idle days, a vacuum has noted every partition and
    group and is held at its listing of the coordinator logs; "x" (idle, no
    records) sends record 1 with offsets for group "g" and commits; the vacuum
    goes on. Guarantee: the commit either stands whole (record 1 visible, g
    at 5) or raises and nothing of it counts."""
    log = make_topic(scripted)
    log.create_topic("in", SCHEMA)
    x = reinit(scripted, "x", 2)
    clocks.advance(WEEK_AND_A_DAY)
    gate = scripted.hold("list", COORDINATOR_PREFIX)
    vac = Background(lambda: connect(scripted).maintenance.vacuum())
    gate.wait_reached()
    try:
        x.begin_transaction()
        x.send("t", rows(1), partition=0)
        x.send_offsets_to_transaction({("in", 0): 5}, group_id="g")
        x.commit_transaction()
        ok = True
    except ProducerFencedError:
        ok = False
    gate.release()
    vac.result()
    with contextlib.suppress(ProducerFencedError):
        x.flush()
    fresh = connect(scripted)
    assert committed_values(fresh) == ([1] if ok else [])
    assert fresh.consumer(group_id="g").committed("in", 0) == (5 if ok else None)
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")


# --- 8. distributed jobs (members) after cleanup ------------------------------------------


def _job(store: Any, tid: str, values: list[int], *, commit: bool = True) -> None:
    """One distributed job, as the Spark sink writes it: the driver begins,
    each value is written by its own member task (own producer id), the
    driver resumes and commits naming the members (or aborts)."""
    import pyarrow as pa

    from arrowlog.format.segment import WriterIdentity
    from arrowlog.txn.distributed import begin_if_idle, join_partitions
    from arrowlog.txn.producer_ids import allocate_producer_id

    log = connect(store)
    begun = begin_if_idle(log, tid, timeout_ms=600_000)
    assert begun is not None
    epoch = begun.producer_epoch
    members = []
    for v in values:
        pid = allocate_producer_id(log, tid)
        join_partitions(log, tid, epoch, [("t", 0)])
        who = WriterIdentity(
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            transactional=True,
            transactional_id=tid,
        )
        log.partition("t", 0).append(pa.Table.from_batches([rows(v)]), identity=who)
        members.append(pid)
    driver = log.producer(transactional_id=tid)
    driver.resume_transaction(epoch)
    if commit:
        driver.commit_transaction(members=members)
    else:
        driver.abort_transaction()
    driver.close()


def test_member_records_of_old_jobs_read_alone_after_cleanup(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: job "job" commits members' records 1, 2; a second job is
    aborted (3); a third commits 4; eight days, vacuum; more jobs (5); eight
    days, vacuum. Guarantee: reading every offset alone (markers outside the
    range) shows 1, 2, 4, 5 and never 3."""
    make_topic(clock)
    _job(clock, "job", [1, 2])
    _job(clock, "job", [3], commit=False)
    _job(clock, "job", [4])
    clocks.advance(WEEK_AND_A_DAY)
    connect(clock).maintenance.vacuum()
    _job(clock, "job", [5])
    clocks.advance(WEEK_AND_A_DAY)
    connect(clock).maintenance.vacuum()
    fresh = connect(clock)
    reader = fresh.consumer(isolation_level="read_committed")
    seen = []
    for o in range(fresh.end_offsets("t")[0]):
        col = reader.read("t", 0, start=o, end=o + 1).column("v").to_pylist()
        seen += [c for c in col if isinstance(c, int)]
    assert seen == [1, 2, 4, 5]
    assert committed_values(fresh) == [1, 2, 4, 5]
