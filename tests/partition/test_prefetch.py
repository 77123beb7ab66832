"""A read's own listing fetches whole the segments the read returns
(arrowlog/partition/prefetch.py): a new client's read costs a LIST and one
GET per segment, as a plain client's would, not a ranged GET of each head
first; only the range read, never for a filtered read, a short poll or a
column read of large segments; within a process-wide budget, past which
heads are read as before; and however the read ends, the budget comes back."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.config import Compression
from arrowlog.format.segment import codec, decode_segment, header
from arrowlog.partition import listing, prefetch, units
from arrowlog.partition.fetch import DECODE_AHEAD_MIN_BYTES
from arrowlog.storage import Blob, Store
from arrowlog.storage.wrappers import CountingStore

FIELDS: list[tuple[str, pa.DataType]] = [("x", pa.int64()), ("y", pa.string())]
SCHEMA = pa.schema(FIELDS)


def two(i: int, text: str = "") -> pa.RecordBatch:
    return pa.record_batch({"x": [i, i], "y": [text, text]}, schema=SCHEMA)


def written(store: Store, segments: int, partitions: int = 1, text: str = "") -> None:
    """Segments of two rows each (segment i holds offsets 2i and 2i + 1) and
    no checkpoint: every one is in the tail a new client lists."""
    log = arrowlog.connect(store)
    config = TopicConfig(checkpoint_interval=100, compression=Compression.NONE)
    log.create_topic("t", SCHEMA, partitions, config=config)
    for p in range(partitions):
        part = log.partition("t", p)
        for i in range(segments):
            part.append(two(i, text))


class Counting(CountingStore):
    """Also which segments were read whole."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.whole: list[str] = []

    def get(self, key: str) -> Blob:
        if "/segments/" in key:
            self.whole.append(key)
        return super().get(key)


@pytest.fixture(autouse=True)
def _budget_comes_back() -> Iterator[None]:
    assert prefetch.BUDGET.held == 0
    yield
    assert prefetch.BUDGET.held == 0, "a read kept bytes it did not hand back"


def test_a_new_clients_read_costs_a_list_and_one_get_per_segment(store: Store) -> None:
    written(store, 30)
    counting = Counting(store)
    table = arrowlog.connect(counting).read("t", 0)
    assert table["x"].to_pylist() == [i for i in range(30) for _ in (0, 1)]
    assert counting.counts["get_range"] == 0, "a head read before the segment itself"
    segments = {k: n for k, n in counting.keys_read.items() if "/segments/" in k}
    assert len(segments) == 30 and set(segments.values()) == {1}


