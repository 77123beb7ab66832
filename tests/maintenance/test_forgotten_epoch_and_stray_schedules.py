"""Second adversarial round against the cleanup of bookkeeping by ``vacuum()``
and its fixes (strays told by their successor, FORGOTTEN epochs decided by
the compacted object below the compaction mark). Schedules and helpers as
in tests/maintenance/test_cleanup_schedules.py (whose helpers are reused). Library
code was untouched by it; its four findings are fixed since (start objects
instead of successors for strays; the entry answering for an epoch still
stored stays; forgotten batches droppable in the scan; the compaction mark
listed again before a FORGOTTEN decision; a compactor that meets one stops),
and every schedule stays as a regression test. Where the fixes made a
schedule's exact pruning impossible (the entry answering for a stored
fenced epoch stays, and its key with it), the fenced record is deleted first
so that the keys are freed as the schedule needs.

Findings, in short:

1. FORGOTTEN below the mark counts as visible, and the Spark scan
   (``plan_scan``/``_split``, read_committed: ``droppable=False``) then
   demands the run from the compacted object: an aborted batch (a fenced
   instance's, without a marker) raises CorruptSegmentError. Also reached
   without any race: a zombie returning after a week, then a routine compact.
   Every plan_scan user is hit (Spark batch/streaming, JVM planner, Iceberg
   export). The consumer path (``droppable=True``) is right.
2. Two strays in adjacent freed keys vouch for each other: ``is_stray(n)``
   sees n + 1 present and not ``inverted`` (the other stray, landed at about
   the same time). Readers: ``outcome()`` takes a zombie's PREPARE_COMMIT as
   the log's (its aborted record turns COMMITTED). Writers: a group commit is
   acknowledged then lost; a zombie producer writes COMMIT markers (its
   record visible for good, whatever the coordinator says later).
3. FORGOTTEN is decided against the compaction mark the deciding client knew
   when it fixed its view. A compactor (or a single-round read_committed
   read) whose view predates the compaction decides a committed, pruned epoch
   FORGOTTEN and hides it: the compactor writes a compacted object without
   it, which sorts first and hides it for every reader, for good.
4. ``bound = min(bound, needed)`` also removes the entry that showed a stored
   no-entry (fenced) epoch aborted: the epoch is FORGOTTEN while its batch is
   stored; below the mark but outside every compacted object (the segment
   holding the log start is never compacted) it is read from its own segment:
   aborted records shown, by a routine delete_records + compact + vacuum.

Held: the consumer path for FORGOTTEN batches, zombie batches landing after
the cleanup, plan_snapshot's second round (it learns the mark again), a late
PREPARE checked while its successor is written, vacuum with a stale group
listing, checkpoints removed under a long-lived reader and a stale writer.
Costs: an old-epoch decision now takes two HEADs more; a FORGOTTEN one a LIST
of every kept entry.

Origin: the second attack on cleanup (was tests/attack/test_cleanup_attack2.py).
"""

from __future__ import annotations

