"""Transactions on every backend: atomic commit and abort across partitions and
topics, read_committed and the LSO, consumer offsets, fencing, expiry, the state
machine's errors, and the request cost of a commit."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import arrowlog
import arrowlog.format.checkpoint
import arrowlog.txn.groups
from arrowlog import ArrowLog, TopicConfig, TxnState
from arrowlog.format.topic import segment_key
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from arrowlog.txn.coordinator import is_transition_valid
from arrowlog.txn.resolver import Outcome
from tests.support.clocks import ClockStore
from tests.support.schedules import FAST, Background
from tests.support.staged import STAGED
from tests.support.stores import shared_store_spec_on_clouds_too, store_spec_on_clouds_too  # noqa: F401  (fixtures: these schedules run on the clouds' emulators too)

SCHEMA = pa.schema([("v", pa.int64())])


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values)}, schema=SCHEMA)


@pytest.fixture
def log(make_log: Callable[..., ArrowLog]) -> ArrowLog:
    log = make_log()
    log.create_topic("a", SCHEMA, partitions=3)
    log.create_topic("b", SCHEMA, partitions=1)
    return log


def committed(log: ArrowLog, topic: str, partition: int) -> list[int]:
    values: list[int] = log.consumer().read(topic, partition).column("v").to_pylist()  # type: ignore[assignment]
    return values


def test_commit_makes_every_partition_visible_at_once(log: ArrowLog) -> None:
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("a", rows(1, 2), partition=0)
    p.send("a", rows(3), partition=2)
    p.send("b", rows(4), partition=0)
    everything = log.consumer(isolation_level="read_uncommitted")
    assert everything.read("a", 0)["v"].to_pylist() == [1, 2]
    assert committed(log, "a", 0) == [] and committed(log, "b", 0) == []
    assert log.stable_offsets("a") == {0: 0, 1: 0, 2: 0}
    assert log.end_offsets("a") == {0: 2, 1: 0, 2: 1}
    p.commit_transaction()
    assert committed(log, "a", 0) == [1, 2] and committed(log, "a", 2) == [3]
    assert committed(log, "b", 0) == [4]
    # visible from PREPARE_COMMIT on, before any marker: the LSO too (read after
    # the high watermark, as the markers may land in between)
    end = log.end_offsets("a")
    assert all(lso >= end[part] for part, lso in log.stable_offsets("a").items())
    p.flush()  # the markers follow in the background
    # the markers took one offset each, and are never returned as data
    assert log.end_offsets("a") == {0: 3, 1: 0, 2: 2}
    assert log.stable_offsets("a") == log.end_offsets("a")
    assert everything.read("a", 0)["v"].to_pylist() == [1, 2]


def test_abort_hides_everything_and_releases_the_lso(log: ArrowLog) -> None:
    plain = log.producer()
    plain.send("a", rows(0), partition=0)
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("a", rows(1), partition=0)
    plain.send("a", rows(2), partition=0)  # non-transactional, after the open transaction
    assert log.stable_offsets("a")[0] == 1
    assert committed(log, "a", 0) == [0]
    with pytest.raises(arrowlog.OffsetOutOfRangeError, match="last stable offset"):
        log.consumer().read("a", 0, 0, 3)
    p.abort_transaction()
    assert committed(log, "a", 0) == [0, 2]
    # released at PREPARE_ABORT, before its marker lands: the LSO reaches the
    # high watermark read before it (read the other way round, the marker may
    # land between the two reads: see the marker schedule below)
    end = log.end_offsets("a")[0]
    assert log.stable_offsets("a")[0] >= end
    p.flush()
    assert log.stable_offsets("a")[0] == log.end_offsets("a")[0] == 4


def test_the_context_manager_commits_or_aborts(log: ArrowLog) -> None:
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    with p.transaction():
        p.send("a", rows(1), partition=1)
    with pytest.raises(ZeroDivisionError), p.transaction():
        p.send("a", rows(2), partition=1)
        raise ZeroDivisionError
    with p.transaction():
        p.send("a", rows(3), partition=1)
    assert committed(log, "a", 1) == [1, 3]
    assert p.state is arrowlog.ProducerState.READY


def test_consumer_offsets_become_visible_only_on_commit(log: ArrowLog) -> None:
    group = log.consumer(group_id="etl")
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction({("a", 0): 5, ("a", 1): 7}, group_id="etl")
    with pytest.raises(arrowlog.UnstableOffsetCommitError):
        group.committed("a", 0)  # undecided: neither the old nor the new position
    assert group.committed("a", 2) is None
    p.abort_transaction()
    assert group.committed("a", 0) is None
    p.begin_transaction()
    p.send_offsets_to_transaction({("a", 0): 6}, group_id="etl")
    p.commit_transaction()
    assert group.committed("a", 0) == 6 and group.committed("a", 1) is None
    group.commit({("a", 1): 2})
    assert group.committed("a", 1) == 2 and group.committed("a", 0) == 6


# --- offsets name the incarnation of the topic they were read in ------------------

#: no wait before a deleted name is created again; every client reads the topic
#: anew at each lookup (as all do once metadata_max_age_ms has passed)
NOW = arrowlog.LogConfig(metadata_max_age_ms=0)


@pytest.fixture
def pipeline(make_log: Callable[..., ArrowLog]) -> tuple[ArrowLog, ArrowLog]:
    """(the admin's client, the pipeline's client): topics ``in`` (five
    records) and ``out``."""
    admin = make_log(config=NOW)
    admin.create_topic("in", SCHEMA, partitions=2)
    admin.create_topic("out", SCHEMA)
    admin.append("in", rows(0, 1, 2, 3, 4), partition=0)
    return admin, make_log(config=NOW)


def recreate_input(admin: ArrowLog, *values: int) -> int:
    admin.delete_topic("in")
    incarnation = admin.create_topic("in", SCHEMA, partitions=2).incarnation
    admin.append("in", rows(*values), partition=0)
    return incarnation


def written(store: Store, *prefixes: str) -> list[str]:
    return sorted(o.key for p in prefixes for o in store.list(p))


def test_offsets_sent_with_the_consumers_metadata_commit_as_before(
    pipeline: tuple[ArrowLog, ArrowLog], store: Store
) -> None:
    """No re-creation: the consumer's group_metadata() in place of the group
    id commits the same offsets, with the same requests."""
    _, client = pipeline
    counts = []
    for n, group_id in enumerate(["by-id", "by-metadata"]):
        consumer = client.consumer(group_id=group_id)
        consumed = consumer.read("in", 0)
        group = consumer.group_metadata() if n else group_id
        counting = CountingStore(store)
        p = arrowlog.connect(counting, config=NOW).producer(transactional_id=f"tx{n}")
        p.init_transactions()
        p.begin_transaction()
        p.send("out", consumed)
        counting.reset()
        p.send_offsets_to_transaction({("in", 0): 5, ("in", 1): 1}, group)
        counts.append(dict(counting.counts))
        p.commit_transaction()
        p.close()
        assert consumer.committed("in", 0) == 5 and consumer.committed("in", 1) == 1
    assert counts[0] == counts[1]


def test_offsets_read_before_their_topic_was_created_again_are_refused_by_the_send(
    pipeline: tuple[ArrowLog, ArrowLog], store: Store
) -> None:
    """Consume-transform-produce whose input topic is deleted and created
    again between the read and send_offsets_to_transaction: the send raises
    before anything is written (no coordinator entry, no pending mark), and
    the transaction goes on; committing it commits the records, and the
    group's position in the new topic stays unset."""
    admin, client = pipeline
    consumer = client.consumer(group_id="etl")
    consumed = consumer.read("in", 0)
    p = client.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("out", consumed)
    assert recreate_input(admin, 10, 11) == 2
    before = written(store, "_arrowlog/coordinator/", "_arrowlog/groups/")
    with pytest.raises(arrowlog.TopicRecreatedError) as refused:
        p.send_offsets_to_transaction({("in", 0): 5}, consumer.group_metadata())
    assert (refused.value.recorded_incarnation, refused.value.incarnation) == (0, 2)
    with pytest.raises(arrowlog.TopicRecreatedError, match="given as incarnation 0"):
        p.send_offsets_to_transaction({("in", 0): 5}, "etl", incarnations={"in": 0})
    assert written(store, "_arrowlog/coordinator/", "_arrowlog/groups/") == before
    assert p.state is arrowlog.ProducerState.IN_TRANSACTION
    p.commit_transaction()
    p.flush()
    assert committed(client, "out", 0) == [0, 1, 2, 3, 4]
    assert client.consumer(group_id="etl").committed("in", 0) is None
    assert written(store, "_arrowlog/groups/") == []