@pytest.mark.parametrize("columns", [None, ["y"]], ids=["every-column", "some-columns"])
def test_a_new_clients_read_parses_a_large_segments_header_once(
    store: Store, monkeypatch: pytest.MonkeyPatch, columns: list[str] | None
) -> None:
    """The listing takes a large segment's header, statistics too, from the
    decoding its threads do anyway: a header parse is CPU the other fetches
    wait for."""
    written(store, 30, text="a" * (DECODE_AHEAD_MIN_BYTES // 2))
    parsed: list[str] = []
    real = header.header_from_metadata

    def counted(metadata: dict[bytes, bytes] | None, key: str, *, stats: bool = True) -> Any:
        parsed.append(key)
        return real(metadata, key, stats=stats)

    monkeypatch.setattr(header, "header_from_metadata", counted)
    monkeypatch.setattr(codec, "header_from_metadata", counted)
    table = arrowlog.connect(store).read("t", 0, columns=columns)
    assert table["y"].to_pylist() == ["a" * (DECODE_AHEAD_MIN_BYTES // 2)] * 60
    segments = [k for k in parsed if "/segments/" in k]
    assert len(segments) == len(set(segments)) == 30


@pytest.mark.parametrize("columns", [None, ["y"]], ids=["every-column", "some-columns"])
def test_a_new_clients_read_leaves_small_segments_to_the_reader_to_decode_once(
    store: Store, monkeypatch: pytest.MonkeyPatch, columns: list[str] | None
) -> None:
    """A small segment's check and decode are mostly Python: the listing's
    threads take only its header (checked by its own CRC) and keep its bytes;
    the read checks and decodes each, once, on its own thread, as it does
    those its own fetches bring (measured: a new client's read of 400 x 64 KiB
    segments on SeaweedFS 3-4% faster than with the listing's threads decoding
    them). Told apart by who calls: a lane may run a task on the thread that
    waits for it, so the thread alone would not say."""
    written(store, 30, text="abc")
    decoded: dict[str, list[str]] = {"listing": [], "read": []}

    def counted(by: str) -> Any:
        def decode(data: Blob, *, key: str, **kwargs: Any) -> Any:
            decoded[by].append(key)
            return decode_segment(data, key=key, **kwargs)

        return decode

    monkeypatch.setattr(listing, "decode_segment", counted("listing"))
    monkeypatch.setattr(units, "decode_segment", counted("read"))
    table = arrowlog.connect(store).read("t", 0, columns=columns)
    assert table["y"].to_pylist() == ["abc"] * 60
    assert [key for key in decoded["listing"] if "/segments/" in key] == []
    keys = [key for key in decoded["read"] if "/segments/" in key]
    assert len(keys) == len(set(keys)) == 30


def test_a_read_of_part_of_the_log_fetches_whole_only_the_segments_it_returns(
    store: Store,
) -> None:
    written(store, 20)
    for read in ("partition", "consumer"):
        counting = Counting(store)
        log = arrowlog.connect(counting)
        if read == "partition":
            table = log.partition("t", 0).read(10, 20)
        else:
            table = log.read("t", 0, 10, 20)
        assert table["x"].to_pylist() == [5, 5, 6, 6, 7, 7, 8, 8, 9, 9]
        assert sorted(counting.whole) == [
            log.partition("t", 0).segment_key(2 * i) for i in range(5, 10)
        ]
        assert counting.counts["get_range"] == 15, read  # the others' heads only


def test_past_the_budget_the_listing_reads_heads(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    written(store, 12)
    size = max(o.size for o in store.list("t/0/segments/"))
    budget = prefetch.Budget(4 * size)
    monkeypatch.setattr(prefetch, "BUDGET", budget)
    counting = Counting(store)
    assert arrowlog.connect(counting).read("t", 0).num_rows == 24
    assert len(counting.whole) == 12
    assert counting.counts["get_range"] == 8
    assert budget.held == 0


def test_a_stream_a_filtered_read_and_a_short_poll_fetch_nothing_ahead(store: Store) -> None:
    """A stream promises flat memory however long its range: it reads heads."""
    written(store, 10)
    for stream in ("log", "partition"):
        counting = Counting(store)
        log = arrowlog.connect(counting)
        if stream == "log":
            batches = log.iter_batches("t", 0)
        else:
            batches = log.partition("t", 0).iter_batches()
        assert sum(b.num_rows for b in batches) == 20
        assert counting.counts["get_range"] == 10 and len(counting.whole) == 10, stream
    counting = Counting(store)
    table = arrowlog.connect(counting).read("t", 0, where=[("x", ">=", 8)])
    assert table["x"].to_pylist() == [8, 8, 9, 9]
    # the heads say which segments may match (their statistics): only those are read
    assert counting.counts["get_range"] == 10 and len(counting.whole) == 2
    counting = Counting(store)
    records = arrowlog.connect(counting).consumer().iter_records("t", 0, max_records=2)
    assert [r.batch.num_rows for r in records] == [2]
    assert counting.counts["get_range"] == 10 and len(counting.whole) == 1


def test_a_column_read_of_large_segments_fetches_their_columns_not_the_whole(
    store: Store,
) -> None:
    written(store, 3, text="y" * (600 * 1024))  # over COLUMN_READ_MIN_BYTES each
    counting = Counting(store)
    table = arrowlog.connect(counting).read("t", 0, columns=["x"])
    assert table["x"].to_pylist() == [0, 0, 1, 1, 2, 2]
    assert counting.whole == []
    assert counting.bytes_read["get_range"] < 3 * 1024 * 1024 // 4


def test_a_read_stopped_early_or_failing_gives_the_budget_back(store: Store) -> None:
    written(store, 10)
    part = arrowlog.connect(store, config=arrowlog.LogConfig(read_ahead=1)).partition("t", 0)
    with part.reading():  # a read that stops after its first batch
        batches = part.iter_batches()
        assert next(batches).num_rows == 2
        assert prefetch.BUDGET.held > 0  # the other nine are kept for the read
        batches.close()
    assert prefetch.BUDGET.held == 0
    key = "t/0/segments/00000000000000000010.arrow"
    data = bytearray(store.get(key))
    data[len(data) // 2] ^= 0x10  # the body, not the header: the listing takes it
    store.delete(key)
    store.put_if_absent(key, bytes(data))
    with pytest.raises(arrowlog.CorruptSegmentError, match=key):
        arrowlog.connect(store).read("t", 0)


@pytest.mark.parametrize("large", [True, False], ids=["large", "small"])
def test_a_read_inside_another_on_one_partition_gets_its_own_columns(
    store: Store, large: bool
) -> None:
    """A read inside another in one thread has its listing fill the outer
    read's prefetch (its range and columns): a segment decoded for one read's
    columns is never handed to a read of others, which fetches it itself. A
    small segment is kept as its bytes (the reading thread decodes it), which
    fit any read: the inner read takes them."""
    text = "t" * (DECODE_AHEAD_MIN_BYTES // 2 if large else 1)
    written(store, 8, text=text)
    full = pa.table({"x": [i for i in range(8) for _ in (0, 1)], "y": [text] * 16}, schema=SCHEMA)
    for outer, inner in ((["x"], ["y"]), (["x"], None), (None, ["y", "x"]), (["y"], ["y"])):
        counting = Counting(store)
        part = arrowlog.connect(counting).partition("t", 0)
        with part.reading(columns=outer):  # another read, planned, not yet listed
            table = part.read(columns=inner)
        assert table.equals(full if inner is None else full.select(inner)), (outer, inner)
        # kept for the outer's columns: fetched again
        twice = 2 if large and outer != inner else 1
        assert len(counting.whole) == 8 * twice, (outer, inner)


def test_a_read_of_every_partition_costs_one_get_per_segment(store: Store) -> None:
    written(store, 6, partitions=3)
    counting = Counting(store)
    assert arrowlog.connect(counting).read("t").num_rows == 36
    assert len(counting.whole) == 18
    # a snapshot asks past each partition's end for what a listing missed: no head
    assert counting.counts["get_range"] == 3
    counting = Counting(store)
    uncommitted = arrowlog.connect(counting).consumer(isolation_level="read_uncommitted")
    assert uncommitted.read("t").num_rows == 36
    assert counting.counts["get_range"] == 0 and len(counting.whole) == 18
