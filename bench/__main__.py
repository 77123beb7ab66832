"""arrowlog benchmarks, each against a baseline measured in the same run.

    python -m bench [--backends local,s3,s3fs] [--mib 128] [--repeat 3] [--suite core|...]
    python -m bench --suite compaction   # 10,000 small segments read before/after compaction
    python -m bench --suite columns      # one column of ten (8 MiB segments) against all
    python -m bench --suite writers      # writers per partition, latency, Spark's write
                                         # (about 5 minutes; not part of --suite all)
    python -m bench.ceiling              # a new client against the least a checking client does

For every backend (a local directory, SeaweedFS over HTTP on 127.0.0.1, and with
``s3fs`` the same server through the s3fs client, for comparison), the
baselines are the fastest clients a user could pick for the same bytes
(bench/core.py): obstore put-if-absent for appends, obstore GETs on 8 threads
plus pyarrow's IPC decoding for reads. Transactions (bench/txn.py) and Spark
(bench/spark.py) have their own. The writers suite (bench/writers.py,
bench/latency.py, and the keyed write of bench/spark.py) runs only when asked
for: it takes about 5 minutes, which ``--suite all`` would not fit in.

Ratios above 1 mean arrowlog is faster than the baseline. Results also go to
bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arrowlog.config import Compression
from arrowlog.testing import seaweedfs
from bench.backend import Backend
from bench.compaction import bench_compaction, print_compaction
from bench.core import (
    bench_append,
    bench_bytes,
    bench_contention,
    bench_projection,
    bench_read,
    make_batch,
)
from bench.latency import bench_latency, print_latency
from bench.plot import writers_svg
from bench.spark import bench_spark, bench_spark_write, print_spark, print_spark_write
from bench.txn import bench_commit, bench_small_transactions
from bench.writers import KINDS, bench_writers, print_writers

RESULTS = Path(__file__).parent / "results"


@contextmanager
def backends(names: list[str]) -> Iterator[list[Backend]]:
    found = []
    server = None
    with tempfile.TemporaryDirectory(prefix="arrowlog-bench-") as tmp:
        if "local" in names:
            root = Path(tmp) / "local"
            root.mkdir()
            # obstore's local put does not fsync: neither does arrowlog here
            spec = {"kind": "local", "root": str(root)}
            found.append(Backend("local", str(root), {"fsync": False}, spec))
        if "s3" in names or "s3fs" in names:
            server = seaweedfs.start(Path(tmp) / "seaweedfs")
            # the client s3:// had before obstore (s3fs), for comparison
            clients = [("s3", "seaweedfs", {}), ("s3fs", "seaweedfs-s3fs", {"client": "s3fs"})]
            for kind, name, extra in clients:
                if kind in names:
                    found.append(on_server(server, name, extra))
        try:
            yield found
        finally:
            if server is not None:
                server.stop()


def on_server(
    server: seaweedfs.S3Server, name: str, extra: dict[str, Any] | None = None
) -> Backend:
    """A backend under ``name`` on ``server``, with obstore's own store there."""
    spec = {"kind": "s3", "bucket": server.bucket, "prefix": name, "endpoint": server.endpoint,
            "access_key": server.access_key, "secret_key": server.secret_key}  # fmt: skip
    options = {**server.storage_options, **(extra or {})}
    return Backend(name, server.url(name), options, spec)


def projection_on_small_chunks(repeat: int) -> dict[str, float]:
    """The column read again on a SeaweedFS that stores objects in 1 MiB chunks
    instead of 4: a ranged GET costs the server whole chunks, so the default
    caps what reading a tenth of an 8 MiB object can gain."""
    with tempfile.TemporaryDirectory(prefix="arrowlog-bench-chunks-") as tmp:
        server = seaweedfs.start(Path(tmp) / "seaweedfs", chunk_mib=1)
        try:
            return bench_projection(on_server(server, "chunks"), repeat=repeat)
        finally:
            server.stop()