def test_a_topic_created_again_between_the_send_and_the_commit_keeps_the_offsets_for_the_old_one(
    pipeline: tuple[ArrowLog, ArrowLog],
) -> None:
    """The input topic is deleted and created again after the offsets were
    sent, before the commit: the transaction's entry keeps them under the old
    incarnation's key (``in/0``), so the commit applies them to the old
    topic's position, and the group's position in the new topic is untouched
    (it starts from the new topic's start, as a new group would)."""
    admin, client = pipeline
    consumer = client.consumer(group_id="etl")
    consumed = consumer.read("in", 0)
    p = client.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("out", consumed)
    p.send_offsets_to_transaction({("in", 0): 5}, consumer.group_metadata())
    recreate_input(admin, *range(10, 17))
    p.commit_transaction()
    p.flush()
    assert committed(client, "out", 0) == [0, 1, 2, 3, 4]
    assert client.consumer(group_id="etl").committed("in", 0) is None
    offsets = arrowlog.txn.groups.GroupOffsets(client.store, "etl", client.config.retry)
    assert offsets.latest().offsets == {"in/0": 5}


def test_state_machine_errors_write_nothing(log: ArrowLog) -> None:
    p = log.producer(transactional_id="tx")
    with pytest.raises(arrowlog.InvalidTxnStateError, match="init_transactions first"):
        p.begin_transaction()
    p.init_transactions()
    with pytest.raises(arrowlog.InvalidTxnStateError, match="already"):
        p.init_transactions()
    before = {o.key for o in log.store.list("")}
    with pytest.raises(arrowlog.InvalidTxnStateError, match="without begin"):
        p.commit_transaction()
    with pytest.raises(arrowlog.InvalidTxnStateError, match="without begin"):
        p.abort_transaction()
    with pytest.raises(arrowlog.InvalidTxnStateError, match="outside a transaction"):
        p.send("a", rows(1), partition=0)
    with pytest.raises(arrowlog.InvalidTxnStateError, match="outside a transaction"):
        p.send_offsets_to_transaction({("a", 0): 1}, group_id="g")
    p.begin_transaction()
    with pytest.raises(arrowlog.InvalidTxnStateError, match="finish the previous"):
        p.begin_transaction()
    with pytest.raises(arrowlog.InvalidTxnStateError, match="not a transactional producer"):
        log.producer().begin_transaction()
    assert {o.key for o in log.store.list("")} == before
    with pytest.raises(arrowlog.InvalidNameError):
        log.producer(transactional_id="../escape")


