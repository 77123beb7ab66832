"""The objects of staged appends: a staged data object's header, a commit
object's refs (checksummed, covering exactly the commit's offsets), staged
names, and checkpoints of windows that hold commits (version 4, refs kept)."""

from __future__ import annotations

import json

import crc32c
import pyarrow as pa
import pytest

from arrowlog.config import Compression
from arrowlog.errors import CorruptSegmentError
from arrowlog.format.checkpoint import (
    CHECKPOINT_VERSION,
    REFS_CHECKPOINT_VERSION,
    Checkpoint,
    PartitionState,
    SegmentSummary,
    advance,
)
from arrowlog.format.segment import (
    PLAIN_APPEND,
    Ref,
    SegmentHeader,
    WriterIdentity,
    empty_batch,
    encode,
    read_header,
)
from arrowlog.format.segment.header import REFS_CRC_KEY, REFS_KEY, header_from_metadata, hex8
from arrowlog.format.topic import StagedName, parse_staged_name, staged_at

SCHEMA = pa.schema([("v", pa.int64())])
PRODUCER = WriterIdentity(producer_id=4, producer_epoch=1, base_sequence=9)


def ref(name: str, count: int, who: WriterIdentity = PLAIN_APPEND) -> Ref:
    return Ref(at=f"staged/0000000001/{name}.arrow", record_count=count, size=100,
               timestamp_ms=5, append_id=name, identity=who)  # fmt: skip


def commit(base: int, *refs: Ref) -> bytes:
    header = SegmentHeader(
        base_offset=base, record_count=sum(r.record_count for r in refs), timestamp_ms=1,
        append_id="c", refs=refs,
    )  # fmt: skip
    return bytes(encode(empty_batch(SCHEMA), header, Compression.NONE)[0])


def test_a_commit_object_gives_its_batches_at_consecutive_offsets() -> None:
    header = read_header(commit(10, ref("a", 3), ref("b", 2, PRODUCER)), key="k")
    assert not isinstance(header, int) and header.refs is not None
    summary = SegmentSummary.of(header, 500)
    assert [(b.base, b.end, b.at, b.producer_id) for b in summary.batches()] == [
        (10, 13, "staged/0000000001/a.arrow", -1),
        (13, 15, "staged/0000000001/b.arrow", 4),
    ]
    assert (summary.base, summary.end, summary.size) == (10, 15, 500)
    state = advance(PartitionState(), [summary])
    assert state.producers[4].base_offset == 13 and state.producers[4].base_sequence == 9


def test_refs_that_do_not_cover_the_commit_or_fail_their_checksum_are_corrupt() -> None:
    data = commit(0, ref("a", 3))
    schema = pa.ipc.read_schema(pa.py_buffer(data[8:]))
    metadata = dict(schema.metadata)
    short = json.dumps([ref("a", 2).to_dict()]).encode()  # 2 of the commit's 3 records
    for broken in (
        {**metadata, REFS_CRC_KEY: b"00000000"},
        {**metadata, REFS_KEY: short, REFS_CRC_KEY: hex8(crc32c.crc32c(short))},
    ):
        with pytest.raises(CorruptSegmentError):
            header_from_metadata(broken, "k")


def test_a_staged_header_says_so_and_starts_at_zero() -> None:
    header = SegmentHeader(base_offset=0, record_count=1, timestamp_ms=1, append_id="s",
                           staged=True)  # fmt: skip
    batch = pa.record_batch({"v": [1]}, schema=SCHEMA)
    read = read_header(bytes(encode(batch, header)[0]), key="k")
    assert not isinstance(read, int) and read.staged
    moved = SegmentHeader(base_offset=3, record_count=1, timestamp_ms=1, append_id="s",
                          staged=True)  # fmt: skip
    with pytest.raises(CorruptSegmentError, match="staged"):
        read_header(bytes(encode(batch, moved)[0]), key="k")


def test_a_staged_name_says_who_staged_what() -> None:
    name = StagedName(1_700_000_000_123, "ab" * 16, 7, 4, 1, 9, transactional=True)
    assert parse_staged_name(f"t/0/{staged_at(name)}") == name
    assert parse_staged_name("t/0/segments/00000000000000000000.arrow") is None


def test_a_checkpoint_of_a_window_with_a_commit_keeps_its_refs_under_version_4() -> None:
    header = read_header(commit(1, ref("a", 3), ref("b", 2, PRODUCER)), key="k")
    assert not isinstance(header, int)
    plain = SegmentSummary(base=0, size=10, record_count=1, timestamp_ms=1)
    window = (plain, SegmentSummary.of(header, 500))
    cp = Checkpoint(log_start=0, start=0, end=6, segments=window, state=PartitionState())
    raw = cp.to_json()
    assert json.loads(raw)["v"] == REFS_CHECKPOINT_VERSION
    assert Checkpoint.from_json(raw, key="k", start=0).segments == window
    alone = Checkpoint(log_start=0, start=0, end=1, segments=(plain,), state=PartitionState())
    assert json.loads(alone.to_json())["v"] == CHECKPOINT_VERSION
