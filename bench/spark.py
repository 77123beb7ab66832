"""Spark over arrowlog versus Spark's own Parquet, on the same rows, in one run.

- read: a full-scan aggregate (``sum`` and ``count``) of a topic through
  ``spark.read.format("arrowlog")`` versus the same rows in Parquet files through
  Spark's built-in Parquet scan;
- write: ``df.write.format("arrowlog")`` (one transaction) versus
  ``df.write.parquet``.

Ratio = Spark Parquet time / arrowlog time (above 1: arrowlog is faster).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import arrowlog
from arrowlog.bulkload import bulk_load
from arrowlog.jobs._spark import local_session

ROWS = 6_000_000
PARTITIONS = 4


def timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def bench_spark(rows: int = ROWS, repeat: int = 3) -> dict[str, float]:
    spark = local_session("arrowlog-bench")
    with tempfile.TemporaryDirectory(prefix="arrowlog-bench-spark-") as tmp:
        root = str(Path(tmp) / "log")
        parquet = str(Path(tmp) / "parquet")
        source = spark.range(0, rows, 1, PARTITIONS).selectExpr(
            "id", "cast(id % 1000 as double) * 0.5 as value", "cast(id % 7 as int) as kind"
        )
        source.write.parquet(parquet)
        log = arrowlog.connect(root, {"fsync": False})
        table = spark.read.parquet(parquet).toArrow()
        log.create_topic("bench", table.schema.remove_metadata(), partitions=PARTITIONS)
        per = -(-table.num_rows // PARTITIONS)
        for p in range(PARTITIONS):
            part = table.slice(p * per, per).to_batches()
            bulk_load(log.partition("bench", p), part, start_offset=0, rows_per_batch=500_000)

        def read_arrowlog() -> None:
            df = spark.read.format("arrowlog").option("topic", "bench").load(root)
            result = df.agg({"value": "sum", "id": "count"}).collect()[0]
            assert result["count(id)"] == rows

        def read_parquet() -> None:
            df = spark.read.parquet(parquet)
            result = df.agg({"value": "sum", "id": "count"}).collect()[0]
            assert result["count(id)"] == rows

        reads: dict[str, list[float]] = {"arrowlog": [], "parquet": []}
        read_arrowlog()  # warm the Python workers and the page cache for both
        read_parquet()
        for _ in range(repeat):
            reads["parquet"].append(timed(read_parquet))
            reads["arrowlog"].append(timed(read_arrowlog))

        writes: dict[str, list[float]] = {"arrowlog": [], "parquet": []}
        for r in range(repeat):
            topic = f"out{r}"
            log.create_topic(topic, table.schema.remove_metadata(), partitions=PARTITIONS)
            writes["parquet"].append(
                timed(lambda r=r: source.write.parquet(str(Path(tmp) / f"pout{r}")))
            )
            writes["arrowlog"].append(
                timed(
                    lambda topic=topic: (
                        source.write.format("arrowlog")
                        .mode("append")
                        .option("topic", topic)
                        .option("storage.fsync", "false")
                        .save(root)
                    )
                )
            )
        med = {f"read_{k}_s": statistics.median(v) for k, v in reads.items()}
        med |= {f"write_{k}_s": statistics.median(v) for k, v in writes.items()}
    spark.stop()
    return {
        **med,
        "rows": float(rows),
        "read_arrowlog_mrows_s": rows / med["read_arrowlog_s"] / 1e6,
        "read_parquet_mrows_s": rows / med["read_parquet_s"] / 1e6,
        "read_ratio": med["read_parquet_s"] / med["read_arrowlog_s"],
        "write_ratio": med["write_parquet_s"] / med["write_arrowlog_s"],
    }


def print_spark(r: dict[str, float]) -> None:
    print(f"Spark, {int(r['rows']):,} rows, local[2] (median of 3)")
    print(
        f"  full-scan aggregate: arrowlog {r['read_arrowlog_s']:.2f} s "
        f"({r['read_arrowlog_mrows_s']:.2f} M rows/s), Parquet {r['read_parquet_s']:.2f} s "
        f"({r['read_parquet_mrows_s']:.2f} M rows/s), ratio {r['read_ratio']:.2f}"
    )
    print(
        f"  write: arrowlog {r['write_arrowlog_s']:.2f} s, Parquet {r['write_parquet_s']:.2f} s, "
        f"ratio {r['write_ratio']:.2f}"
    )
    print("  ratio = Parquet time / arrowlog time (goal >= 1.0 for the read)")


__all__ = ["bench_spark", "print_spark"]