def test_a_fatal_error_stops_the_producer(log: ArrowLog) -> None:
    p = log.producer()
    p.send("a", rows(1), partition=0)
    p._idempotence.sequences[("a", 0)] = 10
    with pytest.raises(arrowlog.OutOfOrderSequenceError):
        p.send("a", rows(2), partition=0)
    with pytest.raises(arrowlog.InvalidTxnStateError, match="fatal"):
        p.send("a", rows(3), partition=0)
    assert committed(log, "a", 0) == [1]


def test_transitions_are_checked() -> None:
    assert is_transition_valid(None, TxnState.EMPTY)
    assert is_transition_valid(TxnState.ONGOING, TxnState.PREPARE_COMMIT)
    # a complete entry grants the next epoch: that transaction's first entry
    # may be its PREPARE (or an expirer's COMPLETE_ABORT of it)
    assert is_transition_valid(TxnState.EMPTY, TxnState.PREPARE_COMMIT)
    assert is_transition_valid(TxnState.COMPLETE_COMMIT, TxnState.PREPARE_ABORT)
    assert is_transition_valid(TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
    assert not is_transition_valid(TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT)
    assert not is_transition_valid(TxnState.EMPTY, TxnState.COMPLETE_COMMIT)
    assert not is_transition_valid(TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
    assert not is_transition_valid(TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT)
    assert not is_transition_valid(TxnState.ONGOING, TxnState.COMPLETE_ABORT)


def test_a_new_instance_fences_the_old_one(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    old = log.producer(transactional_id="tx")
    old.init_transactions()
    old.begin_transaction()
    old.send("a", rows(1), partition=0)
    new = make_log().producer(transactional_id="tx")
    new.init_transactions()  # aborts the old instance's transaction
    assert log.stable_offsets("a")[0] == log.end_offsets("a")[0]
    # no broker refuses them: they land, under an epoch the log has moved past,
    # so they are never visible and never hold the LSO
    old.send("a", rows(2), partition=0)
    old.send("a", rows(3), partition=1)
    assert log.stable_offsets("a") == log.end_offsets("a")
    with pytest.raises(arrowlog.ProducerFencedError):
        old.commit_transaction()
    with new.transaction():
        new.send("a", rows(4), partition=0)
    assert committed(log, "a", 0) == [4]
    # nothing holds the LSO, from PREPARE_COMMIT on: read after the high
    # watermark, as the commit's marker may land in between (see the marker
    # schedule below)
    end = log.end_offsets("a")[0]
    assert log.stable_offsets("a")[0] >= end
    new.flush()  # the marker follows in the background
    assert log.stable_offsets("a")[0] == log.end_offsets("a")[0]
    assert committed(log, "a", 1) == []


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_an_lso_read_while_the_marker_is_on_its_way_is_the_high_watermark_it_saw(
    store: Store, ending: str
) -> None:
    """Schedule: a transaction sends one record (offset 0) and ends; its
    marker (offset 1) is held on its way, as the producer's background thread
    writes it after ``commit_transaction``/``abort_transaction`` returned at
    PREPARE. A reader reads the LSO; the marker lands (``flush``); the reader
    reads the high watermark.

    Guarantee: the LSO is the high watermark of its own view (the decided
    transaction holds nothing back, marker or not), and the marker then takes
    one more offset. So an LSO read before a high watermark can be one short of
    it, and neither read is wrong: ``stable_offsets`` and ``end_offsets`` are
    two reads at two moments. What holds at any moment is that an LSO read
    after a high watermark is at least that; once the producer's ``flush``
    returns, the two are equal. (This interleaving made
    test_a_new_instance_fences_the_old_one and
    test_abort_hides_everything_and_releases_the_lso fail about once in 25
    runs, when they read the LSO first and compared it to the end.)"""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    scripted = ScriptedStore(store)
    p = arrowlog.connect(scripted).producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(1), partition=0)
    marker = scripted.hold("put_if_absent", segment_key("t", 0, 1))
    if ending == "commit":
        p.commit_transaction()
    else:
        p.abort_transaction()
    marker.wait_reached()
    reader = arrowlog.connect(store)
    end = reader.end_offsets("t")
    stable = reader.stable_offsets("t")
    assert stable == end == {0: 1}  # decided at PREPARE: not held at 0
    assert committed(reader, "t", 0) == ([1] if ending == "commit" else [])
    marker.release()
    p.flush()  # the marker lands
    end = reader.end_offsets("t")
    assert end == {0: 2}  # one past the LSO read before it
    assert reader.stable_offsets("t") == end
    assert committed(reader, "t", 0) == ([1] if ending == "commit" else [])
    p.close()


def test_an_unregistered_transaction_whose_first_record_was_deleted_is_no_younger_than_it(
    store: Store,
) -> None:
    """The first record of an open transaction (no coordinator entry yet)
    deleted below the log start: its age counts from the object at the log
    start's key, written after it. When that offset holds a staged batch,
    the object is the commit naming it: the batch's own object was uploaded
    before the transaction began, and dated by it the transaction would
    look older than it is, and expire early."""
    clock = ClockStore(store)
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0))
    scripted = ScriptedStore(clock)
    writer = arrowlog.connect(scripted, config=STAGED).partition("t", 0)
    writer.end_offset()
    log.append("t", rows(1))  # the writer's view is stale: its put loses, its batch is staged
    held = scripted.hold("put_if_absent", "t/0/segments/*", nth=2)  # its commit
    staging = Background(lambda: writer.append(rows(2)))
    held.wait_reached()
    clock.advance(10_000)
    p = log.producer(transactional_id="slow")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(3), partition=0)  # offset 2, ten seconds after the staged upload
    first_ms = clock.head(log.partition("t", 0).segment_key(2)).modified_ms
    assert first_ms is not None
    clock.advance(10_000)
    held.release()
    result = staging.result()
    assert isinstance(result, arrowlog.AppendResult) and result.base_offset == 3
    log.delete_records("t", 0, 3)

    (hanging,) = arrowlog.connect(clock).admin.open_transactions()

    assert (hanging.first_offset, hanging.registered) == (2, False)
    assert hanging.started_ms is not None and hanging.started_ms >= first_ms


