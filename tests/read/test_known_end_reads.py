"""A read_committed read to an end the client already knows needs no listing:
every transaction that holds back an offset below that end started below it,
so the state the client holds has it, and the coordinator decides it. The
read lists nothing, and still refuses, shows and hides what it must."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import arrowlog
from arrowlog.errors import OffsetOutOfRangeError
from arrowlog.storage import ObjectInfo, Store
from arrowlog.storage.wrappers import CountingStore
from tests.support.schedules import FAST, SCHEMA, rows


class Listings(CountingStore):
    """Also the prefixes listed under the partition (the coordinator's
    decisions are listed elsewhere: deciding a transaction may list)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.partition: list[str] = []

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        if "/0/" in prefix:  # the topic's partition 0: segments, checkpoints, markers
            self.partition.append(prefix)
        return super().list(prefix, start_after=start_after, limit=limit)


def _topic(store: Store) -> arrowlog.ArrowLog:
    log = arrowlog.connect(store, config=FAST)
    log.create_topic("t", SCHEMA)
    part = log.partition("t", 0)
    for i in range(5):
        part.append(rows(i))
    return log


def test_a_read_to_an_end_the_client_knows_lists_nothing(store: Store) -> None:
    _topic(store)
    counting = Listings(store)
    reader = arrowlog.connect(counting, config=FAST)
    end = reader.partition("t", 0).end_offset()
    counting.partition.clear()
    assert reader.read("t", 0, 0, end)["v"].to_pylist() == [0, 1, 2, 3, 4]
    assert counting.partition == []
    assert reader.read("t", 0)["v"].to_pylist() == [0, 1, 2, 3, 4]
    assert counting.partition, "a read to the log's end looks for newer appends"


def test_a_read_to_a_known_end_past_an_open_transaction_is_refused(store: Store) -> None:
    log = _topic(store)
    producer = log.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(100), partition=0)
    producer.flush()
    reader = arrowlog.connect(store, config=FAST)
    end = reader.partition("t", 0).end_offset()
    with pytest.raises(OffsetOutOfRangeError, match="last stable offset 5"):
        reader.read("t", 0, 0, end)
    producer.abort_transaction()


@pytest.mark.parametrize("outcome", ["commit", "abort"])
def test_a_transaction_decided_after_the_client_listed_is_read_as_decided(
    store: Store, outcome: str
) -> None:
    """The client learned the end while the transaction was open; it is
    decided (its marker lands past that end); the read to the end the
    client knows shows its records, or hides them, without listing."""
    log = _topic(store)
    producer = log.producer(transactional_id="tx")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(100, 101), partition=0)
    producer.flush()
    counting = Listings(store)
    reader = arrowlog.connect(counting, config=FAST)
    end = reader.partition("t", 0).end_offset()
    if outcome == "commit":
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    counting.partition.clear()
    got = reader.read("t", 0, 0, end)["v"].to_pylist()
    assert got == [0, 1, 2, 3, 4, *([100, 101] if outcome == "commit" else [])]
    assert counting.partition == []
