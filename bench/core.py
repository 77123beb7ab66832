"""Appends and reads against the fastest client a user could pick for the same
bytes on the same store, measured in the same run.

- append: ``append`` of 1 MiB and 64 KiB batches, one writer, one after the
  other and as a stream (``append_batches``), against obstore's own
  put-if-absent (``put(mode="create")``) of the very same segment bytes,
  through an obstore store built here, not through arrowlog;
- contention: 8 producers appending to one partition at once: aggregate
  throughput, and put-if-absent conflicts per append;
- read: ``log.read`` of a committed range (the whole partition, its end
  known) against obstore GETs of the same objects on 8 threads, decoded by
  pyarrow's IPC reader into one table; also read up to wherever the log
  ends (one LIST more); by a new client (against a new obstore client's LIST, then the GETs and
  decoding); each side in a process of its own (bench/sides.py); and the
  first read of what the appends wrote, by the client that wrote it (against
  the first GETs of what obstore put);
- projection: ``log.read(columns=[one])`` of 8 MiB segments of 10 columns
  against ``log.read`` of all 10.
"""

from __future__ import annotations

import io
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import obstore
import pyarrow as pa
import pyarrow.parquet as pq

import arrowlog
from arrowlog.config import Compression
from arrowlog.format.segment import SegmentHeader, encode_segment
from bench.backend import Backend
from bench.sides import OURS, Side


def make_batch(target_bytes: int) -> pa.RecordBatch:
    rows = target_bytes // 24
    return pa.record_batch(
        {
            "id": pa.array(range(rows), pa.int64()),
            "value": pa.array([i * 0.25 for i in range(rows)], pa.float64()),
            "flag": pa.array([i % 7 for i in range(rows)], pa.int64()),
        }
    )


def paired_ratio(baseline: list[float], ours: list[float]) -> float:
    """The median of each round's baseline time over ours. Run next to each
    other, both sides of a round share the machine's and the server's state,
    which drift from round to round on a shared 2-core machine (the same GETs
    took 170 to 290 ms within one run); a ratio of the two sides' medians
    compares rounds run under different conditions."""
    return statistics.median(b / o for b, o in zip(baseline, ours, strict=True))


def timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def segments_of(
    batch: pa.RecordBatch, count: int, compression: Compression = Compression.NONE
) -> list[memoryview]:
    """The segments ``count`` appends of ``batch`` write (offsets included), each
    in its own memory: one buffer written over and over would hand the baseline
    a CPU cache that no real writer has."""
    return [
        encode_segment(batch, header(i * batch.num_rows, batch.num_rows, f"{i:032x}"), compression)
        for i in range(count)
    ]


def header(offset: int, rows: int, append_id: str) -> SegmentHeader:
    return SegmentHeader(base_offset=offset, record_count=rows, timestamp_ms=0, append_id=append_id)


def config(compression: Compression) -> arrowlog.TopicConfig:
    return arrowlog.TopicConfig(max_batch_bytes=2**30, compression=compression)


def appended_topic(batch: pa.RecordBatch, compression: Compression, r: int) -> str:
    """Round ``r`` of :func:`bench_append`'s topics (``-ours``, ``-stream``)."""
    return f"append-{batch.nbytes}-{compression.value}-{r}"


def raw_key(batch: pa.RecordBatch, compression: Compression, r: int, i: int) -> str:
    """Where :func:`bench_append`'s baseline puts segment ``i`` of round ``r``."""
    return f"raw/{batch.nbytes}/{compression.value}/{r}/{i:08d}"


