"""A new client on a remote store lists the newest checkpoint of the partition
it opens while it reads the topic (arrowlog/partition/ahead.py): schedules
against SeaweedFS, with the requests held where the order matters."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.config import LogConfig, TopicConfig
from arrowlog.partition import ahead
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from arrowlog.testing.scripted import ScriptedStore

pytestmark = pytest.mark.s3

SCHEMA = pa.schema([("x", pa.int64())])
#: a checkpoint every 4 appends: 10 appends leave two
INTERVAL = 4


def batch(i: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([i, i + 1], pa.int64())], schema=SCHEMA)


@pytest.fixture
def s3_store(s3_server: Any) -> Iterator[Store]:
    store = open_store(
        s3_server.url(f"ahead-{os.getpid()}-{time.time_ns()}"), dict(s3_server.storage_options)
    )
    yield store
    store.close()


def written(store: Store, topic: str = "t", appends: int = 10) -> list[int]:
    """``appends`` batches in ``topic``, by a client of its own; their rows."""
    log = arrowlog.connect(store)
    log.create_topic(topic, SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    for i in range(appends):
        log.append(topic, batch(10 * i))
    return [v for i in range(appends) for v in (10 * i, 10 * i + 1)]


def checkpoint_lists(scripted: ScriptedStore, prefix: str = "t/0/") -> int:
    return sum(1 for op, key in scripted.history if op == "list" and key == f"{prefix}checkpoints/")


def lists_knowing_the_topic(store: Store, work: Callable[[arrowlog.ArrowLog], Any]) -> int:
    """The checkpoint LISTs of ``work`` by a new client that read the topic
    first (no look-ahead then)."""
    scripted = ScriptedStore(store)
    log = arrowlog.connect(scripted)
    log.topic("t")
    work(log)
    return checkpoint_lists(scripted)


def checkpoint_lists_in(history: list[tuple[str, str]]) -> int:
    return sum(1 for op, key in history if op == "list" and key == "t/0/checkpoints/")


def while_the_topic_is_held(
    scripted: ScriptedStore, work: Callable[[arrowlog.ArrowLog], Any]
) -> tuple[int, Any]:
    """``work`` by a new client whose GET of the topic is held until its
    checkpoint LIST comes (10 s at most): the LISTs made while it was held,
    and what ``work`` returned."""
    gate = scripted.hold("get", "_arrowlog/topics/t.json")
    log = arrowlog.connect(scripted)
    thread, out = in_thread(lambda: work(log))
    try:
        gate.wait_reached()
        deadline = time.monotonic() + 10
        while checkpoint_lists(scripted) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        listed_while_held = checkpoint_lists(scripted)
    finally:
        gate.release()
        thread.join()
    return listed_while_held, out[0]


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    return thread, out


def test_a_new_clients_read_lists_the_newest_checkpoint_while_the_topic_is_read(
    s3_store: Store,
) -> None:
    """The topic's GET is held: the checkpoint LIST is made meanwhile, and
    the read that follows returns every row, with no more checkpoint LISTs
    than a client that had read the topic before makes."""
    rows = written(s3_store)
    scripted = ScriptedStore(s3_store)
    listed_while_held, table = while_the_topic_is_held(scripted, lambda log: log.read("t", 0))
    assert listed_while_held == 1
    assert table.column("x").to_pylist() == rows
    assert checkpoint_lists(scripted) == lists_knowing_the_topic(
        s3_store, lambda log: log.read("t", 0)
    )


def test_a_new_clients_append_lists_the_newest_checkpoint_while_the_topic_is_read(
    s3_store: Store,
) -> None:
    """An append opens the partition the same way, and lands at the end."""
    rows = written(s3_store)
    scripted = ScriptedStore(s3_store)
    listed_while_held, result = while_the_topic_is_held(
        scripted, lambda log: log.append("t", batch(1000))
    )
    assert listed_while_held == 1
    assert result.base_offset == len(rows)
    assert checkpoint_lists(scripted) == lists_knowing_the_topic(
        s3_store, lambda log: log.append("t", batch(2000))
    )


def test_a_look_ahead_at_the_names_prefix_is_not_used_for_a_topic_created_anew(
    s3_store: Store,
) -> None:
    """The name's prefix was the deleted topic's: the opening lists the new
    incarnation's checkpoints itself, and reads only the new topic's rows."""
    written(s3_store)
    # a short trust in metadata: creating the name again waits as long
    admin = arrowlog.connect(s3_store, config=LogConfig(metadata_max_age_ms=50))
    admin.delete_topic("t")
    admin.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=INTERVAL))
    for i in range(6):
        admin.append("t", batch(100 * i))
    rows = [v for i in range(6) for v in (100 * i, 100 * i + 1)]
    scripted = ScriptedStore(s3_store)
    table = arrowlog.connect(scripted).read("t", 0)
    assert table.column("x").to_pylist() == rows
    lists = [key for op, key in scripted.history if op == "list" and key.endswith("/checkpoints/")]
    assert lists[0] == "t/0/checkpoints/"  # the guess, made before the topic was read
    assert any(key.startswith("t=") for key in lists[1:])  # the new prefix's own


def test_a_look_ahead_older_than_its_freshness_is_listed_again(
    s3_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition object taken and used only later opens with a LIST of
    its own: the look-ahead's answer may name a checkpoint far behind."""
    rows = written(s3_store)
    monkeypatch.setattr(ahead, "FRESH_S", 0.0)
    scripted = ScriptedStore(s3_store)
    part = arrowlog.connect(scripted).partition("t", 0)
    time.sleep(0.01)
    assert part.read().column("x").to_pylist() == rows
    # the look-ahead's, unused, and then every one a client knowing the topic makes
    expected = 1 + lists_knowing_the_topic(s3_store, lambda log: log.partition("t", 0).read())
    assert checkpoint_lists(scripted) == expected


