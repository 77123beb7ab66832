"""Column projection: ``columns=[...]`` on the log, the consumer and scans; large
segments carry a column table and are read column by column with ranged GETs,
every byte pyarrow parses checked against a CRC of the table; small and old
segments are read whole."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowlog
from arrowlog import (
    Compression,
    CorruptSegmentError,
    TopicConfig,
    UnknownColumnError,
)
from arrowlog.format.segment import (
    HEAD_BYTES,
    SegmentHeader,
    column_table,
    decode_columns,
    decode_segment,
    encode_segment,
)
from arrowlog.format.segment.column_table import COLUMNS_KEY, ColumnTable
from arrowlog.partition.fetch import COLUMN_READ_MIN_BYTES, fetch_segment
from arrowlog.partition.heads import HEADS, HeadCache
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from arrowlog.testing.scripted import ScriptedStore
from tests.support.stores import Untagged
from tests.support.strategies import record_batches

ROWS = 40_000
HEADER = SegmentHeader(base_offset=0, record_count=ROWS, timestamp_ms=10**12, append_id="a" * 32)


def wide(rows: int = ROWS, seed: int = 0) -> pa.RecordBatch:
    """Every kind of column layout: primitives, nulls, strings (dictionary-encoded
    when compressed), nested lists and structs, a null-typed column."""
    rng = np.random.default_rng(seed)
    return pa.record_batch(
        {
            "f": pa.array(rng.random(rows)),
            "i": pa.array(rng.integers(0, 1000, rows), mask=rng.random(rows) < 0.1),
            "kind": pa.array(np.array(["click", "view", "buy"])[rng.integers(0, 3, rows)]),
            "text": pa.array([f"row-{i}" for i in range(rows)]),
            "tags": pa.array([[i, None, i * 2][: i % 4] for i in range(rows)]),
            "point": pa.array([{"x": i, "y": float(i)} for i in range(rows)]),
            "nothing": pa.nulls(rows),
            "flag": pa.array(rng.random(rows) < 0.5),
        }
    )


def ranged(
    data: bytes, log: list[tuple[int, int]]
) -> Callable[[list[tuple[int, int]]], list[bytes]]:
    def fetch(spans: list[tuple[int, int]]) -> list[bytes]:
        log.extend(spans)
        return [data[lo:hi] for lo, hi in spans]

    return fetch


@pytest.mark.parametrize("codec", list(Compression))
def test_every_column_alone_reads_as_in_the_whole_segment(codec: Compression) -> None:
    batch = wide()
    data = bytes(encode_segment(batch, HEADER, codec))
    whole = decode_segment(data, key="k")[1]
    assert whole.equals(batch)
    for name in batch.schema.names:
        spans: list[tuple[int, int]] = []
        got = decode_columns(data[:16384], len(data), [name], ranged(data, spans), key="k")
        assert got is not None
        header, one = got
        assert header == HEADER
        assert one.schema.names == [name]
        assert one.column(0).equals(batch.column(name)), name
        # the rest of the frame (all before the body) and this column's bytes:
        # nothing else, not even the footer
        table = _table(data)
        lo, hi, _ = table.columns[batch.schema.names.index(name)]
        frame = max(0, table.body_start - 16384)
        assert sum(b - a for a, b in spans) == frame + hi - lo
        assert all(b <= table.body_end for _, b in spans)


def test_columns_come_in_the_order_asked_and_agree_with_a_whole_read() -> None:
    batch = wide()
    data = bytes(encode_segment(batch, HEADER, Compression.ZSTD))
    asked = ["flag", "kind", "f"]
    got = decode_columns(data[:16384], len(data), asked, ranged(data, []), key="k")
    assert got is not None
    assert got[1].equals(batch.select(asked))
    assert decode_segment(data, key="k", columns=asked)[1].equals(batch.select(asked))


def test_small_batches_carry_no_table_and_large_ones_do() -> None:
    small = encode_segment(wide(100), dataclasses.replace(HEADER, record_count=100))
    assert COLUMNS_KEY not in (pa.ipc.open_file(pa.py_buffer(small)).schema.metadata or {})
    data = bytes(encode_segment(wide(), HEADER))
    assert len(_table(data).columns) == wide().num_columns
    # the file's own checksum still covers everything, the table included
    assert decode_segment(data, key="k")[1].equals(wide())


def _table(data: bytes) -> ColumnTable:
    schema = pa.ipc.open_file(pa.py_buffer(data)).schema
    table = ColumnTable.parse(schema.metadata[COLUMNS_KEY], len(schema))
    assert table is not None
    return table


def _column_span(data: bytes, name: str) -> tuple[int, int]:
    schema = pa.ipc.open_file(pa.py_buffer(data)).schema
    lo, hi, _ = _table(data).columns[schema.names.index(name)]
    return lo, hi


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_a_flipped_byte_in_a_column_read_is_caught_and_one_in_another_is_never_fetched(
    codec: Compression,
) -> None:
    data = bytearray(encode_segment(wide(), HEADER, codec))
    lo, hi = _column_span(bytes(data), "f")
    data[(lo + hi) // 2] ^= 0x01
    flipped = bytes(data)
    with pytest.raises(CorruptSegmentError, match="column 'f'"):
        decode_columns(flipped[:16384], len(flipped), ["f"], ranged(flipped, []), key="k")
    spans: list[tuple[int, int]] = []
    got = decode_columns(flipped[:16384], len(flipped), ["flag"], ranged(flipped, spans), key="k")
    assert got is not None and got[1].column(0).equals(wide().column("flag"))
    assert not any(a <= (lo + hi) // 2 < b for a, b in spans)
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        decode_segment(flipped, key="k")  # a whole read still refuses it


def test_a_flipped_byte_in_the_frame_is_caught() -> None:
    clean = bytes(encode_segment(wide(), HEADER, Compression.ZSTD))
    table = _table(clean)
    # in the schema message, in the dictionaries and in the batch's metadata
    for at in (40, table.body_start // 2, table.body_start - 40):
        data = bytearray(clean)
        data[at] ^= 0x04
        bad = bytes(data)
        with pytest.raises(CorruptSegmentError):
            decode_columns(bad[:16384], len(bad), ["f"], ranged(bad, []), key="k")


def test_a_damaged_table_sends_the_reader_to_the_whole_segment() -> None:
    data = bytearray(encode_segment(wide(), HEADER))
    at = bytes(data).index(b"arrowlog-columns:") + len(b"arrowlog-columns:") + 3
    data[at] = ord("f") if data[at] != ord("f") else ord("e")
    bad = bytes(data)
    assert decode_columns(bad[:16384], len(bad), ["f"], ranged(bad, []), key="k") is None
    with pytest.raises(CorruptSegmentError, match="checksum mismatch"):
        decode_segment(bad, key="k", columns=["f"])


def test_a_truncated_segment_is_caught_where_its_bytes_are_needed() -> None:
    data = bytes(encode_segment(wide(), HEADER))
    lo, hi = _column_span(data, "f")
    short = data[: (lo + hi) // 2]
    with pytest.raises(CorruptSegmentError, match="short range read"):
        decode_columns(data[:16384], len(data), ["f"], ranged(short, []), key="k")
    # cut past the body: the column read needs none of what is gone (its bytes
    # are checked), a whole read refuses the object
    tailless = data[: len(data) - 100]
    got = decode_columns(data[:16384], len(data), ["f"], ranged(tailless, []), key="k")
    assert got is not None and got[1].column(0).equals(wide().column("f"))
    with pytest.raises(CorruptSegmentError):
        decode_segment(tailless, key="k")


def test_a_segment_without_a_table_reads_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments written before column tables (or too small for one)."""
    monkeypatch.setattr(column_table, "TABLE_MIN_BYTES", 1 << 40)
    data = bytes(encode_segment(wide(), HEADER))
    assert COLUMNS_KEY not in (pa.ipc.open_file(pa.py_buffer(data)).schema.metadata or {})
    assert decode_columns(data[:16384], len(data), ["f"], ranged(data, []), key="k") is None
    assert decode_segment(data, key="k", columns=["f"])[1].column(0).equals(wide().column("f"))


