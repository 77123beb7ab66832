"""A listing is not a snapshot (issue 7): a LIST racing appends can show segment
N+1 without N. Only the chain from a known end counts; keys past a gap are "not
visible yet", never an error and never cached. And what the listing can prove
missing (a segment a client or a checkpoint knew) is reported, never written over.

Every test runs on memory, a local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.format.segment import SegmentHeader, encode_segment
from arrowlog.format.topic import checkpoint_key, checkpoint_prefix, segment_key
from arrowlog.storage import Store
from arrowlog.testing.scripted import ScriptedStore
from tests.support.stores import StoreSpec
from tests.support.workers import RACE_SCHEMA

ROOT = Path(__file__).resolve().parents[2]

SCHEMA = pa.schema([("v", pa.int64())])


def rows(start: int, count: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(range(start, start + count))}, schema=SCHEMA)


def values(log: arrowlog.ArrowLog, start: int | None = None) -> list[int]:
    return [v for v in log.read("t", 0, start).column("v").to_pylist() if isinstance(v, int)]


def fill(log: arrowlog.ArrowLog, *sizes: int) -> list[int]:
    """Append segments of these sizes, holding consecutive values; their bases."""
    bases = []
    for n in sizes:
        bases.append(log.append("t", rows(log.end_offsets("t")[0], n)).base_offset)
    return bases


@pytest.fixture
def writer(store: Store) -> arrowlog.ArrowLog:
    log = arrowlog.connect(store)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=4))
    return log


def test_a_reader_whose_listing_hides_a_segment_sees_the_prefix_then_everything(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    scripted = ScriptedStore(store)
    long_lived = arrowlog.connect(scripted)
    assert long_lived.end_offsets("t") == {0: 0}
    assert fill(writer, 2, 3, 1) == [0, 2, 5]
    hidden = scripted.hide(segment_key("t", 0, 2), times=10**9)  # until told
    fresh = arrowlog.connect(scripted)
    for reader in (long_lived, fresh, long_lived, fresh):
        assert reader.end_offsets("t") == {0: 2}  # 5 is listed, but past the gap
        assert values(reader) == [0, 1]
        end, _ = reader.partition("t", 0).state()
        assert end == 2
    hidden.stop()
    for reader in (long_lived, fresh, arrowlog.connect(scripted)):
        assert reader.end_offsets("t") == {0: 6}
        assert values(reader) == list(range(6))
        assert [s.base for s in reader.partition("t", 0).summaries()] == [0, 2, 5]


def test_a_listing_that_misses_the_last_known_segment_is_not_data_loss(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    """The listing starts at the last segment a client knows, to notice a
    deleted one; a listing racing appends may miss it too. A HEAD decides: it is
    there, so nothing is lost and the client goes on."""
    scripted = ScriptedStore(store)
    reader = arrowlog.connect(scripted)
    assert fill(writer, 2, 3) == [0, 2]
    assert reader.end_offsets("t") == {0: 5}
    assert fill(writer, 1) == [5]
    scripted.hide(segment_key("t", 0, 2), times=1)
    assert reader.end_offsets("t") == {0: 6}
    assert values(reader) == list(range(6))
    assert reader.producer().send("t", rows(6, 1), partition=0).base_offset == 6


def test_a_writer_whose_listing_hides_a_segment_appends_at_the_end_and_checkpoints(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    scripted = ScriptedStore(store)
    other = arrowlog.connect(scripted)
    assert other.end_offsets("t") == {0: 0}
    assert fill(writer, 2, 3, 1) == [0, 2, 5]
    scripted.hide(segment_key("t", 0, 2), times=1)
    # Its PUT at 0 loses; the listing then ends the chain at 2; its PUT at 2 loses;
    # the next listing shows everything: it lands at the real end.
    assert other.append("t", rows(6, 1)).base_offset == 6
    cps = checkpoint_prefix("t", 0)
    assert len(list(store.list(cps))) == 1  # segments 0, 2, 5, 6: a full window
    assert fill(other, 2, 2, 2, 2) == [7, 9, 11, 13]
    assert len(list(store.list(cps))) == 2
    assert values(other) == values(arrowlog.connect(store)) == list(range(15))


def test_keys_past_a_gap_stay_invisible_until_the_gap_is_filled(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    # A segment at 5 with nothing before it: to any client it looks like a
    # listing that missed 0..4, so it is not part of the log (yet).
    orphan = encode_segment(
        rows(5, 1), SegmentHeader(base_offset=5, record_count=1, timestamp_ms=0, append_id="x")
    )
    store.put_if_absent(segment_key("t", 0, 5), orphan)
    assert writer.end_offsets("t") == {0: 0}
    assert writer.read("t", 0).num_rows == 0
    assert writer.append("t", rows(0, 5)).base_offset == 0
    assert writer.end_offsets("t") == {0: 6}  # the gap is filled: 5 continues the chain
    assert values(writer) == values(arrowlog.connect(store)) == list(range(6))


def test_a_deleted_segment_a_client_knew_is_reported_and_never_written_over(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    fill(writer, 2, 3, 1)
    knows = arrowlog.connect(store)
    assert knows.end_offsets("t") == {0: 6}
    key = segment_key("t", 0, 5)
    store.delete(key)
    before = [(o.key, o.size) for o in store.list("")]
    with pytest.raises(arrowlog.SegmentNotFoundError, match=key) as info:
        knows.end_offsets("t")
    assert not info.value.retriable
    with pytest.raises(arrowlog.SegmentNotFoundError, match=key):
        knows.append("t", rows(5, 1), expected_offset=5)
    with pytest.raises(arrowlog.SegmentNotFoundError, match=key):
        writer.read("t", 0)  # the writer knew it too
    assert [(o.key, o.size) for o in store.list("")] == before
    # What cannot be detected: a client that never saw the segment cannot tell
    # it from one not visible yet; to it, the log ends where the segment began.
    assert arrowlog.connect(store).end_offsets("t") == {0: 5}


def test_a_segment_a_client_knew_replaced_by_another_is_reported_and_never_written_over(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    """The root restored from an older copy under a client, and another
    record written since at the key of the last segment the client knew:
    the client's view is not the log's, and it says so rather than read or
    append by it. A new client reads the log as it is."""
    fill(writer, 2, 3, 1)  # the segments at 0, 2 and 5
    knows = arrowlog.connect(store)
    assert knows.end_offsets("t") == {0: 6}
    key = segment_key("t", 0, 5)
    store.delete(key)
    arrowlog.connect(store).append("t", rows(5, 2))  # [5, 7) where [5, 6) was
    before = [(o.key, o.size) for o in store.list("")]
    with pytest.raises(arrowlog.SegmentNotFoundError, match=f"{key}: segment replaced"):
        knows.end_offsets("t")
    with pytest.raises(arrowlog.SegmentNotFoundError, match="segment replaced"):
        knows.append("t", rows(7, 1), expected_offset=7)
    assert [(o.key, o.size) for o in store.list("")] == before
    assert values(arrowlog.connect(store)) == list(range(7))


def test_a_deleted_segment_that_ends_the_newest_checkpoint_is_reported_on_open(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    bases = fill(writer, 1, 2, 1, 2, 1)  # a checkpoint over the first four
    key = segment_key("t", 0, bases[3])
    store.delete(key)
    with pytest.raises(arrowlog.SegmentNotFoundError, match=key):
        arrowlog.connect(store).end_offsets("t")
    with pytest.raises(arrowlog.SegmentNotFoundError, match=key):
        writer.read("t", 0)  # it knows a later segment: reading finds the hole


@pytest.mark.slow
def test_readers_racing_writer_processes_never_fail(
    shared_store_spec: StoreSpec, tmp_path: Path
) -> None:
    """Readers (a long-lived one and a fresh one per round, in two processes) loop
    on end_offset and read while three processes append: listings race the
    appends all the time, and not one read may fail."""
    spec = shared_store_spec
    spec.connect().create_topic("race", RACE_SCHEMA, config=TopicConfig(checkpoint_interval=10))

    def start(kind: str, *extra: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-m", "tests.support.workers", kind, *spec.argv(), "--ready",
                "--seconds", "4", *extra]  # fmt: skip
        return subprocess.Popen(
            argv, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    out = tmp_path / "acked.jsonl"
    writers = [start("append_race", "--writer", str(w), "--count", "100000", "--out", str(out))
               for w in range(3)]  # fmt: skip
    readers = [start("read_race") for _ in range(2)]
    procs = writers + readers
    for proc in procs:  # every process has imported and connected
        assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    reports = []
    for proc in procs:
        report, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        reports.append(json.loads(report))
    print(reports)
    for report in reports[3:]:
        assert report["errors"] == [], report["errors"][:5]
        assert report["rounds"] > 2
    acked = [json.loads(line) for line in out.read_text().splitlines()]
    part = spec.connect().partition("race", 0)
    segments = part.segments()
    assert [s.base for s in segments] == sorted(offset for _, _, offset, _ in acked)
    assert part.end_offset() == sum(n for _, _, _, n in acked)
    assert sum(r.get("conflicts", 0) for r in reports[:3]) > 0, "the writers never raced"
    cps = list(spec.open().list(checkpoint_prefix("race", 0)))
    assert len(cps) == len(segments) // 10  # the writers never stopped checkpointing


# --- corrupt checkpoints ---------------------------------------------------------

SKIPPED = "skipping an unusable checkpoint"


def corrupt(store: Store, key: str) -> None:
    raw = bytearray(store.get(key))
    raw[len(raw) // 2] ^= 0x01  # the checksum no longer matches
    store.delete(key)
    store.put_if_absent(key, bytes(raw))


def test_a_corrupt_newest_checkpoint_is_skipped_for_the_one_before(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    fill(writer, *[1, 2, 3] * 3)  # windows [0, 7) and [7, 15) of 4 segments, a tail of 1
    newest = checkpoint_key("t", 0, 7)
    corrupt(store, newest)
    with pytest.warns(RuntimeWarning, match=f"{SKIPPED}: {newest}") as caught:
        reader = arrowlog.connect(store)
        assert reader.end_offsets("t") == {0: 18}
    assert len(caught) == 1
    assert values(reader) == list(range(18))
    assert [s.base for s in reader.partition("t", 0).summaries()] == [0, 1, 3, 6, 7, 9, 12, 13, 15]
    # A writer that opened that way completes the windows after it: the corrupt
    # one cannot be replaced (put-if-absent), the next is written whole.
    with pytest.warns(RuntimeWarning, match=SKIPPED):
        later = arrowlog.connect(store)
        fill(later, 1, 1, 1, 1)
    assert later.end_offsets("t") == {0: 22}
    fresh = arrowlog.connect(store)
    assert fresh.end_offsets("t") == {0: 22}  # from the new newest one: no warning
    with pytest.warns(RuntimeWarning, match=f"{SKIPPED}: {newest}"):
        assert values(fresh) == list(range(22))  # the window rebuilt from its headers
    with pytest.warns(RuntimeWarning, match=f"{SKIPPED}: {newest}"):
        assert values(arrowlog.connect(store), 10) == list(range(10, 22))


def test_with_every_checkpoint_corrupt_the_log_opens_from_its_start(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    fill(writer, *[2] * 9)  # windows [0, 8) and [8, 16), a tail of 1
    keys = [checkpoint_key("t", 0, 0), checkpoint_key("t", 0, 8)]
    for key in keys:
        corrupt(store, key)
    with pytest.warns(RuntimeWarning, match=SKIPPED) as caught:
        reader = arrowlog.connect(store)
        assert reader.end_offsets("t") == {0: 18}
    assert len(caught) == 2 and all(any(k in str(w.message) for w in caught) for k in keys)
    assert values(reader) == list(range(18))
    fill(reader, 2, 2, 2, 2)  # a third window, whose checkpoint is intact
    with pytest.warns(RuntimeWarning, match=SKIPPED):
        assert values(arrowlog.connect(store)) == list(range(26))


def test_a_corrupt_segment_is_never_skipped_when_a_checkpoint_is(
    store: Store, writer: arrowlog.ArrowLog
) -> None:
    fill(writer, *[2] * 9)
    corrupt(store, checkpoint_key("t", 0, 8))
    segment = segment_key("t", 0, 10)  # inside the window the checkpoint covered
    raw = bytearray(store.get(segment))
    raw[-20] ^= 0x01  # in the footer: the header still reads
    store.delete(segment)
    store.put_if_absent(segment, bytes(raw))
    with pytest.warns(RuntimeWarning, match=SKIPPED):
        reader = arrowlog.connect(store)
        assert reader.end_offsets("t") == {0: 18}
    with pytest.raises(arrowlog.CorruptSegmentError, match=segment):
        reader.read("t", 0)