import contextlib

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.format.checkpoint import Decision
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.read.scan import output_schema, plan_scan, read_task
from arrowlog.testing.scripted import LatePut, ScriptedStore
from arrowlog.txn.coordinator import COORDINATOR_PREFIX, CoordinatorLog, entry_key
from arrowlog.txn.entrylog import entry_name, parse_entry_name
from arrowlog.txn.groups import GROUPS_PREFIX
from tests.support.cleanup import (
    DAY,
    HOUR,
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
from tests.support.schedules import FAST, Background, everything, rows


def scanned_values(log: arrowlog.ArrowLog, **kwargs: object) -> list[int]:
    """What the Spark source's tasks read of topic t (read_committed)."""
    plan = plan_scan(log, ["t"], **kwargs)  # type: ignore[arg-type]
    schema = output_schema(log.topic("t").schema)
    batches = [b for task in plan.tasks for b in read_task(log.store, task, schema)]
    table = pa.Table.from_batches(batches, schema=schema)
    table = table.sort_by([("partition", "ascending"), ("offset", "ascending")])
    return [v for v in table.column("v").to_pylist() if isinstance(v, int)]


def fenced_batch_compacted_and_forgotten(clock: ClockStore, clocks: Clocks) -> arrowlog.ArrowLog:
    """Instance A of "x" sends record -1 to t/0 (offset 0) and dies: no entry,
    no marker, ever. B fences it; plain appends 2..9 to t/0; B commits 101,
    102 to t/1 (later epochs, stored). Compact; a day later vacuum removes the
    compacted segments; eight days pass, "x" initialises again, vacuum prunes
    the entries of epochs no stored segment has: A's epoch is FORGOTTEN."""
    log = make_topic(clock, partitions=2)
    a = reinit(clock, "x", 1)
    a.begin_transaction()
    a.send("t", rows(-1), partition=0)
    a.flush()
    b = reinit(clock, "x", 1)
    for v in range(2, 10):
        log.append("t", rows(v))
    commit_one(b, 101, partition=1)
    commit_one(b, 102, partition=1)
    clocks.advance(HOUR)
    assert connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DAY)
    connect(clock).maintenance.vacuum()
    clocks.advance(WEEK_AND_A_DAY)
    reinit(clock, "x", 1)
    connect(clock).maintenance.vacuum()
    assert min(entry_numbers(clock, "x")) > 0
    return connect(clock)


# --- 1. a FORGOTTEN epoch read through paths other than the consumer's ------------------


def test_forgotten_fenced_batch_hidden_from_consumer(clock: ClockStore, clocks: Clocks) -> None:
    """Schedule: :func:`fenced_batch_compacted_and_forgotten`. A consumer
    reads t/0 whole and offset 0 alone. Guarantee: -1 never visible, 2..9 are."""
    fresh = fenced_batch_compacted_and_forgotten(clock, clocks)
    coordinator = CoordinatorLog(clock, "x", fresh.config.retry)
    assert coordinator.outcome(0)[0] is Decision.FORGOTTEN
    reader = fresh.consumer(isolation_level="read_committed")
    assert reader.read("t", 0).column("v").to_pylist() == list(range(2, 10))
    assert reader.read("t", 0, start=0, end=1).column("v").to_pylist() == []


def test_forgotten_fenced_batch_in_spark_scan(clock: ClockStore, clocks: Clocks) -> None:
    """Schedule: :func:`fenced_batch_compacted_and_forgotten`; then the Spark
    source plans and runs a read_committed batch scan of t/0. Guarantee: it
    reads 2..9 (the fenced record left out), no CorruptObjectError."""
    fresh = fenced_batch_compacted_and_forgotten(clock, clocks)
    assert scanned_values(fresh, partitions={("t", 0)}) == list(range(2, 10))


# --- 2. two strays: each vouches for the other ---------------------------------------------


def in_doubt_prepare(scripted: ScriptedStore, p: arrowlog.Producer, value: int, n: int) -> LatePut:
    """``p`` sends ``value`` to t/0 and commits: every attempt at its PREPARE
    (coordinator entry ``n``) times out without landing; it gives up and dies.
    The first attempt is returned, to land later."""
    p.begin_transaction()
    p.send("t", rows(value), partition=0)
    p.flush()
    armed = [True]
    late = scripted.late_put(lambda k: armed[0] and k == entry_key("x", n), times=10**6)
    with pytest.raises(arrowlog.ArrowLogError):
        p.commit_transaction()
    armed[0] = False
    return late


