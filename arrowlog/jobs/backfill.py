"""Backfill: bulk-load a Parquet, CSV or Arrow file into one partition of a topic
with expected offsets. Kill it at any moment and run it again: it resumes where
the log really ends, and the partition holds the input exactly once, in order.

    python -m arrowlog.jobs.backfill ROOT TOPIC FILE [--partition 0] [--start-offset 0]
        [--rows-per-batch 65536] [--create] [--storage-options JSON]
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from tqdm import tqdm

import arrowlog
from arrowlog.bulkload import LoadProgress, bulk_load
from arrowlog.cli import open_input
from arrowlog.jobs._spark import storage_options_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root")
    parser.add_argument("topic")
    parser.add_argument("file")
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--start-offset", type=int, default=0)
    parser.add_argument("--rows-per-batch", type=int, default=65_536)
    parser.add_argument("--create", action="store_true", help="create the topic if missing")
    parser.add_argument("--storage-options", help="JSON, e.g. endpoint_url, key, secret")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    log = arrowlog.connect(args.root, storage_options_json(args.storage_options))
    schema, batches = open_input(args.file)
    if args.create and args.topic not in log.list_topics():
        with contextlib.suppress(arrowlog.TopicExistsError):
            log.create_topic(args.topic, schema)
    total = _row_count(args.file)
    bar = tqdm(total=total, unit="rows", disable=args.no_progress, file=sys.stderr)
    state = {"rows": 0}

    def progress(p: LoadProgress) -> None:
        bar.update(p.rows_done - state["rows"])
        state["rows"] = p.rows_done
        bar.set_postfix_str(f"{p.bytes_done / 2**20:,.1f} MiB written")

    try:
        result = bulk_load(
            log.partition(args.topic, args.partition),
            batches,
            start_offset=args.start_offset,
            rows_per_batch=args.rows_per_batch,
            progress=progress,
        )
    except arrowlog.ArrowLogError as e:
        bar.close()
        print(f"backfill: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    bar.close()
    print(
        f"backfill {args.file} -> {args.topic}/{args.partition}: offsets "
        f"[{result.start_offset}, {result.end_offset}), {result.rows_written:,} rows written, "
        f"{result.rows_skipped:,} already there"
    )
    return 0


def _row_count(path: str) -> int | None:
    if path.endswith((".parquet", ".pq")):
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    return None


if __name__ == "__main__":
    sys.exit(main())