def bench_append(
    backend: Backend,
    batch: pa.RecordBatch,
    count: int,
    repeat: int,
    compression: Compression = Compression.NONE,
) -> dict[str, float]:
    """The baseline puts the very bytes the appends store (compressed alike).
    arrowlog appends one by one (``append`` in a loop: each waits for the one
    before) and as a stream (``append_batches``: the next batch encoded while
    the one before is written)."""
    segments = segments_of(batch, count, compression)
    log = arrowlog.connect(backend.url, backend.options)
    times: dict[str, list[float]] = {"ours": [], "stream": [], "raw": []}
    for r in range(repeat):
        topic = appended_topic(batch, compression, r)
        parts = {}
        for side in ("ours", "stream"):
            log.create_topic(f"{topic}-{side}", batch.schema, config=config(compression))
            parts[side] = log.partition(f"{topic}-{side}", 0)
            parts[side].end_offset()

        def append(part: arrowlog.PartitionLog = parts["ours"]) -> None:
            for _ in range(count):
                part.append(batch)

        def stream(part: arrowlog.PartitionLog = parts["stream"]) -> None:
            for _ in part.append_batches(batch for _ in range(count)):
                pass

        def put(r: int = r) -> None:
            for i, data in enumerate(segments):
                key = raw_key(batch, compression, r, i)
                obstore.put(backend.raw, key, data, mode="create")

        # rotate the order so no side always runs on a warmer server
        sides: list[tuple[str, Callable[[], None]]] = [
            ("ours", append),
            ("stream", stream),
            ("raw", put),
        ]
        for name, run in sides[r % 3 :] + sides[: r % 3]:
            times[name].append(timed(run))
    # throughput in the batch's own bytes, so that compressed and plain compare
    mib = count * pa.ipc.get_record_batch_size(batch) / 2**20
    rounds = max(repeat, FIRST_READ_ROUNDS)
    for r in range(repeat, rounds):  # more to read for the first time, written untimed
        topic = appended_topic(batch, compression, r)
        log.create_topic(f"{topic}-ours", batch.schema, config=config(compression))
        part = log.partition(f"{topic}-ours", 0)
        for _ in range(count):
            part.append(batch)
        for i, data in enumerate(segments):
            obstore.put(backend.raw, raw_key(batch, compression, r, i), data, mode="create")
    first = first_reads(backend, log, batch, count, rounds, compression)
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"segment_bytes": len(segments[0]), "arrowlog_mib_s": mib / t["ours"],
            "stream_mib_s": mib / t["stream"], "obstore_mib_s": mib / t["raw"],
            "ratio": t["raw"] / t["ours"], "stream_ratio": t["raw"] / t["stream"],
            "appends_per_s": count / t["ours"], "first_read_ratio": first}  # fmt: skip


#: first reads measured: each needs objects never read before, so a round
#: costs a partition's appends (and its baseline's puts); with 3 rounds, the
#: median of the ratios moved by 0.2 between runs of the same code, with 7 by
#: up to 0.15
FIRST_READ_ROUNDS = 11

#: rounds of a read of the same partition, per ``--repeat`` (30 by default): a
#: read is quick, and noisy; with 15 rounds, the medians of the same cells moved
#: by up to 0.09 between runs of the same code
READ_ROUNDS_PER_REPEAT = 10


def first_reads(
    backend: Backend,
    log: arrowlog.ArrowLog,
    batch: pa.RecordBatch,
    count: int,
    repeat: int,
    compression: Compression,
) -> float:
    """The first read of what :func:`bench_append` just wrote, by the client
    that appended it, against obstore GETs plus decoding of the very bytes
    its baseline put (read for the first time too: a store serves the first
    GET of a new object slower, whoever sends it), alternating which goes
    first; the median of the rounds' ratios (see :func:`paired_ratio`)."""
    rows = count * batch.num_rows
    pool = ThreadPoolExecutor(max_workers=8)
    times: dict[str, list[float]] = {"ours": [], "raw": []}
    for r in range(repeat):
        topic = f"{appended_topic(batch, compression, r)}-ours"

        def ours(topic: str = topic) -> None:
            assert log.read(topic, 0, 0, rows).num_rows == rows

        def raw(r: int = r) -> None:
            keys = [raw_key(batch, compression, r, i) for i in range(count)]
            assert backend.table(keys, pool).num_rows == rows

        sides: list[tuple[str, Callable[[], None]]] = [("ours", ours), ("raw", raw)]
        for name, run in sides if r % 2 else sides[::-1]:
            times[name].append(timed(run))
    pool.shutdown()
    return paired_ratio(times["raw"], times["ours"])


