"""Schedules against commits (records sent after the commit point, a commit
aborted for its timeout, offsets after a failed pending mark), listings that
miss a segment, an entry or a checkpoint, refused sends, and idempotent batches
of resumed instances (each test failed on the code it was written against; each
is named after what broke, and asserts the guarantee). Each docstring gives the
schedule step by step, what is expected and what happened.

Origin: the first adversarial review of issue 7's fixes (was tests/attack/test_broke.py).

Tests run on the ``store`` fixture (memory, local directory, SeaweedFS) unless
the schedule needs nothing store-specific.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.errors import ArrowLogError
from arrowlog.format.topic import checkpoint_key, segment_key
from arrowlog.read.scan import plan_scan
from arrowlog.storage import Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.coordinator import entry_key
from tests.support.schedules import FAST, FOREVER, SCHEMA, Background, everything, rows, visible


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


# --- 5. records written after the commit point --------------------------------------


def test_a_send_after_a_failed_commit_joins_the_already_visible_transaction(
    store: Store, scripted: ScriptedStore
) -> None:
    """Records written after the point of no return become visible.

    1. P: init, begin, send rows(1) to t/0 (offset 0).
    2. P: commit_transaction. PREPARE_COMMIT lands (bound t/0 = 1): the
       transaction is committed, rows(1) visible. The COMMIT marker's PUT gets
       503 until the deadline, so commit raises TransientStoreError (retriable).
    3. A reader sees [1]: the whole committed transaction.
    4. P is still IN_TRANSACTION: send rows(2) to t/0 is accepted and lands at 1,
       after the commit point.
    5. P retries commit_transaction: it writes a *second* PREPARE_COMMIT whose
       bound for t/0 is 2, then the marker.

    Expected: rows(2), written after PREPARE_COMMIT, is never visible (or the
    send is refused). Observed: readers now see [1, 2]: the set of records of a
    transaction that was already committed and read has grown.
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    refusing = scripted.throttle("put_if_absent", "t/0/segments/*", times=FOREVER)
    p.commit_transaction()  # returns at PREPARE_COMMIT; the marker fails behind it
    with pytest.raises(ArrowLogError):
        p.flush()
    refusing.stop()
    assert visible(arrowlog.connect(store).consumer()) == [1]  # committed, read
    late_send_refused = False
    try:
        p.send("t", rows(2), partition=0)
    except ArrowLogError:
        late_send_refused = True
    with contextlib.suppress(ArrowLogError):
        p.commit_transaction()
    seen = visible(arrowlog.connect(store).consumer())
    assert late_send_refused or seen == [1], (
        f"a record sent after PREPARE_COMMIT joined the committed transaction: {seen}"
    )