def test_an_expired_transaction_is_aborted_by_anyone(
    log: ArrowLog, make_log: Callable[..., ArrowLog]
) -> None:
    p = log.producer(transactional_id="slow", transaction_timeout_ms=1_000)
    p.init_transactions()
    p.begin_transaction()
    p.send("a", rows(1), partition=0)
    other = make_log()
    assert other.admin.expire_transactions() == []  # not yet past its timeout
    # no coordinator entry yet: its age counts from its first record, on the
    # store's clock
    (hanging,) = other.admin.open_transactions()
    assert not hanging.registered and hanging.timeout_ms == 1_000
    started = hanging.started_ms
    assert started is not None
    assert started == log.store.head(log.partition("a", 0).segments()[0].key).modified_ms
    # the timeout, plus a second of rounding (S3 keeps object times to the second)
    assert other.admin.expire_transactions(now_ms=started + 2_000) == []
    expired = other.admin.expire_transactions(now_ms=started + 2_001)
    assert [t.transactional_id for t in expired] == ["slow"]
    assert other.admin.list_transactions()[0].state is TxnState.COMPLETE_ABORT
    assert log.stable_offsets("a")[0] == log.end_offsets("a")[0]
    with pytest.raises(arrowlog.TransactionTimeoutError):
        p.commit_transaction()
    assert committed(log, "a", 0) == []


