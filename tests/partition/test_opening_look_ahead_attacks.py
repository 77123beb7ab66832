"""Schedules against a new client's look-ahead (arrowlog/partition/ahead.py):
the checkpoint LIST it starts before reading the topic is answered, and then
the store changes under it before the opening uses the answer; and inputs
that must be refused before anything is asked of the store."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import UnknownColumnError, UnknownTopicOrPartitionError
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.testing.scripted import ScriptedStore

SCHEMA = pa.schema([("x", pa.int64())])


def batch(i: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([i, i + 1], pa.int64())], schema=SCHEMA)


@pytest.fixture
def s3_store(s3_server: Any) -> Iterator[Store]:
    store = open_store(
        s3_server.url(f"ahead-attack-{os.getpid()}-{time.time_ns()}"),
        dict(s3_server.storage_options),
    )
    yield store
    store.close()


@pytest.mark.s3
@pytest.mark.parametrize(
    ("partition", "message"),
    [(True, "must be an int"), (False, "must be an int"), (10_000, "not 10000")],
)
def test_a_partition_no_topic_can_have_is_refused_without_listing_a_checkpoint_prefix(
    s3_store: Store, partition: int, message: str
) -> None:
    """``partition("t", True)`` is no partition (``check_partition`` refuses
    bools), nor is one past the most a topic may have: a new client on a
    remote store must not list ``t/True/...`` or ``t/10000/...`` for them."""
    arrowlog.connect(s3_store).create_topic("t", SCHEMA)
    scripted = ScriptedStore(s3_store)
    with pytest.raises(UnknownTopicOrPartitionError, match=message):
        arrowlog.connect(scripted).partition("t", partition)
    assert [key for op, key in scripted.history if op == "list"] == []


def test_a_consumer_read_of_a_partition_the_topic_lacks_names_a_bad_column_first_as_before(
    store: Store,
) -> None:
    """Consumer.read checks the columns against the topic before the
    partition (what it did before it took the partition first, for the
    look-ahead): bad input gets the same answer on every store."""
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA)
    log.append("t", batch(0))
    for reader in (arrowlog.connect(store), log):
        with pytest.raises(UnknownColumnError, match="nope"):
            reader.consumer().read("t", 7, columns=["nope"])
        with pytest.raises(UnknownColumnError, match="nope"):
            reader.read("t", 7, columns=["nope"])
    with pytest.raises(UnknownTopicOrPartitionError, match="not 7"):
        arrowlog.connect(store).consumer().read("t", 7, columns=["x"])
