"""The main job: arrowlog's core on an embedded local-directory store.

1. generates a dataset of events (Parquet, deterministic);
2. creates the topic ``events`` with 4 partitions;
3. bulk-loads each partition with expected offsets (restartable: rerun the job,
   or kill it and rerun, and nothing is written twice);
4. reads a range back, checks it against the input, and prints a summary.

    python -m spark_jobs.demo [--root DIR_OR_URL] [--rows N]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import arrowlog
from arrowlog.bulkload import bulk_load

PARTITIONS = 4


def generate(path: Path, rows: int) -> pa.Table:
    ids = pa.array(range(rows), pa.int64())
    table = pa.table(
        {
            "event_id": ids,
            "user": pc.cast(pc.multiply(pc.bit_wise_and(ids, 1023), 7919), pa.int32()),
            "kind": pa.array(
                ["view", "click", "cart", "buy"] * (rows // 4) + ["view"] * (rows % 4)
            ),
            "amount": pc.divide(pc.cast(pc.bit_wise_and(ids, 4095), pa.float64()), 100.0),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        pq.write_table(table, path)
    return pq.read_table(path)


def in_partition(data: pa.Table, partition: int) -> pa.Table:
    """The rows that go to ``partition``: event_id modulo the partition count."""
    slot = pc.bit_wise_and(data["event_id"], pa.scalar(PARTITIONS - 1, pa.int64()))
    return data.filter(pc.equal(slot, pa.scalar(partition, pa.int64())))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root", default="demo-store", help="arrowlog root (default: ./demo-store)"
    )
    parser.add_argument("--data", default="demo-data/events.parquet")
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rows-per-batch", type=int, default=50_000)
    args = parser.parse_args(argv)

    data = generate(Path(args.data), args.rows)
    log = arrowlog.connect(args.root)
    print(f"arrowlog demo: root={log.store.url}")
    if "events" not in log.list_topics():
        log.create_topic("events", data.schema, PARTITIONS)
        print(f"created topic events ({PARTITIONS} partitions) with schema {data.schema.names}")

    started = time.perf_counter()
    written = skipped = 0
    for p in range(PARTITIONS):
        rows = in_partition(data, p)
        result = bulk_load(
            log.partition("events", p),
            rows.to_batches(),
            start_offset=0,
            rows_per_batch=args.rows_per_batch,
        )
        written += result.rows_written
        skipped += result.rows_skipped
    load_s = time.perf_counter() - started
    print(f"bulk load: {written:,} rows written, {skipped:,} already in the log ({load_s:.2f} s)")

    started = time.perf_counter()
    full = log.read("events", 0)
    read_s = time.perf_counter() - started
    want = in_partition(data, 0)
    assert full.equals(want.combine_chunks()), "partition 0 differs from its input"
    sample = log.read("events", 1, 1_000, 1_005)
    print("offsets [1000, 1005) of partition 1:")
    for row in sample.to_pylist():
        print(f"  {row}")

    desc = log.describe_topic("events")
    print("partition  log start  high watermark  segments")
    for info in desc.partitions:
        print(
            f"{info.partition:>9}  {info.log_start_offset:>9}  "
            f"{info.high_watermark:>14,}  {info.segments:>8}"
        )
    total = sum(i.high_watermark for i in desc.partitions)
    rate = full.num_rows / read_s / 1e6 if read_s else float("inf")
    print(
        f"total {total:,} records; read back partition 0 ({full.num_rows:,} rows, "
        f"{rate:.1f} M rows/s): identical to input"
    )
    if total != data.num_rows:
        raise SystemExit(f"expected {data.num_rows:,} records in the log, found {total:,}")


if __name__ == "__main__":
    main()
