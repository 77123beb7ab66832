"""Spark over arrowlog versus Spark's own Parquet, on the same rows, in one run.

- read: a full-scan aggregate (``sum`` of every column, and ``count``) of a topic
  of 10 columns through ``spark.read.format("arrowlog")`` with the JVM reader and
  with the Python one, versus the same rows in Parquet files through Spark's
  built-in Parquet scan; then the same with 2 of the 10 columns;
- read on SeaweedFS: the JVM reader against the Python one over the same topic;
- planning: what a query waits for its plan (the planner's own time beside);
- the full scan again over the same rows in an LZ4 topic (the JVM reader);
- write: ``df.write.format("arrowlog")`` (one transaction) versus
  ``df.write.parquet``.

Ratio = baseline time / arrowlog time (above 1: arrowlog is faster).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import arrowlog
from arrowlog.jobs._spark import local_session
from arrowlog.producer.bulkload import bulk_load

ROWS = 6_000_000
PARTITIONS = 4
COLUMNS = 10
TWO = ["c3", "c7"]
#: rounds of the write measures (each of the three writes once a round)
WRITE_ROUNDS = 5


def timed(run: Any) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def _median(runs: dict[str, Callable[[], Any]], repeat: int) -> dict[str, float]:
    """Each run once to warm up, then ``repeat`` rounds, alternating: medians."""
    for run in runs.values():
        run()
    times: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(repeat):
        for name in reversed(runs) if r % 2 else runs:
            times[name].append(timed(runs[name]))
    return {name: statistics.median(t) for name, t in times.items()}


def _load(
    root: str,
    storage: dict[str, Any],
    parquet: str,
    topic: str,
    config: arrowlog.TopicConfig | None = None,
) -> None:
    import pyarrow.parquet as pq

    log = arrowlog.connect(root, storage)
    table = pq.read_table(parquet)  # not through the driver: 6 M rows of 10 columns
    log.create_topic(topic, table.schema.remove_metadata(), partitions=PARTITIONS, config=config)
    per = -(-table.num_rows // PARTITIONS)
    for p in range(PARTITIONS):
        part = table.slice(p * per, per).to_batches()
        bulk_load(log.partition(topic, p), part, start_offset=0, rows_per_batch=500_000)


def bench_spark(rows: int = ROWS, repeat: int = 3, s3: Any = None) -> dict[str, float]:
    """``s3``: a running SeaweedFS (:class:`arrowlog.testing.seaweedfs.S3Server`) for the
    JVM-against-Python read there, or None to leave it out."""
    spark = local_session("arrowlog-bench")
    out: dict[str, float] = {"rows": float(rows)}
    with tempfile.TemporaryDirectory(prefix="arrowlog-bench-spark-") as tmp:
        root = str(Path(tmp) / "log")
        parquet = str(Path(tmp) / "parquet")
        extra = [f"cast(id * {c} % 997 as double) as c{c}" for c in range(3, COLUMNS)]
        source = spark.range(0, rows, 1, PARTITIONS).selectExpr(
            "id", "cast(id % 1000 as double) * 0.5 as value", "cast(id % 7 as int) as kind", *extra
        )
        source.write.parquet(parquet)
        _load(root, {"fsync": False}, parquet, "bench")
        names = ["id", "value", "kind", *[f"c{c}" for c in range(3, COLUMNS)]]

        def query(df: Any, columns: list[str]) -> Callable[[], None]:
            from pyspark.sql import functions as f

            sums = [f.sum(c).alias(c) for c in columns]

            def run() -> None:
                assert df.select(*sums, f.count("*").alias("n")).collect()[0]["n"] == rows

            return run

        def arrowlog_df(
            reader: str, path: str = root, options: dict[str, str] | None = None
        ) -> Any:
            b = spark.read.format("arrowlog").option("topic", "bench").option("reader", reader)
            for k, v in (options or {}).items():
                b = b.option(k, v)
            return b.load(path)

        full = _median(
            {
                "parquet": query(spark.read.parquet(parquet), names),
                "jvm": query(arrowlog_df("jvm"), names),
                "python": query(arrowlog_df("python"), names),
            },
            repeat,
        )
        two = _median(
            {
                "parquet": query(spark.read.parquet(parquet), TWO),
                "jvm": query(arrowlog_df("jvm"), TWO),
                "python": query(arrowlog_df("python", options={"columns": ",".join(TWO)}), TWO),
            },
            repeat,
        )
        for name, t in full.items():
            out[f"read_{name}_s"] = t
        for name, t in two.items():
            out[f"read2_{name}_s"] = t
        out["read_ratio"] = full["parquet"] / full["jvm"]
        out["read2_ratio"] = two["parquet"] / two["jvm"]
        out["read_python_ratio"] = full["parquet"] / full["python"]

        # planning: what the driver waits for, and what of it is planning itself
        plans: list[tuple[float, float]] = []
        planner = spark._jvm.io.arrowlog.spark.planning.PlannerProcess.shared()
        for _ in range(5):
            arrowlog_df("jvm").rdd.getNumPartitions()
            plans.append((planner.lastMillis(), planner.lastPlannerMillis()))
        out["plan_ms"] = statistics.median(p[0] for p in plans)
        out["planner_ms"] = statistics.median(p[1] for p in plans)

        # the same rows in an LZ4 topic (the JVM reader decodes LZ4 frames itself)
        lz4_root = str(Path(tmp) / "lz4")
        _load(
            lz4_root,
            {"fsync": False},
            parquet,
            "bench",
            arrowlog.TopicConfig(compression=arrowlog.Compression.LZ4),
        )
        lz4 = _median(
            {
                "parquet": query(spark.read.parquet(parquet), names),
                "jvm": query(arrowlog_df("jvm", lz4_root), names),
            },
            repeat,
        )
        out["lz4_jvm_s"] = lz4["jvm"]
        out["lz4_ratio"] = lz4["parquet"] / lz4["jvm"]

        if s3 is not None:
            url = s3.url("bench-spark")
            _load(url, s3.storage_options, parquet, "bench")
            from arrowlog.spark.options import spark_storage_options

            opts = spark_storage_options(s3.storage_options)
            on_s3 = _median(
                {
                    "jvm": query(arrowlog_df("jvm", url, opts), names),
                    "python": query(arrowlog_df("python", url, opts), names),
                },
                repeat,
            )
            out["s3_read_jvm_s"] = on_s3["jvm"]
            out["s3_read_python_s"] = on_s3["python"]
            out["s3_jvm_vs_python"] = on_s3["python"] / on_s3["jvm"]

        from bench.discard import register

        register(spark)
        log = arrowlog.connect(root, {"fsync": False})
        schema = log.topic("bench").schema
        # every write into a new topic (or folder), created before the clock runs
        topics = [f"out{r}" for r in range(WRITE_ROUNDS + 1)]
        for topic in topics:
            log.create_topic(topic, schema, partitions=PARTITIONS)
        fresh = iter(topics)
        folders = iter(range(WRITE_ROUNDS + 1))

        def to_arrowlog() -> None:
            source.write.format("arrowlog").mode("append").option("topic", next(fresh)).option(
                "storage.fsync", "false"
            ).save(root)

        runs: dict[str, Callable[[], Any]] = {
            "parquet": lambda: source.write.parquet(str(Path(tmp) / f"pout{next(folders)}")),
            "discard": lambda: source.write.format("arrowlog-discard").mode("append").save(),
            "arrowlog": to_arrowlog,
            # Spark's own sink that drops every row: what any writer in the JVM
            # would start from (the rows computed, nothing handed to Python)
            "noop": lambda: source.write.format("noop").mode("overwrite").save(),
        }
        # Both cores are busy through every write (the JVM turns rows into Arrow
        # while Python takes them), so one write's time moves by 10% from round
        # to round: more rounds than the reads, in alternating order.
        writes: dict[str, list[float]] = {name: [] for name in runs}
        for run in runs.values():
            run()  # warm the workers
        for r in range(WRITE_ROUNDS):
            for name in reversed(runs) if r % 2 else runs:
                writes[name].append(timed(runs[name]))
        spread = [d / a for d, a in zip(writes["discard"], writes["arrowlog"], strict=True)]
        out["write_ceiling_ratio_min"] = min(spread)
        out["write_ceiling_ratio_max"] = max(spread)
        out |= {f"write_{k}_s": statistics.median(v) for k, v in writes.items()}
        out["write_ratio"] = out["write_parquet_s"] / out["write_arrowlog_s"]
        out["write_ceiling_ratio"] = out["write_discard_s"] / out["write_arrowlog_s"]
    spark.stop()
    return out


def print_spark(r: dict[str, float]) -> None:
    rows = r["rows"]
    print(f"Spark, {int(rows):,} rows of {COLUMNS} columns, local[2] (median of 3)")
    for label, key in (("every column", "read"), (f"2 of {COLUMNS} columns", "read2")):
        jvm, parquet, python = (r[f"{key}_{n}_s"] for n in ("jvm", "parquet", "python"))
        print(
            f"  aggregate of {label}: JVM reader {jvm:.2f} s ({rows / jvm / 1e6:.1f} M rows/s), "
            f"Parquet {parquet:.2f} s ({rows / parquet / 1e6:.1f} M rows/s), ratio "
            f"{parquet / jvm:.2f}; Python reader {python:.2f} s (ratio {parquet / python:.2f})"
        )
    print(
        f"  planning per query: {r['plan_ms']:.0f} ms waited by the driver, of which "
        f"{r['planner_ms']:.0f} ms planning (a planner process kept per driver)"
    )
    print(
        f"  every column of the same rows in an LZ4 topic: JVM reader {r['lz4_jvm_s']:.2f} s, "
        f"ratio {r['lz4_ratio']:.2f}"
    )
    if "s3_jvm_vs_python" in r:
        print(
            f"  on SeaweedFS: JVM reader {r['s3_read_jvm_s']:.2f} s, Python reader "
            f"{r['s3_read_python_s']:.2f} s: {r['s3_jvm_vs_python']:.2f}x (goal >= 2x)"
        )
    print(
        f"  write: arrowlog {r['write_arrowlog_s']:.2f} s, Parquet {r['write_parquet_s']:.2f} s, "
        f"ratio {r['write_ratio']:.2f}; a Python writer that discards every batch (the "
        f"ceiling of Spark's Python data source API) {r['write_discard_s']:.2f} s: "
        f"{r['write_ceiling_ratio']:.2f} of it (goal >= 0.85; one round against the other "
        f"{r['write_ceiling_ratio_min']:.2f}-{r['write_ceiling_ratio_max']:.2f}, median of "
        f"{WRITE_ROUNDS})"
    )
    print(
        f"  Spark's noop sink (the rows computed, none handed over) {r['write_noop_s']:.2f} s: "
        f"what a writer in the JVM would start from, where one in Python starts from "
        f"{r['write_discard_s']:.2f} s"
    )
    print("  ratio = Parquet time / arrowlog time (goal >= 1.0 for the reads)")


__all__ = ["bench_spark", "print_spark"]
