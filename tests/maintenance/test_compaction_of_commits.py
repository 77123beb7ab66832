"""Compacting windows that hold commit objects (docs/protocol.md,
"Compacting small segments" and "Staged appends"): the batches are read
from their staged objects, the compacted object holds one run per batch,
its index keeps each commit with the batches it names (as the checkpoints
do), and vacuum removes a compacted commit with its staged objects; readers
below the compaction mark read the same rows before and after, through a
corrupt checkpoint too.

Time is never waited for: :class:`ClockStore` and :class:`Clocks` move the
store's clock and this process's together. Every test runs on memory, a
local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.format.compacted_index import INDEX_KEY, CompactedIndex
from arrowlog.format.topic import checkpoint_key, parse_compacted_key, segment_key
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.partition import fetch_compacted
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from tests.support.clocks import Clocks, ClockStore
from tests.support.compaction import flip_bit, scanned
from tests.support.schedules import FAST, SCHEMA, rows, visible
from tests.support.staged import (
    TwoWriters,
    append_staged,
    named_by_commits,
    staged_keys,
    staged_writer,
)

MIN = 60_000
DELAY = 15 * MIN
CONFIG = TopicConfig(checkpoint_interval=2, delete_delay_ms=DELAY)


def log_of_commits(clock: ClockStore) -> arrowlog.ArrowLog:
    """Topic t, windows of two objects: offsets 0-7 alternate plain segments
    and commits of one staged batch, 8 plain, [9, 11) a commit of two
    staged batches, then plain segments 11-14. Compaction takes [0, 13):
    the newest window, [13, 15), stays."""
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic("t", SCHEMA, config=CONFIG)
    writer = staged_writer(clock)
    for v in range(0, 6, 2):
        append_staged(clock, writer, v + 1, v)
    TwoWriters(clock).commit_two((6, 7, 8), (9, 10))
    for v in range(11, 15):
        log.append("t", rows(v))
    return log


def every_read(store: Store) -> tuple[list[Any], list[int], list[Any]]:
    """The log's, the read_committed consumer's and the Spark planner's rows
    of partition 0, by fresh clients."""
    log = arrowlog.connect(store)
    column = log.partition("t", 0).read().column("v").to_pylist()
    planned = scanned(log).column("v").to_pylist()
    return column, visible(log.consumer()), planned


def test_a_window_of_commits_compacts_into_a_run_per_batch_indexed_as_checkpointed(
    clock: ClockStore, clocks: Clocks
) -> None:
    log_of_commits(clock)
    named = named_by_commits(clock)
    assert {b: len(k) for b, k in named.items()} == {1: 1, 3: 1, 5: 1, 7: 1, 9: 2}
    before = every_read(clock)

    (done,) = arrowlog.connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)

    assert done.key is not None
    span = parse_compacted_key(done.key)
    assert span is not None
    header, _ = fetch_compacted(clock, done.key, *span)
    assert header.compaction is not None
    assert [run[0] for run in header.compaction.runs] == list(range(13))
    raw = header_metadata(clock, done.key)[INDEX_KEY]
    index = CompactedIndex.from_json(raw, key=done.key, start=0, end=13)
    commits = {s.base: [f"t/0/{b.at}" for b in s.refs] for s in index.segments if s.refs}
    assert commits == named
    assert every_read(clock) == before
    assert (done.start, done.end, done.segments, done.staged) == (0, 13, 12, 6)


def test_vacuum_removes_compacted_commits_with_their_staged_objects_and_reads_stay(
    clock: ClockStore, clocks: Clocks
) -> None:
    log_of_commits(clock)
    named = named_by_commits(clock)
    before = every_read(clock)
    arrowlog.connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(DELAY + MIN)

    removed = [r.key for r in arrowlog.connect(clock).maintenance.vacuum(["t"])]

    for base, keys in named.items():
        for key in keys:
            assert removed.index(key) < removed.index(segment_key("t", 0, base))
    assert staged_keys(clock) == set()
    assert every_read(clock) == before
    # a corrupt checkpoint of a window of commits: rebuilt from the object's index
    flip_bit(clock, checkpoint_key("t", 0, 8))  # [8, 11): 8 and the commit
    with pytest.warns(RuntimeWarning, match="skipping an unusable checkpoint"):
        assert every_read(clock) == before


def test_a_dry_run_counts_the_staged_objects_and_their_bytes(
    clock: ClockStore, clocks: Clocks
) -> None:
    log_of_commits(clock)
    sizes = {i.key: i.size for i in clock.list("t/0/")}
    stored = sum(
        size
        for key, size in sizes.items()
        if "/staged/" in key or any(key == segment_key("t", 0, b) for b in range(13))
    )

    (planned,) = arrowlog.connect(clock).maintenance.compact(dry_run=True)

    assert (planned.segments, planned.staged, planned.bytes_before) == (12, 6, stored)


def header_metadata(store: Store, key: str) -> dict[bytes, bytes]:
    reader = pa.ipc.open_file(pa.py_buffer(bytes(store.get(key))))
    return dict(reader.schema.metadata or {})


def test_a_read_from_a_log_start_inside_a_commit_reads_the_compacted_range_after_it(
    clock: ClockStore, clocks: Clocks
) -> None:
    """Records deleted up to the middle of a commit object of two batches:
    that object straddles the log start, so compaction begins after it, and
    an aborted transaction's record lies in the compacted range. A reader
    from the log start (a consumer from the earliest offset) reads the
    straddling object from its staged objects and the rest from the
    compacted object: read_uncommitted sees what read_committed does there
    (the aborted record is left out of the compacted object), and once the
    segments are vacuumed no request asks for one of them, and the Spark
    readers' plan reads them too. (The cover of compacted objects began at
    the straddling object and, finding none there, covered nothing: the
    reader read every segment, the aborted record too; after the vacuum it
    asked for each removed segment, and the plan's tasks named them: its
    read failed with SegmentNotFoundError, "its records are lost".)"""
    log = log_of_commits(clock)
    txn = log.producer(transactional_id="a")
    txn.init_transactions()
    txn.begin_transaction()
    txn.send("t", rows(100), partition=0)  # offset 15
    txn.abort_transaction()  # its marker at 16
    for v in range(17, 23):
        log.append("t", rows(v))
    assert log.delete_records("t", 0, 10) == 10  # inside the commit of [9, 11)
    (done,) = arrowlog.connect(clock).maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    assert done.start == 11 and done.end > 16
    wanted = [9, *range(11, 15), *range(17, 23)]  # the commit holds 10 then 9

    uncommitted = arrowlog.connect(clock).consumer(isolation_level="read_uncommitted")
    assert uncommitted.read("t", 0).column("v").to_pylist() == wanted
    assert visible(arrowlog.connect(clock).consumer()) == wanted

    clocks.advance(DELAY + MIN)
    removed = {r.key for r in arrowlog.connect(clock).maintenance.vacuum(["t"])}
    assert segment_key("t", 0, 12) in removed
    counting = CountingStore(clock)
    reader = arrowlog.connect(counting).consumer(isolation_level="read_uncommitted")
    assert reader.read("t", 0).column("v").to_pylist() == wanted
    assert not removed & set(counting.keys_read)
    for isolation in ("read_uncommitted", "read_committed"):  # the Spark readers' plan
        counting.reset()
        planned = scanned(arrowlog.connect(counting), isolation_level=isolation)
        assert planned.column("v").to_pylist() == wanted
        assert not removed & set(counting.keys_read)
