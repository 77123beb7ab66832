"""Logs holding commit objects and staged data objects, built as writers
build them (docs/protocol.md, "Staged appends"): a writer whose view of the
end is stale loses its first put and stages its batch; held before its
commit, another stale writer commits it with its own. No object is forged,
except :func:`stage_orphan`, which puts a staged object the way a writer
killed between its upload and its commit leaves one."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog import LogConfig
from arrowlog.config import Compression
from arrowlog.format.segment import (
    PLAIN_APPEND,
    Ref,
    SegmentHeader,
    WriterIdentity,
    encode,
    read_header,
)
from arrowlog.format.topic import StagedName, parse_segment_key, staged_at
from arrowlog.partition import AppendResult, PartitionLog
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from tests.support.clocks import ClockStore
from tests.support.schedules import FAST, PLAIN, Background, rows

STAGED = LogConfig(retry=FAST.retry, staged_appends=True)


def staged_writer(store: Store, topic: str = "t") -> PartitionLog:
    """Partition 0 of ``topic`` through a client with staged appends on."""
    return arrowlog.connect(store, config=STAGED).partition(topic, 0)


def append_staged(store: Store, writer: PartitionLog, value: int, other: int) -> AppendResult:
    """Another client appends ``other`` (a plain segment); then ``writer``,
    whose view is stale, appends ``value``: its batch is staged, and a
    commit object naming it alone lands at the end."""
    staged = writer.stats["staged"]
    writer.end_offset()
    arrowlog.connect(store, config=PLAIN).partition(writer.topic.name, 0).append(rows(other))
    result = writer.append(rows(value))
    assert writer.stats["staged"] == staged + 1, "the append was not staged"
    return result


class TwoWriters:
    """Writers A (through a ScriptedStore) and B of topic t, staged appends
    on. A writer helps another's batch only if it is the next of its
    producer's sequence in the chain (docs/protocol.md, "Staged appends")."""

    def __init__(self, clock: ClockStore) -> None:
        self.clock = clock
        self.scripted = ScriptedStore(clock)
        self.a = staged_writer(self.scripted)
        self.b = staged_writer(clock)

    def commit_two(self, plain: tuple[int, int, int], staged: tuple[int, int]) -> None:
        """Five batches at the end of the log (which must hold one already):
        ``plain[0]`` and ``plain[2]`` in segments, ``plain[1]`` in a commit
        object of A's naming it alone, then one commit object naming two
        staged batches, ``staged[1]``'s then ``staged[0]``'s. A and B follow
        the chain; a segment joins it; A, stale, loses its put and stages
        ``plain[1]``, committing it itself; A stages ``staged[0]`` and is
        held before its commit; B, stale, stages ``staged[1]`` and commits
        both; A's commit then loses (the schedule of
        tests/partition/test_staged_append_schedules.py). Once per pair."""
        a, b = self.a, self.b
        writer = arrowlog.connect(self.clock, config=PLAIN).partition("t", 0)
        for part in (a, b):
            part.end_offset()
        writer.append(rows(plain[0]))
        # A's plain[1] is staged and committed by A: the first batch of the
        # producer id its plain appends are staged under, which makes its
        # next one helpable (it follows that one in the chain)
        a.append(rows(plain[1]))
        assert a.stats["commits"] == 1, "A's first staged batch was not its own commit"
        held = self.scripted.hold("put_if_absent", "t/0/segments/*")  # A's commit (staged at once)
        run_a = Background(lambda: a.append(rows(staged[0])))
        held.wait_reached()
        writer.append(rows(plain[2]))
        b.append(rows(staged[1]))
        assert b.stats["helped"] == 1, "B's commit did not carry A's batch"
        held.release()
        assert isinstance(run_a.result(), AppendResult)


def put_staged(
    store: Any,
    batch: pa.RecordBatch,
    who: WriterIdentity = PLAIN_APPEND,
    *,
    writer_ms: int | None = None,
    topic: str = "t",
) -> str:
    """A staged data object of partition 0 as a writer stages it (named and
    encoded the same way), put with no commit naming it; its key."""
    now = int(time.time() * 1000) if writer_ms is None else writer_ms
    append_id = uuid.uuid4().hex
    name = StagedName(now, append_id, batch.num_rows, who.producer_id, who.producer_epoch,
                      who.base_sequence)  # fmt: skip
    header = SegmentHeader(base_offset=0, record_count=batch.num_rows, timestamp_ms=now,
                           append_id=append_id, identity=who, staged=True)  # fmt: skip
    data, _ = encode(batch, header, Compression.ZSTD)
    key = f"{topic}/0/{staged_at(name)}"
    store.put_if_absent(key, data)
    return key


def stage_orphan(store: Any, value: int, topic: str = "t") -> str:
    """A staged data object of partition 0 that no commit names, as a
    writer killed between its upload and its commit leaves it; its key."""
    return put_staged(store, rows(value), topic=topic)


def staged_keys(store: Store, topic: str = "t") -> set[str]:
    """Every staged data object of partition 0."""
    return {info.key for info in store.list(f"{topic}/0/staged/")}


def named_by_commits(store: Store, topic: str = "t") -> dict[int, list[str]]:
    """Base of each commit object stored in partition 0 -> the keys of the
    staged objects it names, in offset order."""
    out = {}
    for info in store.list(f"{topic}/0/segments/"):
        base = parse_segment_key(info.key)
        if base is None:
            continue
        header = read_header(bytes(store.get(info.key)), key=info.key)
        assert isinstance(header, SegmentHeader)
        if header.refs is not None:
            out[base] = [f"{topic}/0/{r.at}" for r in header.refs]
    return out


def stage_own(
    store: Any, batch: pa.RecordBatch, who: WriterIdentity, *, topic: str = "t", partition: int = 0
) -> Ref:
    """A transaction's staged data object as a JVM task uploads it (named
    with no producer, ``-t``; committed later by its own driver), and the ref
    a commit names it by, with the identity ``who``."""
    now = int(time.time() * 1000)
    append_id = uuid.uuid4().hex
    name = StagedName(now, append_id, batch.num_rows, transactional=True)
    header = SegmentHeader(base_offset=0, record_count=batch.num_rows, timestamp_ms=now,
                           append_id=append_id, identity=who, staged=True)  # fmt: skip
    data, _ = encode(batch, header, Compression.ZSTD)
    store.put_if_absent(f"{topic}/{partition}/{staged_at(name)}", data)
    return Ref(at=staged_at(name), record_count=batch.num_rows, size=len(data), timestamp_ms=now,
               append_id=append_id, identity=who)  # fmt: skip
