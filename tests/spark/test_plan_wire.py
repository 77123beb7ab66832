"""The planner's side of the plan wire (arrowlog.spark.plan_wire): every answer
carries the wire version, and a request of another version (or of none, as a
jar from before versions sends) is refused with a typed error instead of being
read as if it were this version's. The JVM's side: tests/jvm/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import UnsupportedVersionError
from arrowlog.spark import plan_wire
from arrowlog.spark.jvm_planner import answer


def options(root: Path) -> dict[str, str]:
    return {"path": str(root), "topic": "t", "storage.fsync": "false"}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    log = arrowlog.connect(str(tmp_path), {"fsync": False})
    log.create_topic("t", pa.schema([("offset", pa.int64())]))
    log.append("t", pa.record_batch({"offset": [7, 8]}))
    log.close()
    return tmp_path


def test_a_request_of_another_version_is_refused_naming_both(root: Path) -> None:
    later = {"version": plan_wire.VERSION + 1, "kind": "plan", "options": options(root)}
    with pytest.raises(UnsupportedVersionError, match=f"version {plan_wire.VERSION + 1}"):
        plan_wire.read_request(json.dumps(later))
    refused = json.loads(answer(json.dumps(later)))
    assert refused["version"] == plan_wire.VERSION
    assert refused["error"]["type"] == "UnsupportedVersionError"
    message = refused["error"]["message"]
    assert f"version {plan_wire.VERSION + 1}" in message
    assert f"speaks version {plan_wire.VERSION}" in message
    assert "tasks" not in refused


def test_a_request_without_a_version_is_refused(root: Path) -> None:
    """What a JVM reader from before versions sent: a plan request, unversioned."""
    old: dict[str, Any] = {"options": options(root), "columns": None, "filters": []}
    refused = json.loads(answer(json.dumps(old)))
    assert refused["error"]["type"] == "UnsupportedVersionError"
    assert "version none" in refused["error"]["message"]


def test_a_request_of_an_unknown_kind_is_refused(root: Path) -> None:
    odd = {"version": plan_wire.VERSION, "kind": "vacuum", "options": options(root)}
    refused = json.loads(answer(json.dumps(odd)))
    assert refused["error"]["type"] == "UnsupportedVersionError"
    assert "'vacuum'" in refused["error"]["message"]


def request(kind: str, root: Path, **fields: Any) -> str:
    return json.dumps(
        {"version": plan_wire.VERSION, "kind": kind, "options": options(root), **fields}
    )


def test_every_answer_carries_the_version_and_names_the_metadata_columns(root: Path) -> None:
    """A plan, a check, a relocation and an error: each of this version; the
    plan and the check name the metadata columns by role (the topic has a
    column ``offset``: the metadata one is ``_offset``)."""
    names = {
        "topic": "topic",
        "partition": "partition",
        "offset": "_offset",
        "timestamp": "timestamp",
    }
    planned = json.loads(answer(request("plan", root, columns=None, filters=[])))
    assert planned["version"] == plan_wire.VERSION
    assert planned["metadata_columns"] == names
    assert [s["lo"] for t in planned["tasks"] for s in t["segments"]] == [0]
    checked = json.loads(answer(request("check", root)))
    assert checked == {"version": plan_wire.VERSION, "unreadable": None, "metadata_columns": names}
    wanted = {"key": "t/0/segments/00000000000000000000.arrow", "base": 0, "end": 2}
    relocated = json.loads(answer(request("relocate", root, relocate=wanted)))
    assert relocated == {"version": plan_wire.VERSION, "segment": None}
    failed = json.loads(answer("{not json"))
    assert failed["version"] == plan_wire.VERSION
    assert failed["error"]["type"] == "JSONDecodeError"
