"""arrowlog core benchmarks, each against a baseline measured in the same run.

    python -m bench [--backends local,s3] [--mib 200] [--repeat 3]

For every backend (a local directory, and SeaweedFS over HTTP on 127.0.0.1):

- append: ``log.append`` of 1 MiB (and 64 KiB) batches, one writer, versus raw
  ``put_if_absent`` of the very same segment bytes through the same store;
- read: ``log.read`` of the whole partition versus plain pyarrow reading the same
  segment files through its own filesystem (``pyarrow.fs``) and IPC reader;
- commit: ``commit_transaction`` latency for 1 to 32 partitions, versus one small
  put-if-absent (three sequential stages: the ratio should stay near 3).

Ratios above 1 mean arrowlog is faster than the baseline. Results also go to
bench/results/latest.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs

import arrowlog
from arrowlog.segment import SegmentHeader, encode_segment
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from bench.spark import bench_spark, print_spark
from bench.txn import bench_commit
from infra import seaweedfs

RESULTS = Path(__file__).parent / "results"


@dataclass
class Backend:
    name: str
    url: str
    options: dict[str, object]
    pyarrow_fs: pafs.FileSystem
    pyarrow_root: str


@contextmanager
def backends(names: list[str]) -> Iterator[list[Backend]]:
    found = []
    server = None
    with tempfile.TemporaryDirectory(prefix="arrowlog-bench-") as tmp:
        if "local" in names:
            root = Path(tmp) / "local"
            found.append(Backend("local", str(root), {}, pafs.LocalFileSystem(), str(root)))
        if "s3" in names:
            server = seaweedfs.start(Path(tmp) / "seaweedfs")
            fs = pafs.S3FileSystem(
                access_key=server.access_key,
                secret_key=server.secret_key,
                endpoint_override=server.endpoint,
                scheme="http",
                region="us-east-1",
            )
            found.append(
                Backend(
                    "seaweedfs",
                    server.url("bench"),
                    server.storage_options,
                    fs,
                    f"{server.bucket}/bench",
                )
            )
        try:
            yield found
        finally:
            if server is not None:
                server.stop()


def make_batch(target_bytes: int) -> pa.RecordBatch:
    rows = target_bytes // 24
    return pa.record_batch(
        {
            "id": pa.array(range(rows), pa.int64()),
            "value": pa.array([i * 0.25 for i in range(rows)], pa.float64()),
            "flag": pa.array([i % 7 for i in range(rows)], pa.int64()),
        }
    )


def timed(run: Callable[[], None]) -> float:
    started = time.perf_counter()
    run()
    return time.perf_counter() - started


def bench_append(
    backend: Backend, batch: pa.RecordBatch, count: int, repeat: int
) -> dict[str, float]:
    # The very segments the appends write (offsets included), encoded beforehand,
    # each in its own memory: writing one buffer over and over would hand the
    # baseline a CPU cache that no real writer has.
    segments = [
        encode_segment(
            batch,
            SegmentHeader(
                base_offset=i * batch.num_rows,
                record_count=batch.num_rows,
                timestamp_ms=0,
                append_id=f"{i:032x}",
            ),
        )
        for i in range(count)
    ]
    seg = segments[0]
    store: Store = open_store(backend.url, backend.options)
    log = arrowlog.connect(store)
    ours, raw = [], []
    for r in range(repeat):
        topic = f"append-{batch.nbytes}-{r}"
        log.create_topic(topic, batch.schema, config=arrowlog.TopicConfig(max_batch_bytes=2**30))
        part = log.partition(topic, 0)
        part.end_offset()

        def append(part: arrowlog.PartitionLog = part) -> None:
            for _ in range(count):
                part.append(batch)

        def put(r: int = r) -> None:
            for i, data in enumerate(segments):
                store.put_if_absent(f"raw/{batch.nbytes}/{r}/{i:08d}", data)

        # alternate the order so neither side always runs on a warmer disk
        if r % 2:
            raw.append(timed(put))
            ours.append(timed(append))
        else:
            ours.append(timed(append))
            raw.append(timed(put))
    mib = count * len(seg) / 2**20
    t_ours, t_raw = statistics.median(ours), statistics.median(raw)
    return {"segment_bytes": len(seg), "arrowlog_mib_s": mib / t_ours, "raw_put_mib_s": mib / t_raw,
            "ratio": t_raw / t_ours, "appends_per_s": count / t_ours}  # fmt: skip


def bench_read(
    backend: Backend, batch: pa.RecordBatch, count: int, repeat: int
) -> dict[str, float]:
    log = arrowlog.connect(backend.url, backend.options)
    topic = f"read-{batch.nbytes}"
    log.create_topic(topic, batch.schema, config=arrowlog.TopicConfig(max_batch_bytes=2**30))
    part = log.partition(topic, 0)
    for _ in range(count):
        part.append(batch)
    keys = [ref.key for ref in part.segments()]
    total_bytes = sum(ref.size for ref in part.segments())
    sequential = arrowlog.connect(
        backend.url, backend.options, config=arrowlog.LogConfig(read_ahead=1)
    )

    def ours() -> None:
        assert log.read(topic, 0).num_rows == count * batch.num_rows

    def ours_sequential() -> None:
        assert sequential.read(topic, 0).num_rows == count * batch.num_rows

    def plain() -> None:
        batches = []
        for key in keys:
            with backend.pyarrow_fs.open_input_file(f"{backend.pyarrow_root}/{key}") as f:
                batches.extend(pa.ipc.open_file(f).read_all().to_batches())
        assert sum(b.num_rows for b in batches) == count * batch.num_rows

    times: dict[str, list[float]] = {"ours": [], "seq": [], "plain": []}
    for _ in range(repeat):
        times["plain"].append(timed(plain))
        times["ours"].append(timed(ours))
        times["seq"].append(timed(ours_sequential))
    mib = total_bytes / 2**20
    t = {k: statistics.median(v) for k, v in times.items()}
    return {"arrowlog_mib_s": mib / t["ours"], "arrowlog_sequential_mib_s": mib / t["seq"],
            "pyarrow_mib_s": mib / t["plain"], "ratio": t["plain"] / t["ours"],
            "ratio_sequential": t["plain"] / t["seq"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description="arrowlog core benchmarks")
    parser.add_argument("--backends", default="local,s3")
    parser.add_argument("--mib", type=int, default=128, help="data per measurement")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--suite", choices=["all", "core", "txn", "spark"], default="all")
    args = parser.parse_args()
    results: dict[str, dict[str, dict[str, float]]] = {}
    commits: dict[str, dict[int, dict[str, float]]] = {}
    spark_results: dict[str, float] = {}
    if args.suite in ("all", "spark"):
        print("[spark] read and write against Spark's Parquet ...", flush=True)
        spark_results = bench_spark()
        if args.suite == "spark":
            print()
            print_spark(spark_results)
            return
    with backends(args.backends.split(",")) as found:
        for backend in found:
            if args.suite in ("all", "txn"):
                print(f"[{backend.name}] commit latency ...", flush=True)
                commits[backend.name] = bench_commit(
                    backend.url + "-txn",
                    backend.options,
                    (1, 4, 16, 32),
                    rounds=10,
                )
            if args.suite == "txn":
                continue
            for size in (1 << 20, 64 << 10):
                batch = make_batch(size)
                count = max(1, args.mib * 2**20 // size) if size == 1 << 20 else 400
                label = f"{backend.name} {size >> 10} KiB"
                print(f"[{label}] {count} batches ...", flush=True)
                results[label] = {
                    "append": bench_append(backend, batch, count, args.repeat),
                    "read": bench_read(backend, batch, count, args.repeat),
                }
    print()
    if spark_results:
        print_spark(spark_results)
        print()
    for name, by_count in commits.items():
        print(f"commit latency on {name} (median of 10; put = one small put-if-absent;")
        print("  floor = raw put, N raw puts in parallel, raw put: the 3 stages without arrowlog)")
        print(
            f"{'partitions':>10} {'commit ms':>10} {'txn ms':>8} {'put ms':>7}"
            f" {'commit/put':>10} {'floor ms':>9} {'commit/floor':>12}"
        )
        for count, c in by_count.items():
            print(
                f"{count:>10} {c['commit_ms']:>10.1f} {c['transaction_ms']:>8.1f}"
                f" {c['put_ms']:>7.2f} {c['commit_per_put']:>10.1f}"
                f" {c['floor_ms']:>9.1f} {c['commit_per_floor']:>12.2f}"
            )
        print()
    if not results:
        return
    header = f"{'case':<20} {'append MiB/s':>12} {'raw PUT':>9} {'ratio':>6}   {'read MiB/s':>10} {'(seq)':>8} {'pyarrow':>8} {'ratio':>6} {'(seq)':>6}"  # noqa: E501
    print(header)
    for label, r in results.items():
        a, rd = r["append"], r["read"]
        print(
            f"{label:<20} {a['arrowlog_mib_s']:>12.1f} {a['raw_put_mib_s']:>9.1f}"
            f" {a['ratio']:>6.2f}"
            f"   {rd['arrowlog_mib_s']:>10.1f} {rd['arrowlog_sequential_mib_s']:>8.1f}"
            f" {rd['pyarrow_mib_s']:>8.1f} {rd['ratio']:>6.2f} {rd['ratio_sequential']:>6.2f}"
        )
    print("\nratio = arrowlog throughput / baseline throughput (goal >= 0.9); (seq) = read_ahead=1")
    RESULTS.mkdir(exist_ok=True)
    everything = {"core": results, "commit": commits, "spark": spark_results}
    (RESULTS / "latest.json").write_text(json.dumps(everything, indent=2))


if __name__ == "__main__":
    main()
