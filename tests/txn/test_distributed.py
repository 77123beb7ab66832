"""One transaction written by many processes (arrowlog.txn.distributed), on every
backend: beginning never fences a running transaction, a pool of transactional
ids stays as small as the busiest moment, members register only the partitions
they write to, and only those get a marker."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import arrowlog
import arrowlog.txn.view
from arrowlog import ArrowLog, TxnState
from arrowlog.format.segment import WriterIdentity
from arrowlog.txn.coordinator import CoordinatorLog
from arrowlog.txn.distributed import begin_if_idle, begin_pooled, join_partitions
from arrowlog.txn.producer_ids import allocate_producer_id

SCHEMA = pa.schema([("v", pa.int64())])


@pytest.fixture
def log(make_log: Callable[..., ArrowLog]) -> ArrowLog:
    log = make_log()
    log.create_topic("t", SCHEMA, partitions=4)
    return log


def member_writes(log: ArrowLog, tid: str, epoch: int, partition: int, *values: int) -> int:
    """What a task of a job does: join the partition, then append as a member."""
    join_partitions(log, tid, epoch, [("t", partition)])
    pid = allocate_producer_id(log, tid)
    who = WriterIdentity(
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
        transactional_id=tid,
    )
    log.partition("t", partition).append(
        pa.record_batch({"v": list(values)}, schema=SCHEMA), identity=who
    )
    return pid


def commit(log: ArrowLog, tid: str, epoch: int, members: list[int], **metadata: str) -> None:
    with log.producer(transactional_id=tid) as producer:  # close waits for COMPLETE, as the sink
        producer.resume_transaction(epoch)
        producer.commit_transaction(members=members, metadata=metadata or None)


def latest(log: ArrowLog, tid: str) -> arrowlog.txn.coordinator.TxnEntry:
    entry = CoordinatorLog(log.store, tid, log.config.retry).latest()
    assert entry is not None
    return entry


def test_begin_leaves_a_running_transaction_alone(log: ArrowLog) -> None:
    first = begin_if_idle(log, "job", timeout_ms=60_000)
    assert first is not None and first.state is TxnState.ONGOING
    assert begin_if_idle(log, "job", timeout_ms=60_000) is None
    assert latest(log, "job") == first  # not a byte written over it
    pid = member_writes(log, "job", first.producer_epoch, 1, 7)
    commit(log, "job", first.producer_epoch, [pid])
    assert log.consumer().read("t", 1).column("v").to_pylist() == [7]
    again = begin_if_idle(log, "job", timeout_ms=60_000)
    assert again is not None and again.producer_epoch > first.producer_epoch


def test_the_pool_grows_only_with_concurrency(log: ArrowLog) -> None:
    a = begin_pooled(log, "jobs", timeout_ms=60_000)
    b = begin_pooled(log, "jobs", timeout_ms=60_000)  # a is running: next id
    assert (a.transactional_id, b.transactional_id) == ("jobs.0", "jobs.1")
    for entry in (a, b):
        commit(log, entry.transactional_id, entry.producer_epoch, [])
    for _ in range(5):  # one after another: always the first id
        c = begin_pooled(log, "jobs", timeout_ms=60_000)
        assert c.transactional_id == "jobs.0"
        pid = member_writes(log, c.transactional_id, c.producer_epoch, 0, 1)
        commit(log, c.transactional_id, c.producer_epoch, [pid])
    assert sorted(log.admin.transactional_ids()) == ["jobs.0", "jobs.1"]
    assert log.consumer().read("t", 0).num_rows == 5


def test_an_expired_pooled_id_is_finished_and_reused(
    log: ArrowLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = begin_pooled(log, "jobs", timeout_ms=1_000)
    member_writes(log, stuck.transactional_id, stuck.producer_epoch, 2, 1)  # its driver died
    # the store's clock an hour later (the probe object would say so then)
    now = arrowlog.txn.view.store_now_ms(log) + 3_600_000
    monkeypatch.setattr("arrowlog.txn.distributed.store_now_ms", lambda _log: now)
    reused = begin_pooled(log, "jobs", timeout_ms=60_000)
    assert reused.transactional_id == "jobs.0"
    assert log.stable_offsets("t") == log.end_offsets("t")  # the abort marker released it
    assert log.consumer().read("t", 2).num_rows == 0
    with pytest.raises(arrowlog.ProducerFencedError):  # the dead job's late task
        join_partitions(log, "jobs.0", stuck.producer_epoch, [("t", 3)])


def test_markers_go_only_where_members_wrote(log: ArrowLog) -> None:
    begun = begin_pooled(log, "jobs", timeout_ms=60_000)
    tid, epoch = begun.transactional_id, begun.producer_epoch
    pids = [member_writes(log, tid, epoch, 1, i) for i in range(3)]
    join_partitions(log, tid, epoch, [("t", 1)])  # joining again writes nothing
    assert latest(log, tid).partitions == (("t", 1),)
    commit(log, tid, epoch, pids)
    assert log.end_offsets("t") == {0: 0, 1: 4, 2: 0, 3: 0}  # 3 rows + 1 marker
    assert log.stable_offsets("t") == log.end_offsets("t")
    with pytest.raises(arrowlog.ProducerFencedError):
        join_partitions(log, tid, epoch, [("t", 0)])
    assert log.end_offsets("t")[0] == 0


def test_a_transaction_with_no_partition_still_commits_its_metadata(log: ArrowLog) -> None:
    begun = begin_if_idle(log, "app", timeout_ms=60_000)
    assert begun is not None
    commit(log, "app", begun.producer_epoch, [], txnVersion="3")
    entry = latest(log, "app")
    assert entry.state is TxnState.COMPLETE_COMMIT and entry.metadata == {"txnVersion": "3"}
    assert log.end_offsets("t") == {0: 0, 1: 0, 2: 0, 3: 0}


def test_a_job_cannot_go_on_in_a_topic_created_anew(make_log: Callable[..., ArrowLog]) -> None:
    """A member joining a topic deleted and created anew since the job
    registered it is refused; the job's end puts no marker in the new topic."""
    quick = arrowlog.LogConfig(metadata_max_age_ms=50)  # shared by every client
    log = make_log(config=quick)
    log.create_topic("t", SCHEMA, partitions=2)
    begun = begin_pooled(log, "jobs", timeout_ms=60_000)
    tid, epoch = begun.transactional_id, begun.producer_epoch
    pid = member_writes(log, tid, epoch, 0, 1)
    admin = make_log(config=quick)
    admin.delete_topic("t")
    admin.create_topic("t", SCHEMA, partitions=2)
    with pytest.raises(arrowlog.UnknownTopicOrPartitionError, match="created anew"):
        member_writes(make_log(config=quick), tid, epoch, 1, 2)
    assert latest(log, tid).incarnations == {"t": 0}
    commit(log, tid, epoch, [pid])
    fresh = make_log()
    assert fresh.end_offsets("t") == fresh.stable_offsets("t") == {0: 0, 1: 0}