# --- through the log ---------------------------------------------------------------


def big_topic(store: Store, name: str = "t", segments: int = 3) -> pa.Table:
    log = arrowlog.connect(store)
    log.create_topic(name, wide().schema, config=TopicConfig(compression=Compression.NONE))
    batches = [wide(seed=s) for s in range(segments)]
    for b in batches:
        log.append(name, b)
    return pa.Table.from_batches(batches)


@pytest.mark.parametrize("tags", [True, False], ids=["tagged", "untagged"])
def test_a_column_of_large_segments_costs_its_bytes_and_one_request_a_known_segment(
    store: Store, tags: bool
) -> None:
    expected = big_topic(store)
    HEADS.clear()  # a process that never saw these segments
    counting = CountingStore(store) if tags else Untagged(store)
    log = arrowlog.connect(counting)
    sizes = [ref.size for ref in log.partition("t", 0).segments()]
    assert min(sizes) >= COLUMN_READ_MIN_BYTES
    for columns in (["f"], ["i"]):
        counting.reset()
        got = log.partition("t", 0).read(columns=columns)
        assert got.equals(expected.select(columns))
        assert counting.counts["get"] == 0
        # the frame was read with the tail's headers and kept: the column
        # alone, its tag naming the frame's object; without tags, the frame
        # again after the column says which object is at the key
        assert counting.counts["get_range"] == (1 if tags else 2) * len(sizes)
        assert sum(counting.bytes_read.values()) < sum(sizes) / 4
    HEADS.clear()  # frames forgotten: the head, then the column (then the head again)
    counting.reset()
    assert log.partition("t", 0).read(columns=["kind"]).equals(expected.select(["kind"]))
    assert counting.counts["get_range"] == (2 if tags else 3) * len(sizes)
    counting.reset()
    assert log.partition("t", 0).read().equals(expected)
    assert counting.counts["get"] == len(sizes)