def test_a_timeout_above_the_topic_maximum_is_refused(make_log: Callable[..., ArrowLog]) -> None:
    log = make_log()
    log.create_topic("strict", SCHEMA, config=TopicConfig(max_transaction_timeout_ms=5_000))
    p = log.producer(transactional_id="tx", transaction_timeout_ms=10_000)
    p.init_transactions()
    p.begin_transaction()
    with pytest.raises(arrowlog.InvalidTransactionTimeoutError):
        p.send("strict", rows(1))
    assert log.end_offsets("strict") == {0: 0}


def test_a_read_over_several_partitions_is_atomic(log: ArrowLog) -> None:
    p = log.producer(transactional_id="tx")
    p.init_transactions()
    p.begin_transaction()
    p.send("a", rows(1), partition=0)
    p.send("a", rows(2), partition=1)
    # The transaction commits right after the reader first asks the coordinator
    # about it, i.e. between its decisions for the two partitions.
    real_outcome = log.resolver.outcome
    asked: list[arrowlog.format.checkpoint.Decision] = []

    def ask_then_commit(tid: str, epoch: int) -> Outcome:
        answer = real_outcome(tid, epoch)
        if not asked:
            asked.append(answer.decision)
            p.commit_transaction()
        return answer

    log.resolver.outcome = ask_then_commit  # type: ignore[method-assign,assignment]
    during = log.consumer().read_many({("a", 0): (0, None), ("a", 1): (0, None)})
    assert asked == [arrowlog.format.checkpoint.Decision.UNDECIDED]
    assert [t.num_rows for t in during.values()] == [0, 0]  # neither part, not one of them
    log.resolver.outcome = real_outcome  # type: ignore[method-assign]
    after = log.consumer().read_many({("a", 0): (0, None), ("a", 1): (0, None)})
    assert [t["v"].to_pylist() for t in after.values()] == [[1], [2]]