def test_two_adjacent_strays_vouch_for_each_other(scripted: ScriptedStore, clocks: Clocks) -> None:
    """Schedule: instance A of "x" (entry 0) sends -1 to t/0 and commits: its
    PREPARE (entry 1) is in doubt, A dies. B initialises (entry 1, fencing A),
    sends -2 and commits: its PREPARE (entry 2) is in doubt, B dies. D
    initialises (entry 2) and commits 3, 4 (entries 3..6); eight days pass; D
    commits 5 (7, 8). Vacuum removes entries 0..2 (transaction epoch -1: below
    A's epoch 0, whose record is stored). Both in-doubt PREPAREs land now, in
    the freed keys 1 and 2, one right after the other. Guarantee: -1 and -2
    stay invisible (fenced, never committed): a fresh reader sees 3, 4, 5."""
    make_topic(scripted)
    a = reinit(scripted, "x", 1)
    late_a = in_doubt_prepare(scripted, a, -1, 1)
    b = reinit(scripted, "x", 1)
    late_b = in_doubt_prepare(scripted, b, -2, 2)
    d = reinit(scripted, "x", 1)
    commit_one(d, 3)
    commit_one(d, 4)
    assert committed_values(connect(scripted)) == [3, 4]
    # (-1, -2 deleted: while stored, the entries answering for their epochs
    # stay, and keys 1 and 2 with them)
    connect(scripted).delete_records("t", 0, 2)
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(d, 5)
    connect(scripted).maintenance.vacuum()
    assert not {1, 2} & set(entry_numbers(scripted, "x"))
    assert late_b.land()
    assert late_a.land()
    assert committed_values(connect(scripted)) == [3, 4, 5]
    coordinator = CoordinatorLog(scripted, "x", FAST.retry)
    for epoch in (a.epoch, b.epoch):
        assert coordinator.outcome(epoch)[0] is not Decision.COMMITTED