def test_without_tags_the_frame_is_read_again_after_the_columns(store: Store) -> None:
    """Without tags, the frame read again must come after the column's bytes
    are in: read beside them, it could be the kept object's while the column
    comes from a stray put in between. The schedule holds the column's
    request: the frame's must not be sent meanwhile."""
    expected = big_topic(store, segments=1)
    scripted = ScriptedStore(Untagged(store))
    log = arrowlog.connect(scripted)
    log.partition("t", 0).segments()  # the index, and the segment's frame kept
    seen = len(scripted.history)

    def ranges() -> list[str]:
        return [key for op, key in scripted.history[seen:] if op == "get_range"]

    column = scripted.hold("get_range", "*/segments/*", nth=1)
    got: list[pa.Table] = []
    reader = threading.Thread(target=lambda: got.append(log.partition("t", 0).read(columns=["f"])))
    reader.start()
    column.wait_reached()
    time.sleep(0.2)  # time for a request sent beside it to arrive
    assert len(ranges()) == 1, "the frame was fetched before the column's bytes were in"
    column.release()
    reader.join(30)
    assert got and got[0].equals(expected.select(["f"]))
    assert len(ranges()) == 2  # the column, then the frame


def test_a_known_frame_never_vouches_for_another_object_at_its_key(store: Store) -> None:
    """A key freed by a removal can hold another object later (rule 3): a
    frame kept under the old object's append id is not used for it. Its column
    bytes fail the kept table's CRCs, the head is read again, and the object
    is read as what it is."""
    big_topic(store, segments=1)
    log = arrowlog.connect(store)
    ref = log.partition("t", 0).segments()[0]
    assert ref.append_id is not None
    assert log.partition("t", 0).read(columns=["f"]).num_rows == ROWS
    assert HEADS.get(ref.key, ref.append_id) is not None
    other = wide(seed=7)
    header = SegmentHeader(
        base_offset=0, record_count=ROWS, timestamp_ms=10**12, append_id="b" * 32
    )
    store.delete(ref.key)
    store.put_if_absent(ref.key, encode_segment(other, header))
    size = store.head(ref.key).size
    got_header, got = fetch_segment(
        store, ref.key, 0, ROWS, columns=["f"], size=size, append_id=ref.append_id
    )
    assert got_header.append_id == "b" * 32  # the object's own, for the caller to refuse
    assert got.column("f").equals(other.column("f"))
    assert HEADS.get(ref.key, ref.append_id) is None