def test_a_failed_look_ahead_leaves_the_opening_to_list_with_its_retries(
    s3_store: Store,
) -> None:
    """The look-ahead's LIST fails (once, no retry of its own): the opening
    lists again, and the read is whole."""
    rows = written(s3_store)
    scripted = ScriptedStore(s3_store)
    scripted.fail("list", "t/0/checkpoints/")
    assert arrowlog.connect(scripted).read("t", 0).column("x").to_pylist() == rows
    expected = 1 + lists_knowing_the_topic(s3_store, lambda log: log.read("t", 0))
    assert checkpoint_lists(scripted) == expected


def test_no_look_ahead_on_a_local_store(tmp_path: Any) -> None:
    """At memory speed no request is started early: while the topic's GET is
    held, nothing is listed."""
    local = ScriptedStore(open_store(str(tmp_path / "root")))
    rows = written(local)
    reader = arrowlog.connect(local)
    gate = local.hold("get", "_arrowlog/topics/t.json")
    before = len(local.history)
    thread, out = in_thread(lambda: reader.read("t", 0))
    try:
        gate.wait_reached()
        time.sleep(0.2)  # time for a LIST that should not come
        listed_while_held = checkpoint_lists_in(local.history[before:])
    finally:
        gate.release()
        thread.join()
    assert listed_while_held == 0
    assert out[0].column("x").to_pylist() == rows


def test_no_look_ahead_for_a_topic_the_client_has_read(s3_store: Store) -> None:
    """A client that read the topic before lists when it opens, not before."""
    rows = written(s3_store)
    scripted = ScriptedStore(s3_store)
    reader = arrowlog.connect(scripted)
    reader.topic("t")
    before = len(scripted.history)
    assert reader.read("t", 0).column("x").to_pylist() == rows
    assert scripted.history[before] == ("list", "t/0/checkpoints/")
