"""Schedules against consumer offsets committed in transactions (a group's
position, pending marks, resumed commits), the expiry of ids whose registration
failed, micro-batch and read ends a listing cannot see, bulk-load reruns and
lost replies on coordinator entries. Each test asserts the guarantee; each
docstring gives the schedule step by step, what is expected and what happened.

Origin: round 2 of the adversarial review of issue 7's fixes (was tests/attack/test_round2.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

import arrowlog
from arrowlog.errors import ArrowLogError
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from tests.support.schedules import FAST, FOREVER, SCHEMA, Background, everything, rows, visible


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def _pipeline_topics(store: Store) -> None:
    setup = arrowlog.connect(store)
    setup.create_topic("in", SCHEMA)
    setup.create_topic("t", SCHEMA)


def _commit_then_die_before_offsets(
    scripted: ScriptedStore, tid: str, value: int, offset: int
) -> None:
    """A copier of ``tid`` commits rows(value) to t/0 with offsets {in/0: offset}
    for group g; PREPARE_COMMIT and the marker land, every group-log PUT fails
    from then on (the process dies before applying its offsets)."""
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id=tid)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(value), partition=0)
    p.send_offsets_to_transaction({("in", 0): offset}, group_id="g")
    dead = scripted.fail("put_if_absent", "_arrowlog/groups/*", times=FOREVER, maybe_applied=False)
    p.commit_transaction()  # returns at PREPARE_COMMIT
    with pytest.raises(ArrowLogError):
        p.flush()  # applying the offsets behind it failed
    dead.stop()


# --- consumer group offsets -----------------------------------------------------------


def test_a_group_position_moves_back_when_an_older_committed_transaction_is_applied_late(
    store: Store, scripted: ScriptedStore
) -> None:
    """Two transactional ids commit offsets for the same input partition, one
    after the other; the older one's offsets, applied late, win over the newer.

    1. Copier "a" consumes in/0 [0, 5): begin, send rows(1) to t/0,
       send_offsets({in/0: 5}, g), commit: PREPARE_COMMIT lands (decided: the
       record is visible, committed(in/0) == 5 through the pending mark), then
       the process dies before the group-log update.
    2. The partition is reassigned to copier "b" (another transactional id, as
       with KIP-447 per-producer ids): committed(in/0) == 5, so b consumes
       [5, 10): begin, send rows(2), send_offsets({in/0: 10}, g), commit: all of
       it lands; the group log now says in/0 = 10.
    3. A consumer asks committed(in/0); later "a" is recovered (init) and rolls
       its commit forward, applying {in/0: 5}.

    Expected: the position never goes back: 10 after step 2 and after step 3
    (Kafka orders offset commits by their place in the offsets log: b's commit
    came after a's, so a's marker does not overwrite it). Observed: 5 (the
    pending mark of "a" is applied over b's newer offsets on every read, and
    recovery writes 5 for good): input [5, 10) is processed twice, and rows(2)
    would be produced again.
    """
    _pipeline_topics(store)
    _commit_then_die_before_offsets(scripted, "a", 1, 5)
    reader = arrowlog.connect(store).consumer(group_id="g")
    assert visible(reader) == [1]
    assert reader.committed("in", 0) == 5
    b = arrowlog.connect(store).producer(transactional_id="b")
    b.init_transactions()
    with b.transaction():
        b.send("t", rows(2), partition=0)
        b.send_offsets_to_transaction({("in", 0): 10}, group_id="g")
    assert visible(reader) == [1, 2]
    seen_before_recovery = reader.committed("in", 0)
    arrowlog.connect(store).producer(transactional_id="a").init_transactions()
    seen_after_recovery = reader.committed("in", 0)
    assert (seen_before_recovery, seen_after_recovery) == (10, 10)


def test_a_plain_commit_after_a_decided_transaction_is_undone_by_its_late_offsets(
    store: Store, scripted: ScriptedStore
) -> None:
    """A plain Consumer.commit made after a transaction's PREPARE_COMMIT is
    overwritten when that transaction's offsets are applied later.

    1. Copier "a": rows(1) to t/0 with {in/0: 5} for group g; PREPARE_COMMIT
       lands, the process dies before the group-log update (committed == 5).
    2. The group moves on outside transactions (e.g. a non-transactional
       consumer of the group processed [5, 10) and commits): Consumer.commit
       ({in/0: 10}) succeeds.
    3. committed(in/0)? then "a" is recovered (init) and applies {in/0: 5}.

    Expected: 10 both times (the later commit wins, as in Kafka where the
    commit record appended after the transactional one is the newer).
    Observed: 5 both times: the acknowledged plain commit is lost.
    """
    _pipeline_topics(store)
    _commit_then_die_before_offsets(scripted, "a", 1, 5)
    reader = arrowlog.connect(store).consumer(group_id="g")
    assert reader.committed("in", 0) == 5
    reader.commit({("in", 0): 10})
    seen_before_recovery = reader.committed("in", 0)
    arrowlog.connect(store).producer(transactional_id="a").init_transactions()
    seen_after_recovery = reader.committed("in", 0)
    assert (seen_before_recovery, seen_after_recovery) == (10, 10)


def test_a_commit_after_a_failed_pending_mark_makes_visible_records_without_their_offsets(
    store: Store, scripted: ScriptedStore
) -> None:
    """commit_transaction is allowed after send_offsets_to_transaction failed
    to mark the group pending, so the offsets are not decided with the records.

    1. P: init, begin, send rows(1) to t/0.
    2. P: send_offsets_to_transaction({in/0: 1}, g): the coordinator entry
       naming the offsets lands; every PUT to the group log gets 503 until the
       deadline: ConcurrentTransactionsError. (Not retried: the closed hole of
       round 1 retried it.)
    3. P: commit_transaction (the store is fine again, except the group log,
       which is still unreachable: the process dies there): PREPARE_COMMIT with
       the offsets and the marker land; the offsets update fails.

    Expected: either commit_transaction is refused after the failed
    send_offsets (Kafka puts the producer in an abortable state), or
    committed(in/0) == 1 once rows(1) is visible (offsets decided with the
    records). Observed: rows(1) is visible and committed(in/0) is None: a
    consumer taking over reprocesses in/0 [0, 1) and produces rows(1) again.
    """
    _pipeline_topics(store)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="copier")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    refusing = scripted.throttle("put_if_absent", "_arrowlog/groups/g/*", times=FOREVER)
    with pytest.raises(arrowlog.ConcurrentTransactionsError):
        p.send_offsets_to_transaction({("in", 0): 1}, group_id="g")
    refused = False
    try:
        p.commit_transaction()
    except arrowlog.InvalidTxnStateError:
        refused = True
    except ArrowLogError:
        pass  # PREPARE_COMMIT landed, the group update failed: the "crash"
    refusing.stop()
    reader = arrowlog.connect(store).consumer(group_id="g")
    seen = visible(reader)
    # Fixed: the commit marks every group pending before its point of no return;
    # while the group log is unreachable it fails there, committing nothing.
    assert seen in ([], [1])
    if seen == [1]:
        assert reader.committed("in", 0) == 1, "records visible, offsets not counted"
    assert refused or seen == [] or reader.committed("in", 0) == 1


def test_a_resumed_commit_makes_visible_records_whose_offsets_were_never_marked_pending(
    store: Store, scripted: ScriptedStore
) -> None:
    """A process dies between the coordinator entry naming its offsets and the
    group's pending mark; another process resumes the transaction and commits
    it, and cannot know the mark is missing.

    1. A: init, begin, send rows(1) to t/0, send_offsets_to_transaction
       ({in/0: 1}, g): the ONGOING entry with the offsets lands; A dies before
       the pending-mark PUT (scripted: the group log is unreachable for A).
    2. B (same transactional id, another process): resume_transaction(A's
       epoch), commit_transaction: PREPARE_COMMIT (with A's offsets) and the
       marker land; B dies before the group-log update.

    Expected: records and offsets are decided together: rows(1) is visible, so
    committed(in/0) == 1 (or the commit is refused). Observed: rows(1) is
    visible and committed(in/0) is None until some instance of the id is
    recovered: a consumer taking over the group in between reprocesses in/0
    [0, 1) and produces rows(1) again.
    """
    _pipeline_topics(store)
    a = arrowlog.connect(scripted, config=FAST).producer(transactional_id="job")
    a.init_transactions()
    a.begin_transaction()
    a.add_partitions([("t", 0)])  # resumable: the partition is registered
    a.send("t", rows(1), partition=0)
    dead = scripted.fail("put_if_absent", "_arrowlog/groups/*", times=FOREVER, maybe_applied=False)
    with pytest.raises(ArrowLogError):
        a.send_offsets_to_transaction({("in", 0): 1}, group_id="g")  # A dies here
    b = arrowlog.connect(scripted, config=FAST).producer(transactional_id="job")
    b.resume_transaction(a.epoch)
    refused = False
    try:
        b.commit_transaction()
    except arrowlog.InvalidTxnStateError:
        refused = True
    except ArrowLogError:
        pass  # PREPARE_COMMIT and the marker landed; B dies at the group log
    dead.stop()
    reader = arrowlog.connect(store).consumer(group_id="g")
    # Fixed: B marks every group pending before its point of no return; with the
    # group log unreachable, its commit fails before it, committing nothing.
    seen = visible(reader)
    assert seen in ([], [1])
    if refused or seen == [1]:
        assert seen == [] if refused else reader.committed("in", 0) == 1


# --- expiry ------------------------------------------------------------------------------


def test_a_transactional_id_whose_registration_failed_is_never_expired(
    store: Store, scripted: ScriptedStore
) -> None:
    """An id's first coordinator entry lands but its registration under
    _arrowlog/transactional-ids/ does not (the process dies between the two
    PUTs, or the registration PUT keeps failing); no later entry registers it,
    and expiry only looks at registered ids.

    1. P1: init_transactions: entry 0 lands; the PUT of
       transactional-ids/copier fails until the deadline (the "crash").
    2. P2 (same id, a restart): init_transactions succeeds (entry 1), begin,
       send rows(1) to t/0; P2 dies with the transaction ONGOING.
    3. Long after the timeout, expire_transactions(now_ms=far in the future).

    Expected (invariant 6): the abandoned transaction is aborted by expiry; the
    LSO of t/0 moves past rows(1). Observed: expire_transactions returns []
    and the LSO of t/0 stays at 0 until some instance of "copier" initialises
    again (list_transactions and metrics do not show it either).
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p1 = arrowlog.connect(scripted, config=FAST).producer(transactional_id="copier")
    dead = scripted.fail(
        "put_if_absent", "_arrowlog/transactional-ids/*", times=FOREVER, maybe_applied=False
    )
    with pytest.raises(ArrowLogError):
        p1.init_transactions()
    dead.stop()
    p2 = arrowlog.connect(store).producer(transactional_id="copier", transaction_timeout_ms=1000)
    p2.init_transactions()
    p2.begin_transaction()
    p2.send("t", rows(1), partition=0)
    log = arrowlog.connect(store)
    assert log.stable_offsets("t") == {0: 0}
    expired = log.admin.expire_transactions(now_ms=int(time.time() * 1000) + 86_400_000)
    assert [e.transactional_id for e in expired] == ["copier"]
    assert log.stable_offsets("t") == log.end_offsets("t")  # past rows(1) and its marker


# --- streaming micro-batch ends ----------------------------------------------------------


def test_a_streaming_micro_batch_shows_half_a_transaction_committed_between_its_views(
    store: Store, scripted: ScriptedStore
) -> None:
    """The streaming source's latestOffset takes one view per partition, one
    after another (a one-round snapshot: the schedule of hole 3), and
    plan_scan keeps numeric ends whole, so a micro-batch is torn.

    1. A streaming reader of t (partitions 0 and 1), at start {t/0: 0, t/1: 0},
       asks latestOffset: it fixes its view of t/0 (empty: LSO 0); its first
       request for t/1 is held.
    2. P: init, begin, send rows(1) to t/0 and rows(2) to t/1, commit (whole).
    3. The held request goes on: t/1's view shows P's record, committed: LSO 1.
       The micro-batch is [0, 0) on t/0 and [0, 1) on t/1.
    4. The micro-batch is planned (plan_scan with those numeric ends) and read;
       then the next micro-batch.

    Expected (invariant 4): a read_committed micro-batch shows all of P's
    transaction or none of it. Observed: micro-batch 1 holds rows(2) alone,
    micro-batch 2 rows(1) alone.
    """
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from arrowlog.read.scan import output_schema, read_task
    from arrowlog.spark.options import ReadOptions
    from arrowlog.spark.streaming import ArrowLogStreamReader

    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    options = ReadOptions(
        root=store.url, storage={}, topics=("t",), starting="earliest", ending="latest",
        starting_timestamp=None, ending_timestamp=None, isolation_level="read_committed",
        fail_on_data_loss=True, target_bytes=1 << 20,
    )  # fmt: skip
    reader = ArrowLogStreamReader(options, None)  # type: ignore[arg-type]
    reader._log = lambda: arrowlog.connect(scripted)  # type: ignore[method-assign]

    def micro_batch(start: dict[str, int], end: dict[str, int]) -> list[int]:
        out: list[int] = []
        for part in reader.partitions(start, end):
            for batch in read_task(store, part.task, output_schema(SCHEMA)):  # type: ignore[attr-defined]
                out += [v for v in batch.column(0).to_pylist() if isinstance(v, int)]
        return sorted(out)

    start = {"t/0": 0, "t/1": 0}
    gate = scripted.hold("list", lambda key: key.startswith("t/1/"))
    asking = Background(lambda: reader.latestOffset(start, ReadAllAvailable()))
    gate.wait_reached()
    p = arrowlog.connect(store).producer(transactional_id="writer")
    p.init_transactions()
    with p.transaction():
        p.send("t", rows(1), partition=0)
        p.send("t", rows(2), partition=1)
    gate.release()
    end = asking.result()
    first = micro_batch(start, end)  # type: ignore[arg-type]
    second_end = reader.latestOffset(end, ReadAllAvailable())  # type: ignore[arg-type]
    second = micro_batch(end, second_end)  # type: ignore[arg-type]
    assert sorted(first + second) == [1, 2]
    assert first in ([], [1, 2]), f"micro-batches {first} then {second}: a torn transaction"


# --- a listing is not a snapshot: explicit ends ------------------------------------------


def _two_committed_records(store: Store) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(store).producer(transactional_id="writer")
    p.init_transactions()
    with p.transaction():
        p.send("t", rows(1), partition=0)
        p.send("t", rows(2), partition=0)
    p.close()  # the marker is written


def test_a_micro_batch_with_a_known_end_raises_when_a_listing_misses_a_segment(
    store: Store, scripted: ScriptedStore
) -> None:
    """plan_scan checks a numeric end against a listing-based view, so one LIST
    racing (or lagging) appends makes a valid micro-batch fail.

    1. P commits rows(1), rows(2) to t/0 (data at 0 and 1, marker at 2): the
       LSO is 3; a streaming query's latestOffset says {t/0: 3}.
    2. The micro-batch is planned: plan_scan(starting {t/0: 0}, ending
       {t/0: 3}); the one LIST of t/0's segments it makes first does not show
       segment 1 (a listing is not a snapshot).

    Expected (the listing rule: a gap is "not visible yet", never an error; an
    end known to exist is followed by key, as expected offsets are): the plan
    covers [0, 3) and reads [1, 2). Observed: OffsetOutOfRangeError "ending
    offset 3 is past the latest offset 1": the streaming query fails.
    """
    from arrowlog.read.scan import plan_scan

    _two_committed_records(store)
    assert arrowlog.connect(store).stable_offsets("t") == {0: 3}
    scripted.hide("t/0/segments/*00001.arrow")
    plan = plan_scan(
        arrowlog.connect(scripted), ["t"], starting={("t", 0): 0}, ending={("t", 0): 3}
    )
    assert [(r.start, r.end) for r in plan.ranges] == [(0, 3)]
    assert sum(task.rows for task in plan.tasks) == 2


def test_a_read_to_a_known_end_raises_when_a_listing_misses_a_segment(
    store: Store, scripted: ScriptedStore
) -> None:
    """The same through Consumer.read: a reader continuing to an end that
    another read returned (read_snapshot(...).ends) fails on one listing gap.

    1. P commits rows(1), rows(2) to t/0; read_snapshot returns ends {t/0: 3}.
    2. Another consumer reads t/0 [0, 3); its LIST misses segment 1.

    Expected: [1, 2]. Observed: OffsetOutOfRangeError.
    """
    _two_committed_records(store)
    snap = arrowlog.connect(store).consumer().read_snapshot({("t", 0): (0, None)})
    assert snap.ends == {("t", 0): 3}
    scripted.hide("t/0/segments/*00001.arrow")
    table = arrowlog.connect(scripted).consumer().read("t", 0, start=0, end=3)
    assert table.column("v").to_pylist() == [1, 2]


# --- schedules that held (regression tests; they pass) -----------------------------------


def test_held_a_prepare_commit_whose_reply_was_lost_keeps_later_sends_out(
    store: Store, scripted: ScriptedStore
) -> None:
    """PREPARE_COMMIT in doubt, then more sends, then a retried commit.

    1. P: init, begin, send rows(1) to t/0 (offset 0).
    2. P: commit_transaction: the PREPARE_COMMIT PUT times out on the client
       (deferred), every read-back and retry fails until the deadline: commit
       raises before P knows it is ENDING (still IN_TRANSACTION).
    3. The deferred PREPARE_COMMIT lands (bound t/0 = 1): rows(1) is visible.
    4. P sends rows(2) (accepted, offset 1) and retries commit_transaction.

    Held: the retry's PREPARE_COMMIT loses to the landed one; rows(2), past the
    bound, is never visible; P is fenced (the error is misleading: P's own
    entry "fenced" it, but no guarantee breaks).
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    late = scripted.late_put("_arrowlog/coordinator/tx/*")
    down = scripted.fail("get", "_arrowlog/coordinator/tx/*", times=FOREVER)
    with pytest.raises(ArrowLogError):
        p.commit_transaction()
    down.stop()
    assert late.land()
    reader = arrowlog.connect(store).consumer()
    assert visible(reader) == [1]
    with contextlib.suppress(ArrowLogError):
        p.send("t", rows(2), partition=0)
    with contextlib.suppress(ArrowLogError):
        p.commit_transaction()
    arrowlog.connect(store).producer(transactional_id="tx").init_transactions()
    assert visible(arrowlog.connect(store).consumer()) == [1]


def test_held_spark_members_failed_attempts_and_late_puts_stay_out(
    store: Store, scripted: ScriptedStore
) -> None:
    """Spark-style members: the driver begins, task attempts write with their
    own producer ids, the driver resumes and commits naming the good attempts.

    1. Driver: init, begin, add t/0. Task attempt 1 (pid M1) writes rows(1)
       and fails. Attempt 2 (pid M2) writes rows(2); its second batch rows(3)
       times out on the client, deferred, its outcome unknown: the attempt
       fails. Attempt 3 (pid M3) writes rows(4) and succeeds.
    2. The driver (resumed) commits with members = [M3].
       (M2's deferred PUT of rows(3) lands before attempt 3 writes: a key is
       an offset, so a late PUT lands only where the log still ends.)

    Held: visible == [4]; the LSO reaches the high watermark.
    """
    from arrowlog.format.segment import WriterIdentity
    from arrowlog.producer import allocate_producer_id

    arrowlog.connect(store).create_topic("t", SCHEMA)
    driver = arrowlog.connect(store).producer(transactional_id="spark.job")
    driver.init_transactions()
    driver.begin_transaction()
    driver.add_partitions([("t", 0)])
    epoch = driver.epoch

    def task(log: arrowlog.ArrowLog, *values: int) -> int:
        pid = allocate_producer_id(log, "spark.job")
        for seq, v in enumerate(values):
            who = WriterIdentity(producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                                 transactional=True, transactional_id="spark.job")  # fmt: skip
            log.partition("t", 0).append(rows(v), identity=who)
        return pid

    task(arrowlog.connect(store), 1)  # attempt 1: fails after writing
    late = scripted.late_put("t/0/segments/*", nth=2)
    scripted.fail("get_range", "t/0/segments/*", nth=2, times=FOREVER)
    with pytest.raises(ArrowLogError):
        task(arrowlog.connect(scripted, config=FAST), 2, 3)  # attempt 2: in doubt, fails
    assert late.land()  # M2's rows(3) lands after its attempt gave up
    m3 = task(arrowlog.connect(store), 4)
    committer = arrowlog.connect(store).producer(transactional_id="spark.job")
    committer.resume_transaction(epoch)
    committer.commit_transaction(members=[m3])
    log = arrowlog.connect(store)
    assert visible(log.consumer()) == [4]
    committer.flush()  # the marker follows in the background: it lands before the ends are compared
    assert log.stable_offsets("t") == log.end_offsets("t")


# --- bulk loading --------------------------------------------------------------------------


def test_a_rerun_bulk_load_fails_when_its_listing_misses_the_last_chunk(
    store: Store, scripted: ScriptedStore
) -> None:
    """A restarted load asks where the log ends with a listing, not a complete
    end, so one listing gap makes it fail as if another writer had appended.

    1. Run 1 loads rows 0..5 in chunks of 2 (segments 0, 2, 4) and is killed
       after writing segment 2 (rows 2, 3).
    2. Run 2 (the same input, start_offset 0): its LIST of t/0 does not show
       segment 2 (a listing is not a snapshot); it resumes at 2.

    Expected: run 2 resumes where the log really ends (4) and the partition
    holds 0..5 once ("a crashed or restarted loader resumes where the log
    really ends"; a gap is never an error). Observed: OffsetMismatchError
    "another writer appended to t/0 during the load": no other writer exists;
    the load stops (a further rerun is needed).
    """
    from arrowlog.producer.bulkload import bulk_load

    arrowlog.connect(store).create_topic("t", SCHEMA)
    data = [rows(0, 1, 2, 3, 4, 5)]
    first = arrowlog.connect(store).partition("t", 0)
    bulk_load(first, [rows(0, 1, 2, 3)], start_offset=0, rows_per_batch=2)  # killed here
    scripted.hide("t/0/segments/*00002.arrow")
    again = arrowlog.connect(scripted).partition("t", 0)
    result = bulk_load(again, data, start_offset=0, rows_per_batch=2)
    assert result.end_offset == 6
    assert everything(arrowlog.connect(store)) == [0, 1, 2, 3, 4, 5]


# --- lost replies on coordinator entries -------------------------------------------------


def test_a_retried_send_after_an_in_doubt_registration_is_fenced_by_its_own_entry(
    store: Store, scripted: ScriptedStore
) -> None:
    """CoordinatorLog.write can recognise an earlier attempt's late landing by
    its write id, but the producer never passes one: a retry of a call whose
    entry landed unseen meets its own entry and calls itself fenced.

    1. P: init, begin, add_partitions([t/0]): the ONGOING entry registering
       t/0 times out on the client (deferred); every read-back fails until the
       deadline: add_partitions raises (retriable).
    2. The deferred entry lands.
    3. P retries add_partitions, sends rows(1) to t/0.

    Expected: the retry recognises its own registration (or re-registers) and
    the send succeeds; P commits; readers see [1]. Observed:
    ProducerFencedError "a newer instance has epoch 0": no other instance
    exists; P is unusable, its transaction hangs until expiry or a restart.
    (No record is lost or duplicated: a liveness hole and a false error.)
    """
    arrowlog.connect(store).create_topic("t", SCHEMA)
    p = arrowlog.connect(scripted, config=FAST).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    late = scripted.late_put("_arrowlog/coordinator/tx/*")
    down = scripted.fail("get", "_arrowlog/coordinator/tx/*", times=FOREVER)
    with pytest.raises(ArrowLogError):
        p.add_partitions([("t", 0)])
    down.stop()
    assert late.land()
    p.add_partitions([("t", 0)])
    p.send("t", rows(1), partition=0)
    p.commit_transaction()
    assert visible(arrowlog.connect(store).consumer()) == [1]
