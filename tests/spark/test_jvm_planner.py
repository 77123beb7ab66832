"""The JVM reader's planner process (no Spark needed): connections kept between
plans never plan from what the log was. A read without end offsets ends where the
log ends now; a topic deleted, created again, altered, or a root emptied and
filled anew is planned as a new connection plans it."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import UnknownTopicOrPartitionError
from arrowlog.spark.jvm_planner import Clients, plan
from arrowlog.spark.options import ReadOptions

#: no grace before a deleted name is created again (only the writer waits)
QUICK = arrowlog.LogConfig(metadata_max_age_ms=0)


def request(root: Path, **options: str) -> dict[str, Any]:
    return {
        "options": {"path": str(root), "topic": "t", "storage.fsync": "false", **options},
        "columns": None,
        "filters": [],
    }


def rows(planned: Mapping[str, Any]) -> int:
    return sum(s["hi"] - s["lo"] for t in planned["tasks"] for s in t["segments"])


def kept(clients: Clients, asked: dict[str, Any]) -> arrowlog.ArrowLog:
    """The connection ``clients`` plans ``asked`` with."""
    return clients.log(ReadOptions.parse(asked["options"], streaming=None))[0]


def connect(root: Path) -> arrowlog.ArrowLog:
    return arrowlog.connect(str(root), {"fsync": False}, config=QUICK)


def test_a_kept_connection_plans_to_the_end_the_log_has_now(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", pa.schema([("v", pa.int64())]), partitions=2)
    log.append("t", pa.record_batch({"v": [1, 2]}))
    clients = Clients()
    assert rows(plan(request(root), clients)) == 2
    first = kept(clients, request(root))
    for p in (0, 1):
        log.append("t", pa.record_batch({"v": [3, 4, 5]}), partition=p)
    assert rows(plan(request(root), clients)) == 8
    assert rows(plan(request(root, endingOffsets='{"t": {"0": 2, "1": 0}}'), clients)) == 2
    assert kept(clients, request(root)) is first  # no new connection was needed
    assert plan(request(root), clients) == plan(request(root))  # what a new one plans


def test_a_topic_deleted_and_created_again_is_planned_anew(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    log.append("t", pa.record_batch({"v": [1, 2, 3]}))
    clients = Clients()
    first = plan(request(root), clients)
    assert rows(first) == 3
    log.delete_topic("t")
    with pytest.raises(UnknownTopicOrPartitionError, match="deleted"):
        plan(request(root), clients)
    log.create_topic("t", pa.schema([("w", pa.string())]))
    log.append("t", pa.record_batch({"w": ["x"]}))
    again = plan(request(root), clients)
    assert rows(again) == 1
    assert again["columns"][0] == "w"
    assert again == plan(request(root))
    old = {s["key"] for t in first["tasks"] for s in t["segments"]}
    assert old.isdisjoint(s["key"] for t in again["tasks"] for s in t["segments"])


def test_a_root_emptied_and_filled_anew_is_planned_anew(tmp_path: Path) -> None:
    """The same name at version 0 again, the same keys: only the topic's change id
    tells the new topic from the one the connection knew."""
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    for v in range(3):
        log.append("t", pa.record_batch({"v": [v]}))
    clients = Clients()
    assert rows(plan(request(root), clients)) == 3
    shutil.rmtree(root)
    log = connect(root)
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    for v in range(4):  # the chain the connection knew, and one more, at the same keys
        log.append("t", pa.record_batch({"v": [10 + v]}))
    again = plan(request(root), clients)
    assert rows(again) == 4
    assert again == plan(request(root))  # the new segments' append ids


def test_an_altered_topic_and_added_partitions_are_planned_anew(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = connect(root)
    log.create_topic("t", pa.schema([("v", pa.int64())]))
    log.append("t", pa.record_batch({"v": [1]}))
    clients = Clients()
    assert len(plan(request(root), clients)["tasks"]) == 1
    log.create_partitions("t", 2)
    log.append("t", pa.record_batch({"v": [2]}), partition=1)
    assert len(plan(request(root), clients)["tasks"]) == 2
    log.alter_topic_config("t", retention_ms=60_000)
    assert plan(request(root), clients) == plan(request(root))


def test_connections_are_kept_per_root_and_storage_options(tmp_path: Path) -> None:
    clients = Clients(size=2)
    roots = [tmp_path / f"log{i}" for i in range(3)]
    for i, root in enumerate(roots):
        log = connect(root)
        log.create_topic("t", pa.schema([("v", pa.int64())]))
        log.append("t", pa.record_batch({"v": list(range(i + 1))}))
        assert rows(plan(request(root), clients)) == i + 1
    assert rows(plan(request(roots[0]), clients)) == 1
    a = kept(clients, request(roots[0]))
    b = kept(clients, request(roots[0], **{"storage.fsync": "true"}))
    assert a is not b  # other options, another connection