def test_the_head_cache_keeps_to_its_byte_limit() -> None:
    cache = HeadCache(limit_bytes=10)
    cache.keep("a", "1", b"12345", "tag-a")
    cache.keep("b", "1", b"12345", None)
    assert cache.get("a", "1") == (b"12345", "tag-a")  # now the most recent
    cache.keep("c", "1", b"123", None)
    assert cache.get("b", "1") is None and cache.get("a", "1") is not None
    assert cache.get("a", "2") is None  # another object at the same key
    cache.offer("d", "1", b"short", None)  # the whole object: never read by columns
    assert cache.get("d", "1") is None


def test_small_segments_are_read_whole_with_columns(store: Store) -> None:
    log = arrowlog.connect(store)
    log.create_topic("s", wide().schema)
    log.append("s", wide(500))
    counting = CountingStore(store)
    reader = arrowlog.connect(counting)
    reader.partition("s", 0).read()
    counting.reset()
    got = reader.partition("s", 0).read(columns=["kind", "f"])
    assert got.equals(pa.Table.from_batches([wide(500)]).select(["kind", "f"]))
    assert counting.counts["get"] == 1 and counting.counts["get_range"] == 0


def test_the_consumer_reads_columns_of_committed_transactions_only(store: Store) -> None:
    expected = big_topic(store, segments=1)
    log = arrowlog.connect(store)
    producer = log.producer(transactional_id="p")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", wide(seed=7))
    producer.abort_transaction()
    producer.begin_transaction()
    producer.send("t", wide(seed=8))
    producer.commit_transaction()
    producer.close()
    consumer = log.consumer()
    want = pa.concat_tables([expected, pa.Table.from_batches([wide(seed=8)])])
    assert consumer.read("t", columns=["i", "kind"]).equals(want.select(["i", "kind"]))
    records = list(consumer.iter_records("t", columns=["flag"]))
    assert [r.offset for r in records] == [0, 2 * ROWS + 1]
    assert all(r.batch.schema.names == ["flag"] for r in records)
    tables = consumer.read_many({("t", 0): (0, None)}, columns=["point"])
    assert tables[("t", 0)].equals(want.select(["point"]))
    uncommitted = log.consumer(isolation_level="read_uncommitted")
    assert uncommitted.read("t", columns=["f"]).num_rows == 3 * ROWS


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["nope"], "no column 'nope'"),
        (["f", "f"], "named twice"),
        ([], "non-empty list"),
        ("f", "non-empty list"),
    ],
)
def test_bad_columns_fail_before_any_segment_is_read(
    store: Store, columns: list[str], message: str
) -> None:
    big_topic(store, segments=1)
    counting = CountingStore(store)
    log = arrowlog.connect(counting)
    log.topic("t")
    reads: list[Callable[[], object]] = [
        lambda: log.partition("t", 0).read(columns=columns),
        lambda: log.consumer().read("t", columns=columns),
        lambda: log.consumer(isolation_level="read_uncommitted").read("t", columns=columns),
        lambda: list(log.consumer().iter_records("t", columns=columns)),
        lambda: log.consumer().read_many({("t", 0): (0, None)}, columns=columns),
    ]
    for read in reads:
        counting.reset()
        with pytest.raises(UnknownColumnError, match=message):
            read()
        assert counting.counts["get"] + counting.counts["get_range"] == 0


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=record_batches(), codec=st.sampled_from(list(Compression)), data=st.data())
def test_any_columns_of_any_batch_read_by_range_as_whole(
    batch: pa.RecordBatch, codec: Compression, data: st.DataObject
) -> None:
    """Random schemas (nested, dictionaries, every primitive) with a column table
    forced on: a random subset of columns read by ranges equals the same columns
    of the batch, or the table was left blank and the segment is read whole."""
    if batch.num_columns == 0 or len(set(batch.schema.names)) != batch.num_columns:
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(column_table, "TABLE_MIN_BYTES", 0)
        header = dataclasses.replace(HEADER, record_count=batch.num_rows)
        encoded = bytes(encode_segment(batch, header, codec))
    names = data.draw(
        st.lists(st.sampled_from(batch.schema.names), min_size=1, unique=True), label="columns"
    )
    got = decode_columns(encoded[:HEAD_BYTES], len(encoded), names, ranged(encoded, []), key="k")
    want = decode_segment(encoded, key="k", columns=names)[1]
    assert want.equals(batch.select(names))
    if got is not None:
        assert got[1].equals(want)