def test_group_commits_landing_late_in_adjacent_freed_keys(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: B commits p1=1 (group entry 0). A commits p0=7: it reads
    entry 0, its PUT of entry 1 is held. B commits p1=2 (entry 1). C commits
    p2=9: it reads entry 1, its PUT of entry 2 is held. B commits p1=3, 4
    (entries 2, 3); eight days pass; B commits p1=5 (entry 4); vacuum frees
    0..2. C's PUT lands in key 2: C finds it a stray (entry 3 is much older)
    and its DELETE is held. A's PUT lands in key 1; A checks it and A's commit
    returns. C's DELETE goes on; C commits again on top. Guarantee: every
    acknowledged commit is in the group's position: p0=7, p1=5, p2=9."""
    make_topic(scripted, partitions=3)
    a = connect(scripted).consumer(group_id="g")
    b = connect(scripted).consumer(group_id="g")
    c = connect(scripted).consumer(group_id="g")
    b.commit({("t", 1): 1})
    gate_a = scripted.hold("put_if_absent", GROUPS_PREFIX + "g/" + entry_name(1))
    held_a = Background(lambda: a.commit({("t", 0): 7}))
    gate_a.wait_reached()
    b.commit({("t", 1): 2})
    gate_c = scripted.hold("put_if_absent", GROUPS_PREFIX + "g/" + entry_name(2))
    held_c = Background(lambda: c.commit({("t", 2): 9}))
    gate_c.wait_reached()
    b.commit({("t", 1): 3})
    b.commit({("t", 1): 4})
    clocks.advance(WEEK_AND_A_DAY)
    b.commit({("t", 1): 5})
    connect(scripted).maintenance.vacuum()
    numbers = {parse_entry_name(k.rpartition("/")[2]) for k in keys(scripted, GROUPS_PREFIX)}
    assert numbers - {None} == {3, 4}
    delete_c = scripted.hold("delete", GROUPS_PREFIX + "g/" + entry_name(2))
    gate_c.release()
    delete_c.wait_reached()
    gate_a.release()
    held_a.result()  # acknowledged
    delete_c.release()
    held_c.result()
    fresh = connect(scripted).consumer(group_id="g")
    got = (fresh.committed("t", 0), fresh.committed("t", 1), fresh.committed("t", 2))
    assert got == (7, 5, 9)


# --- 3. a compactor racing the cleanup ------------------------------------------------------


def test_stale_compactor_deciding_a_forgotten_commit_hides_it(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: "x" sends 1 to t/0 (offset 0); plain appends 2..9 (1..8);
    "x" commits (its marker at 9), then commits 101, 102 to t/1 (later
    epochs). Compactor K plans t/0 (one range, below the newest checkpoint;
    no compaction mark yet) and asks the coordinator how the batch at 0 ended
    (its marker lies outside K's range): that request is held. Plain appends
    10..19; compactor J compacts t/0 (a longer range, the marker in it); a day
    later vacuum removes the compacted segments; eight days pass, "x"
    initialises again, vacuum prunes the entries of the epoch of record 1.
    K's request goes on; K writes its compacted object. Guarantee: record 1,
    committed, stays visible to a read_committed reader."""
    from arrowlog.maintenance.compaction import compact_partition

    log = make_topic(scripted, partitions=2)
    x = reinit(scripted, "x", 1)
    x.begin_transaction()
    x.send("t", rows(1), partition=0)
    x.flush()
    for v in range(2, 10):
        log.append("t", rows(v))
    x.commit_transaction()
    x.flush()
    commit_one(x, 101, partition=1)
    commit_one(x, 102, partition=1)
    clocks.advance(HOUR)
    k = connect(scripted)
    gate = scripted.hold("list", f"{COORDINATOR_PREFIX}x/")
    held = Background(lambda: compact_partition(k, k.partition("t", 0), MIN_TARGET_BYTES))
    gate.wait_reached()
    for v in range(10, 20):
        log.append("t", rows(v))
    assert connect(scripted).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DAY)
    connect(scripted).maintenance.vacuum()
    clocks.advance(WEEK_AND_A_DAY)
    reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    assert CoordinatorLog(scripted, "x", k.config.retry).outcome(0)[0] is Decision.FORGOTTEN
    want = [1, *range(2, 20)]
    assert committed_values(connect(scripted)) == want  # J's compacted object holds it
    gate.release()
    held.result()
    assert committed_values(connect(scripted)) == want


def committed_then_compacted(
    scripted: ScriptedStore, clocks: Clocks
) -> tuple[arrowlog.ArrowLog, arrowlog.Producer]:
    """ "x" sends 1 to t/0 (offset 0); plain appends 2..9 (1..8); "x" commits
    (its marker at 9), then commits 101, 102 to t/1 (later epochs); an hour
    passes."""
    log = make_topic(scripted, partitions=2)
    x = reinit(scripted, "x", 1)
    x.begin_transaction()
    x.send("t", rows(1), partition=0)
    x.flush()
    for v in range(2, 10):
        log.append("t", rows(v))
    x.commit_transaction()
    x.flush()
    commit_one(x, 101, partition=1)
    commit_one(x, 102, partition=1)
    clocks.advance(HOUR)
    return log, x


def compact_and_forget(scripted: ScriptedStore, clocks: Clocks, log: arrowlog.ArrowLog) -> None:
    """Plain appends 10..19 to t/0; compact; a day later vacuum removes the
    compacted segments; eight days pass, "x" initialises again, vacuum prunes
    the entries of record 1's epoch."""
    for v in range(10, 20):
        log.append("t", rows(v))
    assert connect(scripted).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DAY)
    connect(scripted).maintenance.vacuum()
    clocks.advance(WEEK_AND_A_DAY)
    reinit(scripted, "x", 1)
    connect(scripted).maintenance.vacuum()
    assert CoordinatorLog(scripted, "x", log.config.retry).outcome(0)[0] is Decision.FORGOTTEN


def test_reader_with_stale_mark_deciding_a_forgotten_commit(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: :func:`committed_then_compacted`. A read_committed reader
    reads [0, 9) of t/0 (as a consumer reading in chunks does): its view is
    fixed (no compaction mark yet; record 1 committed), then its request to the
    coordinator about the batch at 0 (its marker at 9 lies outside the range)
    is held. :func:`compact_and_forget`. The reader goes on. Guarantee: its
    read holds record 1, committed before the read began."""
    log, _ = committed_then_compacted(scripted, clocks)
    reader = connect(scripted).consumer(isolation_level="read_committed")
    gate = scripted.hold("list", f"{COORDINATOR_PREFIX}x/")
    held = Background(lambda: reader.read("t", 0, start=0, end=9).column("v").to_pylist())
    gate.wait_reached()
    compact_and_forget(scripted, clocks, log)
    gate.release()
    assert held.result() == list(range(1, 10))


def test_spark_scan_with_stale_mark_deciding_a_forgotten_commit(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: as the previous test, but the reader is the Spark source's
    plan_scan of [0, 9) of t/0, held at its first question to the coordinator
    (the snapshot's first round). Held: the snapshot's second round fixes its
    views again and learns the compaction mark, so the FORGOTTEN epoch below
    it counts as visible and is read from the compacted object."""
    log, _ = committed_then_compacted(scripted, clocks)
    scanner = connect(scripted)
    gate = scripted.hold("list", f"{COORDINATOR_PREFIX}x/")
    held = Background(
        lambda: scanned_values(
            scanner, partitions={("t", 0)}, starting={("t", 0): 0}, ending={("t", 0): 9}
        )
    )
    gate.wait_reached()
    compact_and_forget(scripted, clocks, log)
    gate.release()
    assert held.result() == list(range(1, 10))


def test_zombie_prepare_passing_its_stray_check_on_another_stray(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" (entry 0) sends -1 to t/0 and commits: its
    PUT of PREPARE (entry 1) is held. B initialises (entry 1, fencing A), sends
    -2 and commits: its PUT of PREPARE (entry 2) is held. D initialises (entry
    2), commits 3, 4 (3..6); eight days pass; D commits 5 (7, 8); vacuum
    removes entries 0..2. B's PUT lands in key 2: B finds it a stray (entry 3
    is eight days older) and its DELETE is held. A's PUT lands in key 1: A
    checks it against key 2 (B's stray, just written), takes it as written,
    writes its COMMIT marker (commit_transaction returns; flush then raises
    ProducerFencedError at COMPLETE). Then B's DELETE goes on.
    Guarantee: fenced instances commit nothing: a fresh reader sees 3, 4, 5."""
    make_topic(scripted)
    a = reinit(scripted, "x", 1)
    a.begin_transaction()
    a.send("t", rows(-1), partition=0)
    a.flush()
    gate_a = scripted.hold("put_if_absent", entry_key("x", 1))

    def commit_a() -> None:
        a.commit_transaction()
        a.flush()

    held_a = Background(commit_a)
    gate_a.wait_reached()
    b = reinit(scripted, "x", 1)
    b.begin_transaction()
    b.send("t", rows(-2), partition=0)
    b.flush()
    gate_b = scripted.hold("put_if_absent", entry_key("x", 2))
    held_b = Background(b.commit_transaction)
    gate_b.wait_reached()
    d = reinit(scripted, "x", 1)
    commit_one(d, 3)
    commit_one(d, 4)
    connect(scripted).delete_records("t", 0, 2)  # as above
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(d, 5)
    connect(scripted).maintenance.vacuum()
    assert not {1, 2} & set(entry_numbers(scripted, "x"))
    delete_b = scripted.hold("delete", entry_key("x", 2))
    gate_b.release()
    delete_b.wait_reached()
    gate_a.release()
    with contextlib.suppress(arrowlog.ArrowLogError):
        held_a.result()  # A wrote COMMIT markers, then finds itself fenced
    delete_b.release()
    with contextlib.suppress(arrowlog.ArrowLogError):
        held_b.result()
    assert committed_values(connect(scripted)) == [3, 4, 5]


# --- 4. what deciding old epochs costs now -------------------------------------------------


def test_request_cost_of_old_epoch_decisions(scripted: ScriptedStore, clocks: Clocks) -> None:
    """Not a guarantee, a measurement (pinned so a change shows): "x" commits
    20 transactions, eight days pass, 200 more; records below the last two are
    deleted; vacuum prunes the entries below the recent ones. Deciding an old
    epoch still stored (one of the recent ones, not the latest) costs the
    binary search (one LIST, about log2(n) GETs) plus two HEADs for the stray
    check of the entry found: the fix's addition, ~20% more requests, once per
    epoch per resolver (decisions are cached). Deciding a pruned epoch costs
    one LIST more, of every kept entry (``first_kept``): on S3 one page per
    1000 kept entries, so an id that commits every few seconds pays dozens of
    LIST pages for each FORGOTTEN epoch a reader decides."""
    import collections

    log = make_topic(scripted)
    x = reinit(scripted, "x", 1)
    epochs = []
    for v in range(20):
        commit_one(x, v)
        epochs.append(x.epoch - 1)
    clocks.advance(WEEK_AND_A_DAY)
    for v in range(200):
        commit_one(x, v)
        epochs.append(x.epoch - 1)
    log.delete_records("t", 0, log.partition("t", 0).end_offset() - 2)
    clocks.advance(DAY)
    connect(scripted).maintenance.vacuum()
    coordinator = CoordinatorLog(scripted, "x", log.config.retry)

    def cost(epoch: int) -> tuple[Decision, dict[str, int]]:
        scripted.history.clear()
        decided = coordinator.outcome(epoch)[0]
        return decided, dict(collections.Counter(op for op, _ in scripted.history))

    decided, requests = cost(epochs[100])
    assert decided is Decision.COMMITTED
    # the latest entry, the log's start objects, a binary search
    assert requests["list"] == 2 and requests.get("head", 0) == 0
    assert requests["get"] <= 12
    decided, requests = cost(epochs[0])
    assert decided is Decision.FORGOTTEN
    assert requests["list"] == 2


# --- 5. a zombie's batch of a FORGOTTEN epoch landing after the cleanup ---------------------


def test_zombie_batch_of_forgotten_epoch_landing_after_cleanup_stays_hidden(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" initialises (entry 0, epoch 0); B
    initialises (fencing A, which does not know) and commits 1, 2; plain
    appends 3..6. Eight days pass; B commits 7; vacuum prunes every entry of
    A's epoch (no stored record has it). Now A begins and sends -1 (data
    before any entry: it lands at the end under the FORGOTTEN epoch 0); its
    commit fails. Then compact, a day, vacuum. Guarantee: -1 is never visible,
    before or after compaction; the LSO is not held by it."""
    log = make_topic(scripted)
    a = reinit(scripted, "x", 1)
    b = reinit(scripted, "x", 1)
    commit_one(b, 1)
    commit_one(b, 2)
    for v in range(3, 7):
        log.append("t", rows(v))
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(b, 7)
    connect(scripted).maintenance.vacuum()
    assert 0 not in entry_numbers(scripted, "x")
    assert CoordinatorLog(scripted, "x", log.config.retry).outcome(0)[0] is Decision.FORGOTTEN
    with contextlib.suppress(arrowlog.ArrowLogError):
        a.begin_transaction()
        a.send("t", rows(-1), partition=0)
        a.flush()
    with pytest.raises(arrowlog.ArrowLogError):
        a.commit_transaction()
    want = [1, 2, 3, 4, 5, 6, 7]
    fresh = connect(scripted)
    assert -1 in everything(fresh)  # A's append landed
    assert committed_values(fresh) == want
    assert fresh.stable_offsets("t") == fresh.end_offsets("t")
    clocks.advance(HOUR)
    connect(scripted).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DAY)
    connect(scripted).maintenance.vacuum()
    assert committed_values(connect(scripted)) == want


def test_zombie_batch_of_forgotten_epoch_in_spark_scan_after_compaction(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: as the previous test up to A's failed commit; then compact
    (the compactor leaves -1 out). The Spark source scans t/0 read_committed.
    Guarantee: it reads 1..7, no CorruptObjectError."""
    log = make_topic(scripted)
    a = reinit(scripted, "x", 1)
    b = reinit(scripted, "x", 1)
    commit_one(b, 1)
    commit_one(b, 2)
    for v in range(3, 7):
        log.append("t", rows(v))
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(b, 7)
    connect(scripted).maintenance.vacuum()
    with contextlib.suppress(arrowlog.ArrowLogError):
        a.begin_transaction()
        a.send("t", rows(-1), partition=0)
        a.flush()
    with pytest.raises(arrowlog.ArrowLogError):
        a.commit_transaction()
    for v in range(8, 12):
        log.append("t", rows(v))
    clocks.advance(HOUR)
    assert connect(scripted).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    want = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]
    assert committed_values(connect(scripted)) == want
    assert scanned_values(connect(scripted), partitions={("t", 0)}) == want


# --- 6. a stored batch decided FORGOTTEN below the mark, outside any compacted object -------


def test_fenced_batch_in_segment_holding_the_log_start_below_the_mark(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" sends -1..-5 to t/0 (one segment, offsets
    0..4) and dies (no entry, no marker). B initialises (fencing A: -1..-5
    ABORTED), commits 100, 101 to t/1. Plain appends 6..15 to t/0 (5..14).
    Records before 2 are deleted (the log start lies inside A's segment);
    compact (from 5: the segment holding the log start is never compacted;
    the mark passes it). Eight days pass; B commits 102 to t/1; vacuum: A's
    segment is stored, so the lowest epoch needed is A's 0, and the entries
    of transaction epoch -1 (the inits, which showed epoch 0 aborted) go.
    Guarantee: a read_committed reader never sees -3..-5."""
    log = make_topic(scripted, partitions=2)
    a = reinit(scripted, "x", 1)
    a.begin_transaction()
    a.send("t", rows(-1, -2, -3, -4, -5), partition=0)
    a.flush()
    b = reinit(scripted, "x", 1)
    commit_one(b, 100, partition=1)
    commit_one(b, 101, partition=1)
    for v in range(6, 16):
        log.append("t", rows(v))
    want = list(range(6, 16))
    assert committed_values(connect(scripted)) == want
    log.delete_records("t", 0, 2)
    clocks.advance(HOUR)
    assert connect(scripted).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(WEEK_AND_A_DAY)
    commit_one(b, 102, partition=1)
    connect(scripted).maintenance.vacuum()
    # the entry answering for A's epoch stays while A's segment is stored
    assert CoordinatorLog(scripted, "x", log.config.retry).outcome(0)[0] is Decision.ABORTED
    assert committed_values(connect(scripted)) == want


# --- 7. checkpoints removed below the log start, under a long-lived reader -------------------


def test_long_lived_reader_after_checkpoints_below_log_start_removed(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: plain appends 0..19 to t/0 (ten checkpoint windows); a reader
    reads it all (its partition object keeps the windows). Records before 10
    are deleted; eight days pass; vacuum removes the segments and the
    checkpoints below 10. The same reader reads again from the log start, and
    from 0. Guarantee: 10..19, and OffsetOutOfRangeError (never a corrupt or
    lost-segment error); a writer appends on."""
    log = make_topic(clock)
    for v in range(20):
        log.append("t", rows(v))
    reader_log = connect(clock)
    reader = reader_log.consumer(isolation_level="read_committed")
    assert reader.read("t", 0).column("v").to_pylist() == list(range(20))
    log.delete_records("t", 0, 10)
    clocks.advance(WEEK_AND_A_DAY)
    removed = connect(clock).maintenance.vacuum()
    assert any("checkpoint" in r.reason for r in removed)
    assert reader.read("t", 0).column("v").to_pylist() == list(range(10, 20))
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        reader.read("t", 0, start=0)
    with pytest.raises(arrowlog.OffsetOutOfRangeError):
        reader_log.partition("t", 0).read(start=4, end=12)
    log.append("t", rows(20))
    assert committed_values(connect(clock)) == list(range(10, 21))


def test_stale_writer_after_checkpoints_below_log_start_removed(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Schedule: writer W appends 0; another writer appends 1..19; records
    before 10 are deleted; eight days pass; vacuum removes the segments and
    checkpoints below 10. W (its view ends at 1, within a removed window)
    appends 20. Guarantee: 20 is appended once, at the end: the log reads
    10..20."""
    w = make_topic(clock)
    w.append("t", rows(0))
    other = connect(clock)
    for v in range(1, 20):
        other.append("t", rows(v))
    other.delete_records("t", 0, 10)
    clocks.advance(WEEK_AND_A_DAY)
    connect(clock).maintenance.vacuum()
    w.append("t", rows(20))
    assert committed_values(connect(clock)) == list(range(10, 21))


# --- 8. a legitimate late write checked while its successor is written ---------------------


def test_late_prepare_checked_while_a_fencer_writes_its_successor(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: instance A of "x" sends 1 and idles eleven minutes (its view
    of the log is older than LATE_OUTCOME_MS), then commits: its PREPARE
    (entry 1) lands and its stray check is held at its LIST. A new
    instance B initialises meanwhile, in the same store second: it restates
    A's PREPARE_COMMIT with a bumped epoch (entry 2) and rolls it forward.
    A's check goes on. Guarantee: A's entry is the log's (not removed: no hole,
    no CorruptObjectError); record 1 is committed, visible once."""
    make_topic(scripted)
    a = connect(scripted).producer(transactional_id="x", transaction_timeout_ms=14 * 60_000)
    a.init_transactions()
    a.begin_transaction()
    a.send("t", rows(1), partition=0)
    a.flush()
    clocks.advance(11 * 60_000)
    gate = scripted.hold("list", f"{COORDINATOR_PREFIX}x/")
    held = Background(a.commit_transaction)
    gate.wait_reached()
    assert entry_numbers(scripted, "x") == [0, 1]  # A's PREPARE landed
    reinit(scripted, "x", 1)
    gate.release()
    with contextlib.suppress(arrowlog.ProducerFencedError):
        held.result()
        a.flush()
    assert entry_numbers(scripted, "x")[:3] == [0, 1, 2]
    assert committed_values(connect(scripted)) == [1]
    coordinator = CoordinatorLog(scripted, "x", FAST.retry)
    assert coordinator.outcome(0)[0] is Decision.COMMITTED


def test_vacuum_with_a_stale_group_listing_under_concurrent_commits(
    scripted: ScriptedStore, clocks: Clocks
) -> None:
    """Schedule: group g commits p0 = 1..5 (entries 0..4); eight days pass; it
    commits 6 (entry 5). Vacuum lists the group entries (0..5), then its read
    of the group's latest entry is held; meanwhile four consumers commit p0 =
    7..10 (entries 6..9). The vacuum goes on with its stale listing. Guarantee:
    only entries 0..3 go (their successors are old); the position is 10."""
    make_topic(scripted)
    g = connect(scripted).consumer(group_id="g")
    for off in range(1, 6):
        g.commit({("t", 0): off})
    clocks.advance(WEEK_AND_A_DAY)
    g.commit({("t", 0): 6})
    gate = scripted.hold("get", f"{GROUPS_PREFIX}g/*")
    held = Background(connect(scripted).maintenance.vacuum)
    gate.wait_reached()
    for off in range(7, 11):
        connect(scripted).consumer(group_id="g").commit({("t", 0): off})
    gate.release()
    held.result()
    left = {parse_entry_name(k.rpartition("/")[2]) for k in keys(scripted, f"{GROUPS_PREFIX}g/")}
    assert left - {None} == set(range(4, 10))
    assert connect(scripted).consumer(group_id="g").committed("t", 0) == 10
