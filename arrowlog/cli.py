"""The ``arrowlog`` command line: inspect topics, bulk-load files, read ranges.

    arrowlog topics ROOT
    arrowlog create-topic ROOT NAME --like data.parquet [--partitions 4]
    arrowlog describe ROOT NAME
    arrowlog load ROOT TOPIC data.parquet [--partition 0] [--start-offset 0]
    arrowlog read ROOT TOPIC [--partition 0] [--start 0] [--end N] [--output out.parquet]
    arrowlog transactions ROOT                  list transactional ids and their state
    arrowlog describe-transaction ROOT ID
    arrowlog abort-transaction ROOT ID          fence the id and finish its transaction now
    arrowlog expire-transactions ROOT           abort every transaction past its timeout
    arrowlog producers ROOT TOPIC [--partition 0]
    arrowlog metrics ROOT [TOPIC ...]

ROOT is any URL ``arrowlog.connect`` takes; S3 credentials come from the usual
AWS environment variables, or ``--endpoint-url`` / ``--option key=value``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog.bulkload import LoadProgress, bulk_load


def open_input(path: str) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """Schema and batches of a Parquet, CSV or Arrow IPC file."""
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        return pf.schema_arrow, pf.iter_batches(batch_size=65_536)
    if suffix == ".csv":
        import pyarrow.csv as pcsv

        reader = pcsv.open_csv(path)
        return reader.schema, iter(reader)
    if suffix in (".arrow", ".feather", ".ipc"):
        ipc = pa.ipc.open_file(path)
        return ipc.schema, (ipc.get_batch(i) for i in range(ipc.num_record_batches))
    raise arrowlog.InvalidConfigError(f"cannot read {path}: use .parquet, .csv or .arrow")


def _connect(args: argparse.Namespace) -> arrowlog.ArrowLog:
    options: dict[str, Any] = {}
    for item in args.option or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise arrowlog.InvalidConfigError(f"--option takes key=value, got {item!r}")
        options[key] = value
    if args.endpoint_url:
        options["endpoint_url"] = args.endpoint_url
    return arrowlog.connect(args.root, options or None)


def _progress(started: float) -> Any:
    def show(p: LoadProgress) -> None:
        rate = p.rows_done / max(time.monotonic() - started, 1e-9)
        print(
            f"\r  {p.rows_done:,} rows ({p.rows_skipped:,} already loaded), "
            f"{p.bytes_done / 2**20:,.1f} MiB written, {rate:,.0f} rows/s",
            end="",
            file=sys.stderr,
            flush=True,
        )

    return show


def cmd_topics(args: argparse.Namespace) -> None:
    for name in _connect(args).list_topics():
        print(name)


def cmd_create_topic(args: argparse.Namespace) -> None:
    schema, _ = open_input(args.like)
    topic = _connect(args).create_topic(args.name, schema, args.partitions)
    print(f"created topic {topic.name} with {topic.partitions} partition(s)")


def cmd_describe(args: argparse.Namespace) -> None:
    desc = _connect(args).describe_topic(args.name)
    out = {
        "topic": desc.topic.name,
        "schema": [
            f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in desc.topic.schema
        ],
        "config": dataclasses.asdict(desc.topic.config),
        "partitions": [dataclasses.asdict(p) for p in desc.partitions],
    }
    print(json.dumps(out, indent=2))


def cmd_load(args: argparse.Namespace) -> None:
    log = _connect(args)
    schema, batches = open_input(args.file)
    if args.create and args.topic not in log.list_topics():
        with contextlib.suppress(arrowlog.TopicExistsError):
            log.create_topic(args.topic, schema, args.partitions)
    partition = log.partition(args.topic, args.partition)
    started = time.monotonic()
    result = bulk_load(
        partition,
        batches,
        start_offset=args.start_offset,
        rows_per_batch=args.rows_per_batch,
        progress=None if args.quiet else _progress(started),
    )
    if not args.quiet:
        print(file=sys.stderr)
    print(
        f"loaded {args.file} into {args.topic}/{args.partition}: offsets "
        f"[{result.start_offset}, {result.end_offset}), {result.rows_written:,} rows written, "
        f"{result.rows_skipped:,} already there"
    )


def cmd_read(args: argparse.Namespace) -> None:
    consumer = _connect(args).consumer(isolation_level=args.isolation_level)
    table = consumer.read(args.topic, args.partition, args.start, args.end)
    if args.output:
        import pyarrow.parquet as pq

        pq.write_table(table, args.output)
        print(f"wrote {table.num_rows:,} rows to {args.output}")
    else:
        first = args.start if args.start is not None else 0
        for offset, row in enumerate(table.slice(0, args.limit).to_pylist(), start=first):
            print(f"{offset}\t{json.dumps(row, default=str)}")
        print(f"({table.num_rows:,} rows)")


def _print_json(value: object) -> None:
    print(json.dumps(value, indent=2, default=str))


def _txn_row(info: arrowlog.TransactionInfo) -> dict[str, object]:
    row = dataclasses.asdict(info)
    row["state"] = info.state.value
    return row


def cmd_transactions(args: argparse.Namespace) -> None:
    _print_json([_txn_row(t) for t in _connect(args).list_transactions()])


def cmd_describe_transaction(args: argparse.Namespace) -> None:
    _print_json(_connect(args).describe_transaction(args.transactional_id))


def cmd_abort_transaction(args: argparse.Namespace) -> None:
    _print_json(_txn_row(_connect(args).abort_transaction(args.transactional_id)))


def cmd_expire_transactions(args: argparse.Namespace) -> None:
    done = _connect(args).expire_transactions()
    _print_json([_txn_row(t) for t in done])
    print(f"expired {len(done)} transaction(s)", file=sys.stderr)


def cmd_producers(args: argparse.Namespace) -> None:
    entries = _connect(args).list_producers(args.topic, args.partition)
    _print_json([dataclasses.asdict(e) for e in entries])


def cmd_metrics(args: argparse.Namespace) -> None:
    _print_json(_connect(args).metrics(args.topics or None))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arrowlog", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("root", help="memory://, a directory, file:///dir or s3://bucket/prefix")
        p.add_argument("--endpoint-url", help="S3 endpoint (MinIO, SeaweedFS)")
        p.add_argument("--option", action="append", help="storage option key=value")
        return p

    command("topics", "list topics").set_defaults(run=cmd_topics)
    p = command("create-topic", "create a topic with the schema of a file")
    p.add_argument("name")
    p.add_argument("--like", required=True, help="a .parquet, .csv or .arrow file")
    p.add_argument("--partitions", type=int, default=1)
    p.set_defaults(run=cmd_create_topic)
    p = command("describe", "a topic's schema, config and partition offsets")
    p.add_argument("name")
    p.set_defaults(run=cmd_describe)
    p = command("load", "bulk-load a file with expected offsets; rerun to resume")
    p.add_argument("topic")
    p.add_argument("file")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--start-offset", type=int, default=0, help="where the load began (default 0)")
    p.add_argument("--rows-per-batch", type=int, default=65_536)
    p.add_argument("--create", action="store_true", help="create the topic if missing")
    p.add_argument("--partitions", type=int, default=1, help="with --create")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=cmd_load)
    p = command("read", "read a range of offsets")
    p.add_argument("topic")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--start", type=int)
    p.add_argument("--end", type=int)
    p.add_argument("--limit", type=int, default=20, help="rows to print")
    p.add_argument("--output", help="write the range to this Parquet file")
    p.add_argument(
        "--isolation-level",
        choices=["read_committed", "read_uncommitted"],
        default="read_committed",
    )
    p.set_defaults(run=cmd_read)
    command("transactions", "list transactional ids and their state").set_defaults(
        run=cmd_transactions
    )
    for name, run, help_text in (
        ("describe-transaction", cmd_describe_transaction, "a transactional id's latest entry"),
        ("abort-transaction", cmd_abort_transaction, "fence an id and finish its transaction"),
    ):
        p = command(name, help_text)
        p.add_argument("transactional_id")
        p.set_defaults(run=run)
    command("expire-transactions", "abort every transaction past its timeout").set_defaults(
        run=cmd_expire_transactions
    )
    p = command("producers", "producers with state in a partition")
    p.add_argument("topic")
    p.add_argument("--partition", type=int, default=0)
    p.set_defaults(run=cmd_producers)
    p = command("metrics", "LSO, live producer ids, open and active transactions")
    p.add_argument("topics", nargs="*")
    p.set_defaults(run=cmd_metrics)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.run(args)
    # OSError and ArrowException: an input file that is missing or unreadable, an
    # output path that cannot be written. One line, no traceback, like our own.
    except (arrowlog.ArrowLogError, OSError, pa.ArrowException) as e:
        print(f"arrowlog: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