def test_a_retried_commit_of_a_resumed_transaction_takes_in_the_late_records_of_the_original(
    store: Store, scripted: ScriptedStore
) -> None:
    """The bound fixed at PREPARE_COMMIT is recomputed by a retried commit.

    1. A: init, begin, send rows(1) to t/0 (offset 0).
    2. B (another process): resume_transaction(A's epoch), commit_transaction:
       PREPARE_COMMIT lands with bound t/0 = 1 (the high watermark); the
       marker's PUT gets 503 until the deadline: commit raises (retriable).
    3. A reader sees [1]: the transaction is committed.
    4. A, which lost the transaction to B, sends rows(2) to t/0: it lands at 1,
       past the bound.
    5. B retries commit_transaction: a second PREPARE_COMMIT, bound = the high
       watermark *now* (2), marker, COMPLETE.

    Expected (guarantee 5): rows(2), written after the commit point by the
    original instance, is never visible. Observed: readers see [1, 2].
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    a = arrowlog.connect(store).producer(transactional_id="job")
    a.init_transactions()
    a.begin_transaction()
    a.add_partitions([("t", 0)])  # resumable: the partition is registered
    a.send("t", rows(1), partition=0)
    b = arrowlog.connect(scripted, config=FAST).producer(transactional_id="job")
    b.resume_transaction(a.epoch)
    refusing = scripted.throttle("put_if_absent", "t/0/segments/*", times=FOREVER)
    b.commit_transaction()  # returns at PREPARE_COMMIT; the marker fails behind it
    with pytest.raises(ArrowLogError):
        b.flush()
    refusing.stop()
    assert visible(arrowlog.connect(store).consumer()) == [1]
    a.send("t", rows(2), partition=0)  # after the commit point: must never be visible
    assert visible(arrowlog.connect(store).consumer()) == [1]
    b.flush()  # the retry finishes the same entry
    assert visible(arrowlog.connect(store).consumer()) == [1]


# --- 2. a commit that was aborted for its timeout must not report success ---------


def test_commit_of_a_timed_out_transaction_returns_normally_when_another_instance_finishes_it(
    store: Store, scripted: ScriptedStore
) -> None:
    """commit_transaction reports success for a transaction it aborted.

    1. P (timeout 1 s): init, begin, send rows(1) to t/0; wait 1.1 s.
    2. P: commit_transaction. Past its timeout, it writes PREPARE_ABORT instead
       (entry 2) and the ABORT marker; its COMPLETE_ABORT PUT (entry 3) is held.
    3. Q, a new instance of the same id, initialises: it restates PREPARE_ABORT
       (entry 3) and completes it (entry 4).
    4. P's COMPLETE PUT is released: the key is taken, finish() returns None.

    Expected: commit_transaction raises (TransactionTimeoutError, or
    ProducerFencedError): the transaction was aborted. Observed: it returns
    normally, as if the transaction had committed; its record is not visible.
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted).producer(transactional_id="tx", transaction_timeout_ms=1_000)
    p.init_transactions()  # entry 0
    p.begin_transaction()
    p.send("t", rows(1), partition=0)  # no entry: the data need none
    time.sleep(1.1)
    gate = scripted.hold("put_if_absent", entry_key("tx", 2))  # PREPARE_ABORT is 1
    commit = Background(p.commit_transaction)
    gate.wait_reached()
    arrowlog.connect(store).producer(transactional_id="tx").init_transactions()
    gate.release()
    reported: BaseException | None = None
    try:
        commit.result()
    except ArrowLogError as e:
        reported = e
    assert visible(arrowlog.connect(store).consumer()) == []  # it was aborted ...
    assert reported is not None, "... but commit_transaction returned as if it committed"


# --- 4. consumer offsets ------------------------------------------------------------


def test_offsets_resent_after_a_failed_pending_mark_do_not_count_when_the_records_are_visible(
    store: Store, scripted: ScriptedStore
) -> None:
    """The group's pending mark is only written by the first
    send_offsets_to_transaction for a group, even if that first call failed.

    1. P: init, begin, send rows(1) to t/0.
    2. P: send_offsets_to_transaction({in/0: 1}, "g"): the coordinator entry
       with the offsets lands; every PUT to the group log gets 503 until the
       deadline: ConcurrentTransactionsError (retriable).
    3. P retries send_offsets_to_transaction (the store is fine again): it
       succeeds, but skips the pending mark ("not the first time").
    4. P: commit_transaction: PREPARE_COMMIT lands, then the process dies
       (every later marker / group PUT fails).

    Expected: rows(1) is visible, so committed(in/0) is 1 (as for a committer
    that dies after PREPARE_COMMIT with the mark in place). Observed: None: a
    consumer taking over the group reprocesses input already in the output.
    (And before commit, committed() answers None instead of raising
    UnstableOffsetCommitError.)
    """
    setup = arrowlog.connect(store)
    setup.create_topic("in", SCHEMA)
    setup.create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="copier")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    refusing = scripted.throttle("put_if_absent", "_arrowlog/groups/g/*", times=FOREVER)
    with pytest.raises(arrowlog.ConcurrentTransactionsError):
        p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
    refusing.stop()
    p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")  # the retry
    scripted.fail("put_if_absent", "t/0/segments/*", times=FOREVER, maybe_applied=False)
    scripted.fail("put_if_absent", "_arrowlog/groups/*", times=FOREVER, maybe_applied=False)
    p.commit_transaction()  # PREPARE_COMMIT landed, then the "crash"
    with pytest.raises(ArrowLogError):
        p.flush()
    reader = arrowlog.connect(store).consumer(group_id="g")
    assert visible(reader) == [1]
    assert reader.committed("in", 0) == 1


# --- 6. listings that miss keys -----------------------------------------------------


