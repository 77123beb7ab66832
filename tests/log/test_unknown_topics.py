"""A topic not found names the root it was looked for at, and what is there:
a wrong root (a typo in a path, another prefix, another bucket) reads as one."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.errors import UnknownTopicOrPartitionError

SCHEMA = pa.schema([("x", pa.int64())])


def test_an_empty_root_is_named_and_questioned(tmp_path: Path) -> None:
    log = arrowlog.connect(str(tmp_path / "typo"))
    with pytest.raises(UnknownTopicOrPartitionError) as caught:
        log.read("events")
    message = str(caught.value)
    assert message == (
        f"unknown topic 'events' at file://{tmp_path / 'typo'}, which holds no topic: "
        "is the root right?"
    )
    assert not (tmp_path / "typo").exists()  # a read never creates the root


def test_a_root_with_topics_names_some_of_them() -> None:
    log = arrowlog.connect("memory://")
    for name in ("a", "b", "c", "d", "e", "f"):
        log.create_topic(name, SCHEMA)
    with pytest.raises(
        UnknownTopicOrPartitionError, match=r"at memory:// \(it holds a, b, c, d, e, \.\.\.\)"
    ):
        log.scan("events")