def test_operators_can_list_describe_and_measure(log: ArrowLog) -> None:
    p = log.producer(transactional_id="ops")
    p.init_transactions()
    p.begin_transaction()
    p.send("a", rows(1), partition=2)
    # the coordinator log knows nothing of it before PREPARE: the partitions do
    [info] = log.admin.list_transactions()
    assert info.state is TxnState.EMPTY and info.partitions == ()
    assert log.admin.describe_transaction("ops")["state"] == "EMPTY"
    [hanging] = log.admin.open_transactions()
    assert (hanging.transactional_id, hanging.partition, hanging.registered) == ("ops", 2, False)
    metrics = log.admin.metrics(["a"])
    assert metrics["active_transactional_ids"] == ["ops"]
    assert metrics["partitions"]["a/2"] == {
        "high_watermark": 1, "last_stable_offset": 0, "live_producer_ids": 1, "open_transactions": 1
    }  # fmt: skip
    [producer] = log.admin.list_producers("a", 2)
    assert producer.producer_id == p.producer_id
    desc = log.describe_topic("a").partitions[2]
    assert (desc.high_watermark, desc.last_stable_offset, desc.open_transactions) == (1, 0, 1)
    log.admin.abort_transaction("ops")
    assert log.admin.metrics(["a"])["active_transactional_ids"] == []


@pytest.mark.parametrize("partitions", [1, 3, 8])
def test_a_commit_waits_for_one_coordinator_write_and_data_for_none(
    store: Store, partitions: int
) -> None:
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.create_topic(
        "wide", SCHEMA, partitions=partitions, config=TopicConfig(checkpoint_interval=50)
    )
    p = log.producer(transactional_id="cost")
    p.init_transactions()
    with p.transaction():  # the first one opens each partition (two LISTs each)
        for i in range(partitions):
            p.send("wide", rows(i), partition=i)
    p.flush()
    # the steady state: the data need no coordinator write before them
    p.begin_transaction()
    counting.reset()
    for i in range(partitions):
        p.send("wide", rows(i), partition=i)
    assert counting.counts == {"put_if_absent": partitions}
    # the commit waits for one request: its PREPARE_COMMIT entry
    counting.reset()
    p.commit_transaction()
    assert counting.caller_counts == {"put_if_absent": 1}
    # then, in the background: a marker per partition and the COMPLETE entry,
    # which grants the next transaction its epoch
    p.flush()
    assert counting.counts == {"put_if_absent": 2 + partitions}
    markers = [o.key for o in store.list("wide/") if "/segments/" in o.key]
    assert len(markers) == 4 * partitions
    # a transaction sent right after a commit does not wait for its COMPLETE;
    # its own commit does (and then writes one entry)
    p.begin_transaction()
    p.send("wide", rows(7), partition=0)
    p.commit_transaction()
    p.begin_transaction()
    counting.reset()
    p.send("wide", rows(8), partition=0)
    p.commit_transaction()
    assert counting.caller_counts == {"put_if_absent": 2}
    p.close()
    assert committed(log, "wide", 0)[-2:] == [7, 8]


def test_transactions_spanning_checkpoints_are_seen_by_a_fresh_reader(
    make_log: Callable[..., ArrowLog],
) -> None:
    log = make_log()
    log.create_topic("c", SCHEMA, config=TopicConfig(checkpoint_interval=3))
    plain = log.producer()
    plain.send("c", rows(0), partition=0)
    long_txn = log.producer(transactional_id="long")
    long_txn.init_transactions()
    long_txn.begin_transaction()
    long_txn.send("c", rows(1), partition=0)  # offset 1: the LSO stops here
    for i in range(10):  # 12 segments: 4 checkpoint windows go by
        plain.send("c", rows(10 + i), partition=0)
    assert len(list(log.store.list("c/0/checkpoints/"))) == 4
    fresh = make_log()
    assert fresh.stable_offsets("c") == {0: 1}
    assert fresh.consumer().read("c", 0)["v"].to_pylist() == [0]
    long_txn.send("c", rows(2), partition=0)
    long_txn.commit_transaction()
    fresher = make_log()  # decides from the coordinator log, marker written or not
    assert fresher.stable_offsets("c")[0] >= 13
    assert fresher.consumer().read("c", 0)["v"].to_pylist() == [0, 1, *range(10, 20), 2]
    long_txn.flush()  # the marker is written: the LSO is the high watermark
    assert fresher.stable_offsets("c") == fresher.end_offsets("c") == {0: 14}
    assert fresher.consumer().read("c", 0, 5, 9)["v"].to_pylist() == [13, 14, 15, 16]
    [pid_state] = [
        e for e in fresher.admin.list_producers("c", 0) if e.producer_id == plain.producer_id
    ]
    assert pid_state.base_sequence == 10  # producer state survived the checkpoints