def delta_target(backend: Backend) -> tuple[str, dict[str, str] | None]:
    """Where delta-rs writes its table: beside the backend's log, on the same store."""
    if backend.name == "local":
        return backend.url + "-delta", None
    options = backend.options
    client_kwargs: Any = options.get("client_kwargs") or {}
    return backend.url + "-delta", {
        "AWS_ENDPOINT_URL": str(options["endpoint_url"]),
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": str(client_kwargs.get("region_name", "us-east-1")),
        "AWS_ACCESS_KEY_ID": str(options["key"]),
        "AWS_SECRET_ACCESS_KEY": str(options["secret"]),
        "conditional_put": "etag",
    }


WRITERS_PARTS = ("scaling", "latency", "spark")


def writers_suite(args: argparse.Namespace) -> None:
    """Writers per partition, latency beside obstore's floor, and the keyed
    Spark write, from one run; printed, and saved under "writers" in
    bench/results/latest.json (the other suites' results there are kept, and
    the parts this run leaves out)."""
    kinds = [k for k in KINDS if k in args.writer_kinds.split(",")]
    parts = args.writer_parts.split(",")
    out: dict[str, Any] = {}
    with backends(args.backends.split(",")) as found:
        if "latency" in parts:
            out["latency"] = {}
            for backend in found:
                print(f"[{backend.name}] latency of one batch, beside obstore's ...", flush=True)
                out["latency"][backend.name] = bench_latency(backend)
        if "scaling" in parts:
            out |= bench_writers(
                found, kinds=kinds, seconds=args.writer_seconds, staged=not args.plain,
                delay_ms=args.writer_delay_ms,
            )  # fmt: skip
            out["staged_appends"] = not args.plain
    if "spark" in parts:
        print("[spark] keyed batch write against Parquet and a discarding writer ...", flush=True)
        out["spark"] = bench_spark_write()
    print()
    if "rows" in out:
        print_writers(out)
    if "latency" in out:
        print_latency(out["latency"])
    if "spark" in out:
        print_spark_write(out["spark"])
    RESULTS.mkdir(exist_ok=True)
    latest = RESULTS / "latest.json"
    everything = json.loads(latest.read_text()) if latest.exists() else {}
    name = "writers-plain" if args.plain else "writers"
    if args.writer_delay_ms:
        name += f"-delay{args.writer_delay_ms:g}ms"
    # a run of some parts replaces those, and keeps the others' last figures
    everything[name.replace("-", "_")] = {**everything.get(name.replace("-", "_"), {}), **out}
    latest.write_text(json.dumps(everything, indent=2))
    if out.get("rows"):
        (RESULTS / f"{name}.svg").write_text(writers_svg(out))


