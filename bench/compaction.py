"""Reading a range of many small segments before and after compaction.

A partition of ``segments`` small appends (4 KiB batches, plain and
committed-transaction segments mixed in the proportion a streaming job gives:
one marker per transaction) is read whole, read_committed, by a new client;
then compacted (``log.maintenance.compact``), read again, and vacuumed after the delay.
The baseline is the same read before compaction, in the same run, through
the same client: arrowlog's own small-segment read, already measured against
obstore GETs + pyarrow by the core suite.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import arrowlog
from bench.backend import Backend
from bench.core import make_batch, timed

#: a short delay, so that vacuum can run within the benchmark
DELAY_MS = 100


def bench_compaction(backend: Backend, segments: int = 10_000, repeat: int = 3) -> dict[str, Any]:
    batch = make_batch(4 << 10)
    log = arrowlog.connect(backend.url, backend.options)
    topic = "compaction"
    config = arrowlog.TopicConfig(delete_delay_ms=DELAY_MS)
    log.create_topic(topic, batch.schema, config=config)
    part = log.partition(topic, 0)
    started = time.perf_counter()
    tx = log.producer(transactional_id="bench-compaction")
    tx.init_transactions()
    written = 0
    while written < segments:
        if written % 10 == 9:  # a transaction of 4 batches and its marker
            tx.begin_transaction()
            for _ in range(4):
                tx.send(topic, batch)
            tx.commit_transaction()
            tx.flush()
            written += 5
        else:
            part.append(batch)
            written += 1
    write_s = time.perf_counter() - started
    end = log.partition(topic, 0).end_offset()
    rows = log.consumer().read(topic, 0).num_rows
    store = log.store

    def count_objects() -> tuple[int, int]:
        infos = list(store.list(f"{topic}/0/"))
        return len(infos), sum(i.size for i in infos)

    def read() -> None:
        fresh = arrowlog.connect(backend.url, backend.options)
        assert fresh.consumer().read(topic, 0).num_rows == rows

    before_objects, before_bytes = count_objects()
    before = statistics.median(timed(read) for _ in range(repeat))
    compact_s = timed(lambda: _run(log.maintenance.compact, [topic]))
    after = statistics.median(timed(read) for _ in range(repeat))
    time.sleep(DELAY_MS / 1000 + 2.1)
    vacuum_s = timed(lambda: _run(log.maintenance.vacuum, [topic]))
    vacuumed = statistics.median(timed(read) for _ in range(repeat))
    after_objects, after_bytes = count_objects()
    return {
        "segments": float(len(part.segments(0, end))),
        "rows": float(rows),
        "write_s": write_s,
        "read_before_s": before,
        "compact_s": compact_s,
        "read_after_s": after,
        "vacuum_s": vacuum_s,
        "read_vacuumed_s": vacuumed,
        "speedup": before / vacuumed,
        "objects_before": float(before_objects),
        "objects_after": float(after_objects),
        "bytes_before": float(before_bytes),
        "bytes_after": float(after_bytes),
    }


def _run(call: Any, *args: Any) -> None:
    call(*args)


def print_compaction(name: str, c: dict[str, Any]) -> None:
    print(
        f"compaction on {name}: {c['segments']:,.0f} small segments ({c['rows']:,.0f} rows, "
        f"written in {c['write_s']:.0f} s): read_committed read of the range "
        f"{c['read_before_s']:.2f} s before, {c['read_after_s']:.2f} s after compaction "
        f"({c['compact_s']:.1f} s), {c['read_vacuumed_s']:.2f} s after vacuum "
        f"({c['vacuum_s']:.1f} s): {c['speedup']:.1f}x faster; objects "
        f"{c['objects_before']:,.0f} -> {c['objects_after']:,.0f}, bytes "
        f"{c['bytes_before'] / 1e6:.1f} -> {c['bytes_after'] / 1e6:.1f} MB"
    )