def bench_contention(
    backend: Backend, batch: pa.RecordBatch, writers: int, per_writer: int
) -> dict[str, float]:
    """``writers`` producers, each with its own connection, append to one
    partition at once; every offset is claimed by a put-if-absent race."""
    topic = f"contention-{batch.nbytes}-{uuid.uuid4().hex[:6]}"
    arrowlog.connect(backend.url, backend.options).create_topic(
        topic, batch.schema, config=config(Compression.NONE)
    )
    parts = [
        arrowlog.connect(backend.url, backend.options).partition(topic, 0) for _ in range(writers)
    ]
    start = threading.Barrier(writers + 1)

    def run(part: arrowlog.PartitionLog) -> None:
        part.end_offset()
        start.wait()
        for _ in range(per_writer):
            part.append(batch)

    threads = [threading.Thread(target=run, args=(p,)) for p in parts]
    for t in threads:
        t.start()
    start.wait()
    began = time.perf_counter()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    appends = writers * per_writer
    conflicts = sum(p.stats["conflicts"] for p in parts)
    size = pa.ipc.get_record_batch_size(batch)
    return {"writers": writers, "appends_per_s": appends / elapsed,
            "mib_s": appends * size / 2**20 / elapsed,
            "conflicts_per_append": conflicts / appends}  # fmt: skip


def read_spec(
    backend: Backend, topic: str, batch: pa.RecordBatch, count: int, compression: Compression
) -> dict[str, Any]:
    """A partition of ``count`` appends of ``batch`` in a new ``topic``, as
    a read side's spec (:class:`bench.sides.Side`)."""
    log = arrowlog.connect(backend.url, backend.options)
    log.create_topic(topic, batch.schema, config=config(compression))
    part = log.partition(topic, 0)
    for _ in range(count):
        part.append(batch)
    keys = [ref.key for ref in part.segments()]
    return {"name": backend.name, "url": backend.url, "options": backend.options,
            "raw_spec": backend.raw_spec, "topic": topic, "keys": keys,
            "rows": count * batch.num_rows}  # fmt: skip


def bench_read(
    backend: Backend,
    batch: pa.RecordBatch,
    count: int,
    repeat: int,
    compression: Compression = Compression.NONE,
) -> dict[str, float]:
    """The baseline fetches and decodes the very objects the log reads; each
    side reads in a process of its own (:mod:`bench.sides`)."""
    topic = f"read-{batch.nbytes}-{compression.value}"
    spec = read_spec(backend, topic, batch, count, compression)
    # each side next to its baselines in every round (ours, plain; cold, listed)
    runs = ("plain_crc", "ours", "plain", "to_end", "cold", "listed", "listed_crc")
    times: dict[str, list[float]] = {name: [] for name in runs}
    with Side(spec) as ours, Side(spec) as baseline:
        side = {name: ours if name in OURS else baseline for name in runs}
        for name in runs:  # each side's first reads (connections, pages) untimed
            side[name].time(name)
        for r in range(READ_ROUNDS_PER_REPEAT * repeat):
            for name in reversed(runs) if r % 2 else runs:
                times[name].append(side[name].time(name))
    mib = count * pa.ipc.get_record_batch_size(batch) / 2**20  # the batches' own bytes
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"arrowlog_mib_s": mib / t["ours"], "obstore_mib_s": mib / t["plain"],
            "ratio": paired_ratio(times["plain"], times["ours"]),
            "to_end_ratio": paired_ratio(times["plain"], times["to_end"]),
            "cold_ratio": paired_ratio(times["listed"], times["cold"]),
            "crc_ratio": paired_ratio(times["plain_crc"], times["ours"]),
            "cold_crc_ratio": paired_ratio(times["listed_crc"], times["cold"]),
            "ratio_of_medians": t["plain"] / t["ours"],
            "cold_ratio_of_medians": t["listed"] / t["cold"]}  # fmt: skip