def test_a_zombies_late_data_never_holds_the_lso_even_across_checkpoints(
    make_log: Callable[..., ArrowLog],
) -> None:
    log = make_log()
    log.create_topic("z", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    zombie = log.producer(transactional_id="z")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("z", rows(1), partition=0)
    successor = make_log().producer(transactional_id="z")
    successor.init_transactions()  # aborts the zombie's transaction, marker and all
    zombie.send("z", rows(2), partition=0)  # lands after the ABORT marker
    plain = log.producer()
    for i in range(5):
        plain.send("z", rows(100 + i), partition=0)
    reader = make_log()
    assert reader.stable_offsets("z") == reader.end_offsets("z")
    assert reader.consumer().read("z", 0)["v"].to_pylist() == [100, 101, 102, 103, 104]
    # the checkpoints dropped the decided transaction from their open set
    assert reader.describe_topic("z").partitions[0].open_transactions == 0


def test_key_partitioning_is_stable_and_round_robin_spreads(log: ArrowLog) -> None:
    producer = log.producer()
    batch = pa.record_batch({"v": list(range(30))}, schema=SCHEMA)
    results = producer.send_keyed("a", batch, key="v")
    assert sum(r.record_count for r in results) == 30
    again = log.producer().send_keyed("a", batch, key="v")
    assert [(r.partition, r.record_count) for r in again] == [
        (r.partition, r.record_count) for r in results
    ]
    rr = log.producer()
    assert {rr.send("a", rows(i)).partition for i in range(3)} == {0, 1, 2}


def test_a_key_that_is_not_there_or_cannot_be_hashed_is_refused_and_nothing_sent(
    log: ArrowLog,
) -> None:
    producer = log.producer()
    batch = pa.record_batch({"v": [1, 2]}, schema=SCHEMA)
    with pytest.raises(arrowlog.UnknownColumnError, match="'k'"):
        producer.send_keyed("a", batch, key="k")
    log.create_topic("ts", pa.schema([("t", pa.timestamp("us"))]), partitions=2)
    past_9999 = pa.array([253_402_326_000_000_000], pa.timestamp("us"))  # year 10000
    with pytest.raises(arrowlog.InvalidBatchError, match="cannot be hashed"):
        producer.send_keyed("ts", pa.record_batch({"t": past_9999}), key="t")
    assert log.end_offsets("a") == {0: 0, 1: 0, 2: 0}
    assert log.end_offsets("ts") == {0: 0, 1: 0}


def test_member_producers_commit_with_the_transaction_and_no_one_else(log: ArrowLog) -> None:
    owner = log.producer(transactional_id="job")
    owner.init_transactions()
    owner.begin_transaction()
    owner.add_partitions([("a", 0), ("a", 1)])

    def task_write(pid: int, partition: int, value: int) -> None:
        who = arrowlog.WriterIdentity(producer_id=pid, producer_epoch=owner.epoch, base_sequence=0,
                                      transactional=True, transactional_id="job")  # fmt: skip
        log.partition("a", partition).append(rows(value), identity=who)

    task_write(1001, 0, 1)  # a task attempt that succeeded
    task_write(1002, 1, 2)  # one that failed: its data stays, uncommitted
    task_write(1003, 1, 3)  # the retry of that task
    assert committed(log, "a", 0) == [] and log.stable_offsets("a")[1] == 0
    owner.commit_transaction(members=[1001, 1003], metadata={"version": "7"})
    assert committed(log, "a", 0) == [1] and committed(log, "a", 1) == [3]
    owner.flush()  # the markers are written
    assert log.stable_offsets("a") == log.end_offsets("a")
    fresh = log.producer(transactional_id="job")
    fresh.init_transactions()
    assert fresh.last_committed_metadata == {"version": "7"}
