"""The main job: an exactly-once Spark pipeline on an embedded local-directory store.

1. generates a dataset of events (Parquet, deterministic);
2. backfills it into the topic ``events`` (4 partitions) with expected offsets;
3. transforms it with Spark into the topic ``purchases``, as one transaction
   (rerun-safe: ``txnAppId`` + ``txnVersion``; a rerun sees the version
   committed and skips the step without computing anything);
4. reads the committed result back with ``spark.read.format("arrowlog")``;
5. exports it to a Delta table exactly once;
6. prints a summary.

Run it again, or kill it anywhere and run it again: nothing is written twice.

    python -m arrowlog.jobs.demo [--root DIR_OR_URL] [--rows N]
    spark-submit spark_jobs/demo.py [--root DIR_OR_URL] [--rows N]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import arrowlog
from arrowlog.jobs._spark import local_session, submitted_session
from arrowlog.jobs.export_delta import export, read_delta
from arrowlog.producer.bulkload import bulk_load
from arrowlog.spark.sink import committed_version, save
from arrowlog.spark.writing import is_done

PARTITIONS = 4
#: the transform's idempotence key: a rerun of this version writes nothing
TRANSFORM_APP = "demo-transform"
TRANSFORM_VERSION = 1


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
    if not path.exists() or pq.ParquetFile(path).metadata.num_rows != rows:
        pq.write_table(table, path)
    return pq.read_table(path)


def in_partition(data: pa.Table, partition: int) -> pa.Table:
    """The rows that go to ``partition``: event_id modulo the partition count."""
    slot = pc.bit_wise_and(data["event_id"], pa.scalar(PARTITIONS - 1, pa.int64()))
    return data.filter(pc.equal(slot, pa.scalar(partition, pa.int64())))


def step(title: str) -> float:
    print(f"-- {title}", flush=True)
    return time.perf_counter()


def _positive(text: str) -> int:
    """An argparse type: a whole number above zero (else a one-line usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None, *, session: Callable[[str], Any] = local_session) -> int:
    """Run the demo; ``session(app)`` gives its Spark session (by default a
    local one; ``spark_jobs/demo.py`` passes the one spark-submit configured)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--root", default="demo-store", help="arrowlog root (default: ./demo-store)"
    )
    parser.add_argument("--data", default="demo-data/events.parquet")
    parser.add_argument("--delta", default="demo-data/purchases-delta")
    parser.add_argument("--rows", type=_positive, default=1_000_000)
    parser.add_argument("--rows-per-batch", type=_positive, default=50_000)
    args = parser.parse_args(argv)
    root = str(Path(args.root).resolve()) if "://" not in args.root else args.root

    step("generate the input dataset")
    data = generate(Path(args.data), args.rows)
    log = arrowlog.connect(root)
    print(f"   {data.num_rows:,} events in {args.data}; arrowlog root {log.store.url}")
    backfill(log, data, args.rows_per_batch)
    started = step("Spark: transform events into topic 'purchases' as one transaction")
    spark = session("arrowlog-demo")
    state = transform(spark, log, root)
    print(f"   transaction {state} ({time.perf_counter() - started:.1f} s)")
    expected = data.filter(pc.equal(data["kind"], pa.scalar("buy"))).num_rows
    count = read_back(spark, root, expected)
    export_to_delta(spark, log, root, args.delta, expected)
    stable = all(
        p.last_stable_offset == p.high_watermark for p in log.describe_topic("purchases").partitions
    )
    print(f"summary: {data.num_rows:,} events -> {count:,} purchases, each exactly once in "
          f"arrowlog and in Delta; LSO at the log end: {stable}")  # fmt: skip
    spark.stop()
    return 0


def submit(argv: list[str] | None = None) -> int:
    """The demo as ``spark-submit spark_jobs/demo.py`` runs it: on the session
    spark-submit configured (its master, jars and settings), not a local one."""
    return main(argv, session=submitted_session)


def backfill(log: arrowlog.ArrowLog, data: pa.Table, rows_per_batch: int) -> None:
    """Load ``data`` into topic ``events`` with expected offsets: a rerun
    finds every row there and writes none."""
    started = step("backfill into topic 'events' with expected offsets")
    if "events" not in log.list_topics():
        log.create_topic("events", data.schema, PARTITIONS)
    written = skipped = 0
    for p in range(PARTITIONS):
        result = bulk_load(
            log.partition("events", p),
            in_partition(data, p).to_batches(),
            start_offset=0,
            rows_per_batch=rows_per_batch,
        )
        written += result.rows_written
        skipped += result.rows_skipped
    print(f"   {written:,} rows written, {skipped:,} already in the log "
          f"({time.perf_counter() - started:.1f} s)")  # fmt: skip


def transform(spark: Any, log: arrowlog.ArrowLog, root: str) -> str:
    """The purchases among the events into topic ``purchases``, as one
    transaction keyed by :data:`TRANSFORM_APP` and :data:`TRANSFORM_VERSION`;
    what happened, in words."""
    if "purchases" not in log.list_topics():
        fields: list[pa.Field[Any]] = [
            pa.field("event_id", pa.int64()),
            pa.field("user", pa.int32()),
            pa.field("amount_with_tax", pa.float64()),
        ]
        schema = pa.schema(fields)
        log.create_topic("purchases", schema, PARTITIONS)
    # A rerun asks the log first: if this version was committed, the DataFrame
    # is never built, let alone computed (Spark would compute it only to have
    # the writer throw every row away).
    if is_done(committed_version(log, "purchases", TRANSFORM_APP), TRANSFORM_VERSION):
        return "already committed by an earlier run: skipped without computing it"
    events = spark.read.format("arrowlog").option("topic", "events").load(root)
    purchases = events.filter("kind = 'buy'").selectExpr(
        "event_id", "user", "round(amount * 1.2, 2) as amount_with_tax"
    )
    options = {
        "topic": "purchases",
        "keyColumn": "user",  # a user's purchases stay in one partition, in order
        "txnAppId": TRANSFORM_APP,
        "txnVersion": str(TRANSFORM_VERSION),
    }
    wrote = save(purchases, root, options)
    return "committed" if wrote else "already committed by an earlier run: nothing written"


def read_back(spark: Any, root: str, expected: int) -> int:
    """Read the committed purchases back with Spark, a line per partition;
    how many there are.

    Raises:
        SystemExit: not the ``expected`` number.
    """
    step("Spark: read the committed purchases back")
    result = spark.read.format("arrowlog").option("topic", "purchases").load(root)
    summary = result.groupBy("partition").agg({"amount_with_tax": "sum", "event_id": "count"})
    count = 0
    for row in summary.orderBy("partition").collect():  # one pass: no count() after it
        count += row["count(event_id)"]
        print(f"   partition {row['partition']}: {row['count(event_id)']:,} purchases, "
              f"{row['sum(amount_with_tax)']:,.2f} total")  # fmt: skip
    if count != expected:
        raise SystemExit(f"expected {expected:,} purchases, read {count:,}")
    return count


def export_to_delta(
    spark: Any, log: arrowlog.ArrowLog, root: str, delta: str, expected: int
) -> None:
    """Export the purchases to the Delta table at ``delta``, exactly once.

    Raises:
        SystemExit: the table does not hold the ``expected`` rows.
    """
    started = step("export purchases to Delta, exactly once")
    exported = export(spark, root, "purchases", delta, {})
    table = read_delta(delta)
    print(f"   {exported:,} rows exported now; the Delta table holds {table.num_rows:,} "
          f"({time.perf_counter() - started:.1f} s)")  # fmt: skip
    if table.num_rows != expected:
        raise SystemExit(f"the Delta table holds {table.num_rows:,} rows, expected {expected:,}")


if __name__ == "__main__":
    sys.exit(main())