def bench_projection(backend: Backend, segments: int = 12, repeat: int = 3) -> dict[str, float]:
    """One of 10 float64 columns of 8 MiB segments (stored plain, so each
    segment is 8 MiB) against all 10, the same partition, alternating: read
    again by the same connection (the segments' frames known), a committed
    range (its end known, as a planned read has it) and to the log's end (a
    LIST first, the same for both); and read first by a new connection in a
    process that never saw the segments (the frames read with the tail's
    headers)."""
    import numpy as np

    from arrowlog.partition.heads import HEADS

    rows = 8 * 2**20 // 80
    rng = np.random.default_rng(0)
    batch = pa.record_batch({f"c{i}": pa.array(rng.random(rows)) for i in range(10)})
    log = arrowlog.connect(backend.url, backend.options)
    topic = f"columns-{uuid.uuid4().hex[:6]}"
    log.create_topic(topic, batch.schema, config=config(Compression.NONE))
    for _ in range(segments):
        log.append(topic, batch)
    stored = sum(ref.size for ref in log.partition(topic, 0).segments())

    total = segments * rows

    def committed(columns: list[str] | None) -> Callable[[], None]:
        def run() -> None:  # its end known, as a planned read (Spark's) has it
            assert log.read(topic, 0, 0, total, columns=columns).num_rows == total

        return run

    def to_end(columns: list[str] | None) -> Callable[[], None]:
        def run() -> None:  # up to wherever the log ends now: a LIST first
            assert log.read(topic, columns=columns).num_rows == total

        return run

    def first(columns: list[str] | None) -> Callable[[], None]:
        def run() -> None:
            HEADS.clear()
            fresh = arrowlog.connect(backend.url, backend.options)
            assert fresh.read(topic, columns=columns).num_rows == total

        return run

    # The store's own ceiling for the same choice: the objects whole against
    # one ranged GET of the column's bytes each (a reader that knew where the
    # column lies without asking), through obstore from as many threads.
    keys = [ref.key for ref in log.partition(topic, 0).segments()]
    spans = [_column_span(backend.raw, key, 3) for key in keys]
    pool = ThreadPoolExecutor(max_workers=8)

    def raw_one() -> None:
        def get(key: str, span: tuple[int, int]) -> Any:
            return obstore.get_range(backend.raw, key, start=span[0], end=span[1])

        list(pool.map(get, keys, spans))

    def raw_every() -> None:
        list(pool.map(lambda k: obstore.get(backend.raw, k).bytes(), keys))

    runs = {"one": committed(["c3"]), "all": committed(None),
            "end_one": to_end(["c3"]), "end_all": to_end(None),
            "first_one": first(["c3"]), "first_all": first(None),
            "raw_one": raw_one, "raw_all": raw_every}  # fmt: skip
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(repeat):
        for name in reversed(runs) if r % 2 else runs:
            times[name].append(timed(runs[name]))
    pool.shutdown()
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"segment_mib": stored / segments / 2**20, "one_column_s": t["one"],
            "all_columns_s": t["all"], "speedup": t["all"] / t["one"],
            "end_one_column_s": t["end_one"], "end_all_columns_s": t["end_all"],
            "end_speedup": t["end_all"] / t["end_one"],
            "first_one_column_s": t["first_one"], "first_all_columns_s": t["first_all"],
            "first_speedup": t["first_all"] / t["first_one"],
            "store_ceiling": t["raw_all"] / t["raw_one"]}  # fmt: skip


def _column_span(store: Any, key: str, column: int) -> tuple[int, int]:
    """Where column ``column`` of a segment lies, from its column table."""
    from arrowlog.format.segment.column_table import COLUMNS_KEY, ColumnTable
    from arrowlog.format.segment.header import HEAD_BYTES, head_schema

    schema = head_schema(bytes(obstore.get_range(store, key, start=0, length=HEAD_BYTES)), key)
    assert isinstance(schema, pa.Schema) and schema.metadata is not None
    table = ColumnTable.parse(schema.metadata[COLUMNS_KEY], len(schema))
    assert table is not None, "8 MiB segments carry a column table"
    lo, hi, _ = table.columns[column]
    return lo, hi


def bench_bytes(backend: Backend, rows: int) -> dict[str, float]:
    """The demo's events (arrowlog/jobs/demo.py) in the log, in 50,000-row
    batches over its partitions, against the same rows in one ZSTD Parquet file:
    bytes on the store for each compression."""
    from arrowlog.jobs.demo import PARTITIONS, generate, in_partition

    with tempfile.TemporaryDirectory() as tmp:
        data = generate(Path(tmp) / "events.parquet", rows)
        sink = io.BytesIO()
        pq.write_table(data, sink, compression="zstd")
    parquet = len(sink.getvalue())
    log = arrowlog.connect(backend.url, backend.options)
    out: dict[str, float] = {"parquet_zstd_bytes": parquet}
    for codec in Compression:
        topic = f"bytes-{codec.value}-{uuid.uuid4().hex[:6]}"
        log.create_topic(topic, data.schema, PARTITIONS, config=config(codec))
        for p in range(PARTITIONS):
            part = log.partition(topic, p)
            for batch in in_partition(data, p).to_batches(max_chunksize=50_000):
                part.append(batch)
        stored = sum(o.size for o in log.store.list(f"{log.topic(topic).prefix}/"))
        out[f"{codec.value}_bytes"] = stored
        out[f"{codec.value}_vs_parquet"] = stored / parquet
    return out
