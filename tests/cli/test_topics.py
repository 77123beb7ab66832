"""``arrowlog topics`` create, list, describe on a local root (alter and delete:
test_topic_changes.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowlog
from tests.support.cli import fails, files, run
from tests.support.clocks import ClockStore
from tests.support.schedules import SCHEMA as STAGED_SCHEMA
from tests.support.schedules import rows as staged_rows
from tests.support.staged import TwoWriters


def test_create_list_describe(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = run(
        capsys, "topics", "create", "events", "--partitions", "3",
        "--schema", "id: int64 not null, name: string, at: timestamp[ms]",
        "--config", "checkpoint_interval=7", "--config", "max-batch-bytes=100000",
        "--config", "compression=lz4",
    )  # fmt: skip
    assert "created topic events with 3 partition(s)" in out
    topic = arrowlog.connect(str(root)).topic("events")
    fields: list[pa.Field[Any]] = [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("at", pa.timestamp("ms")),
    ]
    assert topic.schema == pa.schema(fields)
    assert (topic.config.checkpoint_interval, topic.config.max_batch_bytes) == (7, 100_000)
    assert topic.config.compression is arrowlog.Compression.LZ4
    sample = tmp_path / "sample.parquet"
    pq.write_table(pa.table({"v": [1.5]}), sample)
    run(capsys, "topics", "create", "other", "--schema-from", str(sample))
    assert run(capsys, "topics", "list").split() == ["events", "other"]
    assert json.loads(run(capsys, "topics", "list", "--output", "json")) == ["events", "other"]
    described = json.loads(run(capsys, "topics", "describe", "events", "--output", "json"))
    assert described[0]["schema"] == ["id: int64 not null", "name: string", "at: timestamp[ms]"]
    assert [p["high_watermark"] for p in described[0]["partition_offsets"]] == [0, 0, 0]
    text = run(capsys, "topics", "describe")
    assert "Topic: events\tPartitionCount: 3" in text and "Topic: other" in text
    assert "checkpoint_interval=7" in text and "compression=lz4" in text
    assert described[0]["config"]["compression"] == "lz4"
    # --if-not-exists makes a second create a no-op
    assert "exists already" in run(
        capsys, "topics", "create", "events", "--schema", "x: int8", "--if-not-exists"
    )


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--schema", "id int64"], 2, "write NAME: TYPE"),
        (["--schema", "id: int65"], 2, "unknown type 'int65'"),
        (["--schema", "a: int8, a: int8"], 2, "two fields named 'a'"),
        (["--schema", "a: int8", "--schema-from", "x.parquet"], 2, "exactly one of --schema"),
        ([], 2, "exactly one of --schema"),
        (["--schema", "a: int8", "--config", "retention=1"], 2, "KEY one of"),
        (
            ["--schema", "a: int8", "--config", "checkpoint_interval=-1"],
            2,
            "checkpoint_interval must be",
        ),
        (["--schema", "a: int8", "--partitions", "0"], 2, "0 is not in the range"),
        (["--schema-from", "{d}/missing.parquet"], 3, "FileNotFoundError"),
        (["--schema-from", "{d}/junk.parquet"], 2, "ArrowInvalid"),
        (["--schema-from", "{d}/file.txt"], 2, "use .parquet, .csv or .arrow"),
    ],
)
def test_bad_create_is_one_line_and_writes_nothing(
    root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    code: int,
    message: str,
) -> None:
    (tmp_path / "junk.parquet").write_text("not parquet")
    (tmp_path / "file.txt").write_text("x")
    run(capsys, "topics", "create", "existing", "--schema", "a: int8")
    before = files(root)
    argv = [a.format(d=tmp_path) for a in argv]
    err = fails(capsys, code, "topics", "create", "new", *argv)
    assert re.search(message, err), err
    assert files(root) == before
    err = fails(capsys, 1, "topics", "create", "existing", "--schema", "a: int8")
    assert "TopicExistsError" in err
    assert fails(capsys, 2, "topics", "create", "bad/name", "--schema", "a: int8")
    assert files(root) == before


def test_describe_counts_the_objects_and_the_batches_a_commit_object_names(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A commit object naming two staged batches is one object at a segment
    key (``segments``) and two record batches (``batches``)."""
    log = arrowlog.connect(str(root))
    log.create_topic("t", STAGED_SCHEMA)
    log.append("t", staged_rows(0))
    TwoWriters(ClockStore(log.store)).commit_two((1, 2, 3), (4, 5))  # [4, 6): one commit
    log.append("t", staged_rows(6))

    described = json.loads(run(capsys, "topics", "describe", "t", "--output", "json"))

    (offsets,) = described[0]["partition_offsets"]
    assert (offsets["high_watermark"], offsets["segments"], offsets["batches"]) == (7, 6, 7)
    text = run(capsys, "topics", "describe", "t")
    assert "BATCHES" in text