def test_a_resumed_commit_whose_listing_misses_a_segment_drops_an_acknowledged_record(
    store: Store, scripted: ScriptedStore
) -> None:
    """The bound of a resumed (or multi-member) transaction comes from a LIST.

    1. A: init, begin, send rows(1) to t/0: acknowledged at offset 0.
    2. B (another process) resumes A's transaction and commits. Its bound for
       t/0 is the high watermark it lists; that one LIST misses segment 0 (a
       listing is not a snapshot), so the bound is 0. Its marker PUT at 0 finds
       the key taken, lists again (complete now) and lands at 1.

    Expected: the committed transaction holds rows(1), acknowledged before
    the commit began. Observed: rows(1) is past the bound: never visible,
    though the transaction committed.
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    a = arrowlog.connect(store).producer(transactional_id="job")
    a.init_transactions()
    a.begin_transaction()
    a.add_partitions([("t", 0)])  # resumable: the partition is registered
    assert a.send("t", rows(1), partition=0).base_offset == 0
    scripted.hide(segment_key("t", 0, 0), times=1)
    b = arrowlog.connect(scripted).producer(transactional_id="job")
    b.resume_transaction(a.epoch)
    b.commit_transaction()
    assert visible(arrowlog.connect(store).consumer()) == [1]


def _committed_across_two_partitions(store: Store) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    w = arrowlog.connect(store).producer(transactional_id="w")
    w.init_transactions()
    with w.transaction():
        w.send("t", rows(1), partition=0)
        w.send("t", rows(2), partition=1)


def test_read_many_shows_half_a_transaction_when_a_listing_misses_a_segment(
    store: Store, scripted: ScriptedStore
) -> None:
    """read_many is torn by a listing that shows N+1 without N.

    1. T writes rows(1) to t/0 and rows(2) to t/1 and commits: in each
       partition, data at 0, COMMIT marker at 1.
    2. A reader calls read_many over t/0 and t/1. Both listings of t/1 it
       makes (first and second round) show the marker at 1 without the data
       segment at 0 (the listing anomaly docs/protocol.md describes).

    Expected: T in both ranges or in neither. Observed: {t/0: [1], t/1: []}:
    T's marker in t/0 marks it decided, t/1's view ends before its records,
    and the torn-transaction cut only looks inside the views.
    """
    _committed_across_two_partitions(store)
    scripted.hide(segment_key("t", 1, 0), times=2)
    tables = (
        arrowlog.connect(scripted).consumer().read_many({("t", 0): (0, None), ("t", 1): (0, None)})
    )
    seen = [tables[("t", p)].column("v").to_pylist() for p in (0, 1)]
    assert seen in ([[1], [2]], [[], []])


def test_plan_scan_shows_half_a_transaction_when_a_listing_misses_a_segment(
    store: Store, scripted: ScriptedStore
) -> None:
    """Same schedule for the Spark-free scan planner: its three listings of t/1
    (offsets, first round, second round) miss T's data segment there."""
    _committed_across_two_partitions(store)
    scripted.hide(segment_key("t", 1, 0), times=3)
    scan = plan_scan(arrowlog.connect(scripted), ["t"])
    rows_per_partition = [sum(t.rows for t in scan.tasks if t.partition == p) for p in (0, 1)]
    assert rows_per_partition in ([1, 1], [0, 0])