def main() -> None:
    parser = argparse.ArgumentParser(description="arrowlog core benchmarks")
    parser.add_argument("--backends", default="local,s3")
    parser.add_argument("--mib", type=int, default=128, help="data per measurement")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1_000_000, help="demo events for bytes")
    parser.add_argument(
        "--suite",
        choices=["all", "core", "columns", "txn", "spark", "compaction", "writers"],
        default="all",
        help="all = every suite but writers (which takes about 5 minutes of its own)",
    )
    parser.add_argument(
        "--writer-seconds", type=float, default=4.0, help="writers: seconds per row"
    )
    parser.add_argument(
        "--writer-kinds", default=",".join(KINDS), help="writers: append, producer or both"
    )
    parser.add_argument(
        "--plain",
        action="store_true",
        help="writers: with staged appends off (LogConfig(staged_appends=False)): every "
        "writer races for the end; saved apart",
    )
    parser.add_argument(
        "--writer-delay-ms",
        type=float,
        default=0.0,
        help="writers scaling: each request first waits a uniform 0..this ms (a store farther away "
        "than the local server); saved apart",
    )
    parser.add_argument(
        "--writer-parts",
        default=",".join(WRITERS_PARTS),
        help="writers: which of scaling, latency, spark to run",
    )
    args = parser.parse_args()
    if args.suite == "writers":
        writers_suite(args)
        return
    results: dict[str, dict[str, dict[str, float]]] = {}  # case -> measure -> figures
    commits: dict[str, dict[int, dict[str, float]]] = {}
    sizes: dict[str, dict[str, float]] = {}
    columns: dict[str, dict[str, float]] = {}
    small: dict[str, dict[str, float]] = {}
    spark_results: dict[str, float] = {}
    compactions: dict[str, dict[str, Any]] = {}
    if args.suite in ("all", "spark"):
        print("[spark] read and write against Spark's Parquet ...", flush=True)
        with tempfile.TemporaryDirectory(prefix="arrowlog-bench-s3-") as tmp:
            server = seaweedfs.start(Path(tmp) / "seaweedfs") if "s3" in args.backends else None
            try:
                spark_results = bench_spark(s3=server)
            finally:
                if server is not None:
                    server.stop()
        if args.suite == "spark":
            print()
            print_spark(spark_results)
            return
    with backends(args.backends.split(",")) as found:
        for backend in found:
            if args.suite in ("all", "compaction"):
                print(f"[{backend.name}] 10,000 small segments, compacted ...", flush=True)
                compactions[backend.name] = bench_compaction(backend, repeat=args.repeat)
            if args.suite == "compaction":
                continue
            if args.suite in ("all", "txn"):
                print(f"[{backend.name}] commit latency ...", flush=True)
                commits[backend.name] = bench_commit(
                    backend.url + "-txn",
                    backend.options,
                    (1, 4, 16, 32),
                    rounds=10,
                )
                print(f"[{backend.name}] small transactions against delta-rs ...", flush=True)
                small[backend.name] = bench_small_transactions(
                    backend.url + "-small", backend.options, *delta_target(backend)
                )
            if args.suite == "txn":
                continue
            if args.suite != "columns":
                print(f"[{backend.name}] bytes on the store, demo events ...", flush=True)
                sizes[backend.name] = bench_bytes(backend, args.rows)
            print(f"[{backend.name}] one column of ten, 8 MiB segments ...", flush=True)
            columns[backend.name] = bench_projection(backend, repeat=args.repeat)
            if backend.name == "seaweedfs":
                print("[seaweedfs, 1 MiB chunks] one column of ten ...", flush=True)
                columns["seaweedfs, 1 MiB chunks"] = projection_on_small_chunks(args.repeat)
            if args.suite == "columns":
                continue
            for size in (1 << 20, 64 << 10):
                batch = make_batch(size)
                count = max(1, args.mib * 2**20 // size) if size == 1 << 20 else 400
                for codec in (Compression.NONE, Compression.ZSTD):
                    label = f"{backend.name} {size >> 10} KiB {codec.value}"
                    print(f"[{label}] {count} batches ...", flush=True)
                    results[label] = {
                        "append": bench_append(backend, batch, count, args.repeat, codec),
                        "read": bench_read(backend, batch, count, args.repeat, codec),
                    }
                    if codec is Compression.NONE:
                        per_writer = max(4, count // 32)
                        results[label]["contention"] = bench_contention(
                            backend, batch, 8, per_writer
                        )
    print()
    for name, c in compactions.items():
        print_compaction(name, c)
    if compactions:
        print()
    if spark_results:
        print_spark(spark_results)
        print()
    for name, by_count in commits.items():
        print(f"commit latency on {name} (median of 10; put = one small put-if-absent;")
        print("  commit = the commit_transaction call (its one request: PREPARE_COMMIT);")
        print("  end = until markers and COMPLETE are written (flush); floor = raw put,")
        print("  N raw puts in parallel, raw put: the 3 stages of the end without arrowlog)")
        print(
            f"{'partitions':>10} {'commit ms':>10} {'end ms':>7} {'txn ms':>8} {'put ms':>7}"
            f" {'commit/put':>10} {'floor ms':>9} {'end/floor':>10}"
        )
        for count, c in by_count.items():
            print(
                f"{count:>10} {c['commit_ms']:>10.1f} {c['end_ms']:>7.1f}"
                f" {c['transaction_ms']:>8.1f} {c['put_ms']:>7.2f} {c['commit_per_put']:>10.1f}"
                f" {c['floor_ms']:>9.1f} {c['end_per_floor']:>10.2f}"
            )
        print()
    for name, t in small.items():
        print(f"small transactions on {name} (1 batch of 16 KiB, 1 partition): arrowlog "
              f"{t['arrowlog_txn_s']:.1f}/s, delta-rs appends {t['delta_commits_s']:.1f}/s, "
              f"ratio {t['ratio']:.2f} (goal >= 3); commit call median "
              f"{t['commit_call_ms_median']:.1f} ms")  # fmt: skip
    if small:
        print()
    for name, b in sizes.items():
        print(f"bytes on {name}, {args.rows:,} demo events: ZSTD Parquet "
              f"{b['parquet_zstd_bytes'] / 1e6:.2f} MB; arrowlog "
              + ", ".join(f"{c.value} {b[f'{c.value}_bytes'] / 1e6:.2f} MB "
                          f"({b[f'{c.value}_vs_parquet']:.2f}x)" for c in Compression)
              + " (goal: zstd <= 1.3x)")  # fmt: skip
    if sizes:
        print()
    for name, c in columns.items():
        print(f"columns on {name}: 1 of 10 columns of {c['segment_mib']:.0f} MiB segments, "
              f"read again: {c['one_column_s'] * 1000:.0f} ms, all 10 "
              f"{c['all_columns_s'] * 1000:.0f} ms: {c['speedup']:.1f}x faster (to the log's "
              f"end, a LIST first: {c['end_one_column_s'] * 1000:.0f} ms against "
              f"{c['end_all_columns_s'] * 1000:.0f} ms, {c['end_speedup']:.1f}x); read first "
              f"(new connection, frames unknown): {c['first_one_column_s'] * 1000:.0f} ms "
              f"against {c['first_all_columns_s'] * 1000:.0f} ms: {c['first_speedup']:.1f}x "
              f"(goal >= 5x; the store's own ceiling, whole objects against one ranged GET "
              f"of the column each: {c['store_ceiling']:.1f}x)")  # fmt: skip
    if columns:
        print()
    RESULTS.mkdir(exist_ok=True)
    if not results:
        if compactions:
            (RESULTS / "compaction.json").write_text(json.dumps(compactions, indent=2))
        return
    print(f"{'case':<25} {'append MiB/s':>12} {'stream':>8} {'obstore':>8} {'ratio':>6} "
          f"{'stream':>6}   {'read MiB/s':>10} {'obstore':>8} {'ratio':>6} {'new':>5} "
          f"{'first':>5} {'+crc':>5} {'new':>5}   {'8 writers MiB/s':>15} "
          f"{'conflicts/append':>16}")  # fmt: skip
    for label, r in results.items():
        a, rd = r["append"], r["read"]
        crowd = r.get("contention")
        line = (
            f"{label:<25} {a['arrowlog_mib_s']:>12.1f} {a['stream_mib_s']:>8.1f}"
            f" {a['obstore_mib_s']:>8.1f} {a['ratio']:>6.2f} {a['stream_ratio']:>6.2f}"
            f"   {rd['arrowlog_mib_s']:>10.1f} {rd['obstore_mib_s']:>8.1f} {rd['ratio']:>6.2f}"
            f" {rd['cold_ratio']:>5.2f} {a['first_read_ratio']:>5.2f}"
            f" {rd['crc_ratio']:>5.2f} {rd['cold_crc_ratio']:>5.2f}"
        )
        if crowd is not None:
            line += f"   {crowd['mib_s']:>15.1f} {crowd['conflicts_per_append']:>16.2f}"
        print(line)
    print(
        "\nMiB/s of the batches' own (uncompressed) bytes; ratio = arrowlog / obstore for the"
        " same stored bytes;\nappend: one by one (append in a loop), stream: append_batches;"
        "\nread: a warm client; new: a new client, against a LIST then the GETs; first: the"
        "\nwriter's first read of what it appended, against obstore's first GETs of its puts;"
        "\n+crc: warm and new again, against obstore GETs that also compute each object's"
        "\nCRC32C (arrowlog checks every object it reads; the plain baseline checks nothing);"
        "\na read's ratio is the median of its rounds' (each round runs both sides, one"
        "\nafter the other)"
        "\n(goal: append >= 0.9 at 1 MiB, >= 0.8 at 64 KiB; every read >= 0.9)"
    )
    everything = {"core": results, "bytes": sizes, "columns": columns, "commit": commits,
                  "small_txn": small, "spark": spark_results,
                  "compaction": compactions}  # fmt: skip
    (RESULTS / "latest.json").write_text(json.dumps(everything, indent=2))


if __name__ == "__main__":
    main()
