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


def columns_frame(spark: Any, rows: int, partitions: int) -> Any:
    """``rows`` rows of :data:`COLUMNS` columns in ``partitions`` Spark partitions."""
    extra = [f"cast(id * {c} % 997 as double) as c{c}" for c in range(3, COLUMNS)]
    return spark.range(0, rows, 1, partitions).selectExpr(
        "id", "cast(id % 1000 as double) * 0.5 as value", "cast(id % 7 as int) as kind", *extra
    )


def log_schema(root: str) -> Any:
    return arrowlog.connect(root, {"fsync": False}).topic("bench").schema


def measure_writes(
    spark: Any,
    source: Any,
    schema: Any,
    root: str,
    tmp: Path,
    partitions: int,
    *,
    rounds: int = WRITE_ROUNDS,
    options: dict[str, str] | None = None,
) -> dict[str, float]:
    """``source`` written by ``df.write.format("arrowlog")`` (with ``options``;
    ``txnVersion`` counts up when ``txnAppId`` is one) into a new topic of
    ``partitions`` under ``root``, by Spark's Parquet writer into a new folder
    under ``tmp``, by a Python writer that discards every batch, and by Spark's
    noop sink: once each to warm up, then ``rounds`` rounds in alternating
    order; medians, and the ratios of the baselines' times to arrowlog's."""
    from bench.discard import register

    register(spark)
    log = arrowlog.connect(root, {"fsync": False})
    # every write into a new topic (or folder), created before the clock runs
    topics = [f"out{r}" for r in range(2 * (rounds + 1))]  # a new one for each arrowlog write
    for topic in topics:
        log.create_topic(topic, schema, partitions=partitions)
    fresh = iter(enumerate(topics))
    folders = iter(range(rounds + 1))
    extra = dict(options or {})

    def to_arrowlog(through: str) -> None:
        version, topic = next(fresh)
        writer = source.write.format("arrowlog").mode("append").option("topic", topic)
        for key, value in extra.items():
            writer = writer.option(key, value)
        if "txnAppId" in extra:
            writer = writer.option("txnVersion", str(version))
        writer.option("writer", through).option("storage.fsync", "false").save(root)

    runs: dict[str, Callable[[], Any]] = {
        "parquet": lambda: source.write.parquet(str(tmp / f"pout{next(folders)}")),
        "discard": lambda: source.write.format("arrowlog-discard").mode("append").save(),
        # the JVM writer (where the session has the jar), and the Python sink
        "arrowlog": lambda: to_arrowlog("jvm"),
        "python": lambda: to_arrowlog("python"),
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
    for r in range(rounds):
        for name in reversed(runs) if r % 2 else runs:
            writes[name].append(timed(runs[name]))
    spread = [d / a for d, a in zip(writes["discard"], writes["arrowlog"], strict=True)]
    out = {f"write_{k}_s": statistics.median(v) for k, v in writes.items()}
    out["write_ceiling_ratio_min"] = min(spread)
    out["write_ceiling_ratio_max"] = max(spread)
    out["write_ratio"] = out["write_parquet_s"] / out["write_arrowlog_s"]
    out["write_ceiling_ratio"] = out["write_discard_s"] / out["write_arrowlog_s"]
    out["write_python_ratio"] = out["write_parquet_s"] / out["write_python_s"]
    out["write_rounds"] = rounds
    return out


def bench_spark(rows: int = ROWS, repeat: int = 3, s3: Any = None) -> dict[str, float]:
    """``s3``: a running SeaweedFS (:class:`arrowlog.testing.seaweedfs.S3Server`) for the
    JVM-against-Python read there, or None to leave it out."""
    spark = local_session("arrowlog-bench")
    out: dict[str, float] = {"rows": float(rows)}
    with tempfile.TemporaryDirectory(prefix="arrowlog-bench-spark-") as tmp:
        root = str(Path(tmp) / "log")
        parquet = str(Path(tmp) / "parquet")
        source = columns_frame(spark, rows, PARTITIONS)
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

        out |= measure_writes(spark, source, log_schema(root), root, Path(tmp), PARTITIONS)
    spark.stop()
    return out


#: the writers suite's Spark write (issue 26's figures): rows, topic partitions
KEYED_ROWS = 4_000_000
KEYED_PARTITIONS = 8
KEYED_ROUNDS = 3
KEYED_OPTIONS = {"keyColumn": "id", "txnAppId": "bench-keyed"}


def bench_spark_write(
    rows: int = KEYED_ROWS, partitions: int = KEYED_PARTITIONS, rounds: int = KEYED_ROUNDS
) -> dict[str, float]:
    """The keyed batch write alone, in a default session: ``rows`` rows of
    :data:`COLUMNS` columns in ``partitions`` Spark partitions, each row sent
    to the partition of its ``id`` (so every task writes into every partition),
    as one transaction with ``txnAppId``/``txnVersion``, into a topic of
    ``partitions``; against Parquet, the discarding writer and the noop sink."""
    from pyspark.sql.pandas.types import to_arrow_schema

    spark = local_session("arrowlog-bench")
    try:
        with tempfile.TemporaryDirectory(prefix="arrowlog-bench-spark-write-") as tmp:
            source = columns_frame(spark, rows, partitions)
            schema = to_arrow_schema(source.schema)
            root = str(Path(tmp) / "log")
            out = measure_writes(
                spark, source, schema, root, Path(tmp), partitions, rounds=rounds,
                options=KEYED_OPTIONS,
            )  # fmt: skip
    finally:
        spark.stop()
    return {"rows": float(rows), "partitions": float(partitions), **out}


def print_spark_write(r: dict[str, float]) -> None:
    options = ", ".join(f"{k}={v}" for k, v in KEYED_OPTIONS.items())
    print(f"Spark keyed batch write, {int(r['rows']):,} rows of {COLUMNS} columns into "
          f"{int(r['partitions'])} partitions, local[2], median of {int(r['write_rounds'])} "
          f"alternating rounds (ratio = its time / arrowlog's: above 1, arrowlog is "
          f"faster)")  # fmt: skip
    print(f"{'writer':<68} {'seconds':>8} {'ratio':>6}")
    arrowlog_s = r["write_arrowlog_s"]
    for label, key in (
        (f"arrowlog, JVM writer ({options}, txnVersion)", "arrowlog"),
        ("arrowlog, Python sink (option writer=python)", "python"),
        ("Spark's Parquet write (goal: ratio >= 1.0, aim 1.5)", "parquet"),
        ("a Python writer that discards its rows", "discard"),
        ("Spark's noop sink (no row leaves the JVM)", "noop"),
    ):
        seconds = r[f"write_{key}_s"]
        print(f"{label:<68} {seconds:>8.2f} {seconds / arrowlog_s:>6.2f}")
    print(f"(the discarding Python writer against the JVM writer, round by round: "
          f"{r['write_ceiling_ratio_min']:.2f}-{r['write_ceiling_ratio_max']:.2f})")  # fmt: skip


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
        f"  write: arrowlog's JVM writer {r['write_arrowlog_s']:.2f} s, Parquet "
        f"{r['write_parquet_s']:.2f} s, ratio {r['write_ratio']:.2f}; the Python sink "
        f"{r['write_python_s']:.2f} s (ratio {r['write_python_ratio']:.2f}); a Python writer "
        f"that discards every batch (the ceiling of Spark's Python data source API) "
        f"{r['write_discard_s']:.2f} s (median of {WRITE_ROUNDS})"
    )
    print(
        f"  Spark's noop sink (the rows computed, none handed over) {r['write_noop_s']:.2f} s: "
        f"where a writer in the JVM starts from"
    )
    print("  ratio = Parquet time / arrowlog time (goal >= 1.0 for the reads)")


__all__ = ["bench_spark", "bench_spark_write", "print_spark", "print_spark_write"]