def test_a_coordinator_listing_that_misses_the_newest_entry_lets_a_reader_skip_a_committed_record(
    store: Store, scripted: ScriptedStore
) -> None:
    """A reader asks how a transaction ended by LISTing the coordinator log for
    its newest entry; a listing that misses that entry shows an older one whose
    transaction epoch is lower, and "an epoch the log never registered is
    aborted" -- a decision the reader then caches for good.

    1. T: init (entry 0), begin, send rows(1) to t/0 (entry 1 ONGOING, data at 0).
    2. Reader R takes t/0's LSO; its one LIST of T's coordinator log misses
       entry 1. R reads [0, LSO).
    3. T commits (marker at 1).
    4. R reads on from its LSO; R reads [0, 1) again.

    Expected: in 2 the LSO is 0 (T is undecided); R ends up having read [1];
    re-reading [0, 1) gives [1]. Observed: the LSO is 1, past the undecided
    transaction; R read [] in 2 and nothing in 4, so it never sees rows(1);
    re-reading [0, 1) still gives [] (ABORTED cached; a fresh reader sees [1]).
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    t = arrowlog.connect(store).producer(transactional_id="tx")
    t.init_transactions()
    t.begin_transaction()
    t.send("t", rows(1), partition=0)
    scripted.hide(entry_key("tx", 1), times=1)
    reader_log = arrowlog.connect(scripted)
    reader = reader_log.consumer()
    lso = reader_log.stable_offsets("t")[0]
    read = visible(reader, start=0) if lso > 0 else []
    t.commit_transaction()
    assert visible(arrowlog.connect(store).consumer()) == [1]
    read += visible(reader, start=lso)
    again = reader.read("t", 0, start=0, end=1).column("v").to_pylist()
    assert (lso, read, again) == (0, [1], [1])


def test_a_checkpoint_after_a_stale_coordinator_listing_lets_every_lso_pass_an_open_txn(
    store: Store, scripted: ScriptedStore
) -> None:
    """The stale-listing decision above, baked into a checkpoint for everyone.

    1. Topic t with checkpoint_interval 2.
    2. T: init, begin, send rows(1) to t/0 (offset 0): undecided.
    3. W (plain appends) appends rows(5) at offset 1: the window [0, 2) is
       complete and W writes its checkpoint, dropping the transactions its
       resolver says are decided; its LIST of T's coordinator log misses the
       newest entry, so T counts as ABORTED and leaves the checkpoint's open set.
    4. A fresh reader F opens from that checkpoint: its LSO is 2 and it reads
       [0, 2) = [5]; it continues from 2.
    5. T commits (marker at 2). F reads from 2.

    Expected: F's LSO stays at 0 until T is decided; in the end F has read
    [1, 5]. Observed: F's LSO passed T, and F, reading on from its LSO, never
    sees rows(1).
    """
    arrowlog.connect(store).create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    t = arrowlog.connect(store).producer(transactional_id="tx")
    t.init_transactions()
    t.begin_transaction()
    t.send("t", rows(1), partition=0)
    scripted.hide(entry_key("tx", 1), times=1)
    arrowlog.connect(scripted).append("t", rows(5), partition=0)
    f = arrowlog.connect(store)
    lso = f.stable_offsets("t")[0]
    read = visible(f.consumer(), start=0) if lso > 0 else []
    t.commit_transaction()
    read += visible(f.consumer(), start=lso)
    assert (lso, sorted(read)) == (0, [1, 5]), (
        f"LSO was {lso} while T was open; the reader read {read} in all"
    )


def test_a_listing_that_misses_a_window_checkpoint_makes_a_read_raise(
    store: Store, scripted: ScriptedStore
) -> None:
    """Finding the checkpoint that covers an old offset trusts one LIST.

    1. Topic t, checkpoint_interval 2; six plain appends (offsets 0..5):
       checkpoints for the windows at 0, 2 and 4.
    2. A fresh reader reads offsets [3, 5). The window at 4 does not cover 3,
       so it LISTs for the checkpoint with the greatest start <= 3; the listing
       misses the one at 2 and returns the one at 0.

    Expected: [3, 4] (a missed key is "not visible yet", never an error; the
    window can be rebuilt from segment headers, as for a corrupt checkpoint).
    Observed: CorruptCheckpointError("checkpoint does not cover offset 3").
    """
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    for i in range(6):
        log.append("t", rows(i), partition=0)
    assert [i.key for i in store.list("t/0/checkpoints/")] == [
        checkpoint_key("t", 0, s) for s in (4, 2, 0)
    ]
    scripted.hide(checkpoint_key("t", 0, 2), times=FOREVER)
    reader = arrowlog.connect(scripted)
    assert reader.read("t", 0, start=3, end=5).column("v").to_pylist() == [3, 4]


# --- 8. bad input -------------------------------------------------------------------


def test_nulls_in_a_non_nullable_column_are_written() -> None:
    """A batch with the topic's exact schema (v: int64 not null) but a null in
    v. Expected: a typed ArrowLogError and nothing written. Observed: appended;
    readers get a null from a non-nullable column."""
    schema = pa.schema([pa.field("v", pa.int64(), nullable=False)])
    inner = MemoryStore()
    log = arrowlog.connect(inner)
    log.create_topic("t", schema)
    batch = pa.RecordBatch.from_arrays([pa.array([1, None], pa.int64())], schema=schema)
    with pytest.raises(ArrowLogError):
        log.append("t", batch, partition=0)
    assert log.end_offsets("t") == {0: 0}


@pytest.mark.parametrize("bad", ["oversize", "negative-expected-offset", "bool-expected-offset"])
@pytest.mark.parametrize("kind", ["idempotent", "transactional"])
def test_a_refused_send_writes_nothing(kind: str, bad: str) -> None:
    """A send that gets a typed error for bad input must write nothing.

    A fresh idempotent producer claims its producer id (a PUT) before the
    batch is checked against max_batch_bytes or the expected offset; a
    transactional producer registers the partition with its transaction (an
    ONGOING coordinator entry, starting the transaction's timeout) before
    that check. Expected: 0 PUTs. Observed: 1.
    """
    inner = MemoryStore()
    setup = arrowlog.connect(inner)
    setup.create_topic("t", SCHEMA, config=TopicConfig(max_batch_bytes=2048))
    counting = CountingStore(inner)
    log = arrowlog.connect(counting)
    if kind == "idempotent":
        p = log.producer()
    else:
        p = log.producer(transactional_id="tx")
        p.init_transactions()
        p.begin_transaction()
    batch, expected = rows(1), None
    if bad == "oversize":
        batch = rows(*range(10_000))
    elif bad == "negative-expected-offset":
        expected = -1
    else:
        expected = True
    log.topic("t")
    counting.reset()
    with pytest.raises(ArrowLogError):
        p.send("t", batch, partition=0, expected_offset=expected)
    assert counting.counts["put_if_absent"] == 0


# --- 1. an idempotent batch acknowledged but not in the log -------------------------


def test_a_resumed_instance_sending_sequence_zero_swallows_the_originals_acknowledged_batch(
    store: Store, scripted: ScriptedStore
) -> None:
    """Duplicate detection by (producer id, epoch, sequence) takes a different
    batch for our own when two instances share a producer id and epoch.

    1. A: init, begin, send rows(1) to t/0: the partition is registered, and
       the segment PUT at offset 0 is held.
    2. B resumes A's transaction (same producer id and epoch) and sends rows(2)
       to t/0: its first batch there, sequence 0, lands at offset 0.
    3. A's PUT is released: the key is taken; A reads the tail, finds a batch
       of its producer id, epoch and sequence 0 with one record, and takes it
       for its own: send returns base_offset 0.
    4. B commits.

    Expected: A's acknowledged rows(1) is in the log (at 1), or A's send fails.
    Observed: A got an acknowledgement for offset 0, which holds B's rows(2);
    rows(1) is nowhere in the log.

    Fixed: a resumed transaction can only be committed or aborted; B's send is
    refused (two instances never write batches of one producer id and epoch).
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    a = arrowlog.connect(scripted).producer(transactional_id="job")
    a.init_transactions()
    a.begin_transaction()
    a.add_partitions([("t", 0)])  # resumable: the partition is registered
    gate = scripted.hold("put_if_absent", segment_key("t", 0, 0))
    send = Background(lambda: a.send("t", rows(1), partition=0))
    gate.wait_reached()
    b = arrowlog.connect(store).producer(transactional_id="job")
    b.resume_transaction(a.epoch)
    with pytest.raises(arrowlog.InvalidTxnStateError, match="resumed"):
        b.send("t", rows(2), partition=0)
    gate.release()
    acked = send.result()
    b.commit_transaction()
    log = arrowlog.connect(store)
    assert sorted(everything(log)) == [1], f"A was acknowledged {acked}"
    assert visible(log.consumer()) == [1]


def test_an_in_doubt_expected_offset_send_is_resent_without_its_expected_offset(
    store: Store, scripted: ScriptedStore
) -> None:
    """An expected-offset append (KIP-27) lands somewhere else.

    1. Idempotent producer P: send(rows(1), expected_offset=0). Its PUT at 0
       times out on the client but is not applied yet (a late PUT); the
       read-back finds nothing, every retry gets 503 until the deadline:
       AppendOutcomeUnknownError(offset=0).
    2. Another writer W appends rows(9): it lands at 0. P's late PUT can never
       land now.
    3. P.flush() settles the batch in doubt: it resends it *without* its
       expected offset, so it lands at the log end, 1.

    Expected: rows(1) lands exactly at 0 or not at all (an
    OffsetMismatchError). Observed: flush puts it at offset 1.
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    scripted.throttle("put_if_absent", seg0, nth=2, times=FOREVER)
    with pytest.raises(arrowlog.AppendOutcomeUnknownError):
        p.send("t", rows(1), partition=0, expected_offset=0)
    assert late.reached.is_set()
    arrowlog.connect(store).append("t", rows(9), partition=0)
    assert not late.land()  # the key is taken: it can never land now
    with contextlib.suppress(ArrowLogError):
        p.flush()
    assert everything(arrowlog.connect(store)) == [9], "rows(1) landed away from offset 0"
