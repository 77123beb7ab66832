"""Reads of a whole topic: ``log.read``, ``log.iter_batches`` and a consumer's
``read`` cover every partition and show committed records unless
read_uncommitted is asked for by name (a read of "src" once returned partition
0, aborted records and all)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import InvalidConfigError
from arrowlog.storage.memory import MemoryStore
from tests.read.test_topic_scan import SCHEMA, batch, committed_rows, mixed_log, rows


def test_a_topic_read_covers_every_partition_and_only_committed_records() -> None:
    log = mixed_log()
    every = committed_rows(log)
    assert rows(log.read("t")) == every
    assert rows(log.consumer().read("t")) == every
    assert rows(pa.Table.from_batches(list(log.iter_batches("t")))) == every
    # in partition order, each partition in offset order
    assert log.read("t").to_pylist() == log.scan("t").to_table().to_pylist()


def test_read_uncommitted_is_asked_for_by_name() -> None:
    log = mixed_log()
    assert 2000 not in log.read("t")["id"].to_pylist()
    assert 2000 in log.read("t", isolation_level="read_uncommitted")["id"].to_pylist()
    assert 2000 in log.read("t", 1, isolation_level="read_uncommitted")["id"].to_pylist()
    raw = log.consumer(isolation_level="read_uncommitted").read("t")
    assert 2000 in raw["id"].to_pylist()


def test_a_partition_named_reads_that_partition_committed() -> None:
    log = mixed_log()
    assert rows(log.read("t", 1)) == rows(log.consumer().read("t", 1))
    assert 2000 not in log.read("t", 1)["id"].to_pylist()


def test_offsets_without_a_partition_are_refused_in_a_topic_of_several() -> None:
    log = mixed_log()
    for call in (
        lambda: log.read("t", start=1),
        lambda: log.consumer().read("t", end=2),
        lambda: list(log.iter_batches("t", start=0)),
    ):
        with pytest.raises(InvalidConfigError, match="name it"):
            call()


def test_a_topic_of_one_partition_takes_offsets_without_naming_it() -> None:
    log = mixed_log()
    log.create_topic("one", log.topic("t").schema)
    log.append("one", log.read("t").to_batches()[0])
    assert log.read("one", start=1).num_rows == log.read("one").num_rows - 1


_READS: dict[str, Callable[[arrowlog.ArrowLog], pa.Table]] = {
    "log.read": lambda log: log.read("t"),
    "consumer.read": lambda log: log.consumer().read("t"),
    "iter_batches": lambda log: pa.Table.from_batches(list(log.iter_batches("t"))),
    "scan": lambda log: log.scan("t").to_table(),
}


@pytest.mark.parametrize("read", sorted(_READS))
@pytest.mark.parametrize("partitions", [1, 2])
def test_a_partition_added_since_the_client_looked_is_read_with_the_others(
    read: str, partitions: int
) -> None:
    """Schedule: client A reads topic t (its partition count cached); B adds
    a partition and commits a transaction in partition 0 and the new one; A
    reads t. A's read shows the transaction in both partitions, not in
    partition 0 alone."""
    store = MemoryStore()
    a, b = arrowlog.connect(store), arrowlog.connect(store)
    a.create_topic("t", SCHEMA, partitions=partitions)
    a.append("t", batch([1], "a"), partition=0)
    assert _READS[read](a)["id"].to_pylist() == [1]
    b.create_partitions("t", partitions + 1)
    producer = b.producer(transactional_id="p")
    producer.init_transactions()
    with producer.transaction():
        producer.send("t", batch([10], "c"), partition=0)
        producer.send("t", batch([12], "c"), partition=partitions)
    producer.close()
    assert rows(_READS[read](a), "id") == [(1,), (10,), (12,)]
