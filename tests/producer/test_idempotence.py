"""Producer ids, epochs and sequences: duplicates return the original offset,
gaps and stale epochs are refused, and nothing is written by a refused batch."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import ArrowLog, LogConfig, RetryPolicy, WriterIdentity
from arrowlog.storage import Store
from arrowlog.testing.faulty import Faults, FaultyStore
from arrowlog.testing.scripted import ScriptedStore

SCHEMA = pa.schema([("v", pa.int64())])


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values)}, schema=SCHEMA)


def keys(store: Store) -> list[str]:
    return [o.key for o in store.list("t/")]


@pytest.fixture
def log(make_log: Callable[..., ArrowLog]) -> ArrowLog:
    log = make_log()
    log.create_topic("t", SCHEMA, partitions=2)
    return log


def test_sequences_single_batch_window(log: ArrowLog, make_log: Callable[..., ArrowLog]) -> None:
    part = log.partition("t", 0)

    def who(seq: int, epoch: int = 0) -> WriterIdentity:
        return WriterIdentity(producer_id=7, producer_epoch=epoch, base_sequence=seq)

    first = part.append(rows(1, 2), identity=who(0))
    second = part.append(rows(3), identity=who(2))
    before = keys(log.store)
    # a retry of the latest batch returns its original offset and writes nothing
    assert part.append(rows(3), identity=who(2)) == second
    # also from another connection that learns the state from the log
    assert make_log().partition("t", 0).append(rows(3), identity=who(2)) == second
    with pytest.raises(arrowlog.DuplicateSequenceError):
        part.append(rows(1, 2), identity=who(0))  # older than the latest batch
    with pytest.raises(arrowlog.OutOfOrderSequenceError):
        part.append(rows(4), identity=who(5))  # gap after sequence 2
    with pytest.raises(arrowlog.OutOfOrderSequenceError):
        part.append(rows(4), identity=who(3, epoch=1))  # a new epoch starts at 0
    assert keys(log.store) == before
    assert first.base_offset == 0 and second.base_offset == 2
    assert part.append(rows(9), identity=who(0, epoch=1)).base_offset == 3
    with pytest.raises(arrowlog.ProducerFencedError):
        make_log().partition("t", 0).append(rows(4), identity=who(3, epoch=0))  # stale epoch
    assert log.read("t", 0)["v"].to_pylist() == [1, 2, 3, 9]


def test_producer_ids_are_unique_and_claimed(log: ArrowLog) -> None:
    pids = set()
    for _ in range(30):
        p = log.producer()
        p.send("t", rows(1), partition=0)
        pids.add(p.producer_id)
    assert len(pids) == 30
    claimed = {int(o.key.rsplit("/", 1)[1]) for o in log.store.list("_arrowlog/producer-ids/")}
    assert pids <= claimed


def test_an_idempotent_producer_writes_each_batch_once_through_lost_replies(store: Store) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=2)
    # Threads draw from one seeded stream in the order their requests come, so
    # the count varies between runs and backends; this seed loses 18 replies
    # of 60 sends in a serial run, far from the bound below.
    faulty = FaultyStore(store, Faults(lose_ack=0.3, fail_before=0.1, seed=6))
    log = arrowlog.connect(
        faulty, config=LogConfig(retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.01))
    )
    producer = log.producer()
    sent = []
    for i in range(60):
        r = producer.send("t", rows(i, i), partition=i % 2)
        sent.append((r.partition, r.base_offset, i))
    producer.flush()
    for p in (0, 1):
        values = arrowlog.connect(store).read("t", p)["v"].to_pylist()
        assert values == [v for part, _, i in sent if part == p for v in (i, i)]
    assert faulty.injected["lose_ack"] >= 8


def test_a_producer_whose_id_claim_lost_its_reply_claims_another(store: Store) -> None:
    arrowlog.connect(store).create_topic("t", SCHEMA, partitions=1)
    scripted = ScriptedStore(store)
    late = scripted.late_put("_arrowlog/producer-ids/*")
    log = arrowlog.connect(scripted, config=LogConfig(retry=RetryPolicy(initial_backoff=0.001)))
    producer = log.producer()
    producer.send("t", rows(1), partition=0)
    assert late.land()  # the first claim lands after all: an id nobody uses
    claimed = {int(o.key.rsplit("/", 1)[1]) for o in store.list("_arrowlog/producer-ids/")}
    assert len(claimed) == 2 and producer.producer_id in claimed
    assert arrowlog.connect(store).read("t", 0)["v"].to_pylist() == [1]


class WriteThenPartition(FaultyStore):
    """Every write lands but its reply is lost, and every read fails: a network
    partition that starts right after the PUT reached the server."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner, Faults())

    def put_if_absent(self, key: str, data: bytes | memoryview) -> None:
        self.inner.put_if_absent(key, data)
        raise arrowlog.TransientStoreError(f"{key}: reply lost", maybe_applied=True)

    def get_range(self, key: str, start: int, end: int) -> bytes:
        raise arrowlog.TransientStoreError(f"{key}: unreachable", maybe_applied=False)

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        raise arrowlog.TransientStoreError(f"{key}: unreachable", maybe_applied=False)


def test_an_unknown_outcome_is_settled_by_resending_with_the_same_sequence(
    log: ArrowLog,
) -> None:
    producer = log.producer()
    producer.send("t", rows(1), partition=0)
    part = log.partition("t", 0)
    real_store, real_config = part._shared.store, part._shared.config
    part._shared.store = WriteThenPartition(real_store)
    part._shared.config = LogConfig(
        retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.002, deadline=0.05)
    )
    with pytest.raises(arrowlog.AppendOutcomeUnknownError):
        producer.send("t", rows(2), partition=0)  # it landed, but nobody could tell
    part._shared.store, part._shared.config = real_store, real_config
    producer.flush()  # resends with the same sequence: recognised, not written again
    producer.send("t", rows(3), partition=0)
    assert log.read("t", 0)["v"].to_pylist() == [1, 2, 3]
