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
from arrowlog.errors import UnknownTopicOrPartitionError
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.testing.scripted import ScriptedStore

SCHEMA = pa.schema([("x", pa.int64())])


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
