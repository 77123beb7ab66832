"""Child processes for race and crash tests: ``python -m tests.workers KIND ...``.

Each worker opens its own store from a URL and JSON options, so the processes
share nothing but the store itself.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import pyarrow as pa

import arrowlog
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import Faults, FaultyStore

RACE_SCHEMA = pa.schema([("writer", pa.int32()), ("seq", pa.int32()), ("row", pa.int32())])


def race_batch(writer: int, seq: int) -> pa.RecordBatch:
    rows = 1 + (writer * 7 + seq) % 5  # batches of 1..5 rows: segments of different sizes
    return pa.record_batch(
        {"writer": [writer] * rows, "seq": [seq] * rows, "row": list(range(rows))},
        schema=RACE_SCHEMA,
    )


def _open(args: argparse.Namespace) -> arrowlog.ArrowLog:
    store = open_store(args.url, json.loads(args.options))
    if args.lose_ack or args.slowdown:
        store = FaultyStore(
            store, Faults(lose_ack=args.lose_ack, slowdown=args.slowdown, seed=os.getpid())
        )
    return arrowlog.connect(store)


def put_race(args: argparse.Namespace) -> None:
    """Race put-if-absent on shared keys; print the keys this process won."""
    store = open_store(args.url, json.loads(args.options))
    _wait_until(args.start_at)
    won = []
    for i in range(args.count):
        key = f"race/{i:05d}"
        try:
            store.put_if_absent(key, f"{args.writer}".encode())
            won.append(key)
        except FileExistsError:
            pass
    print(json.dumps(won), flush=True)


def append_race(args: argparse.Namespace) -> None:
    """Append ``count`` batches; write one JSON line per acknowledged batch."""
    log = _open(args)
    _wait_until(args.start_at)
    with open(args.out, "a") as out:
        for seq in range(args.count):
            result = log.append(args.topic, race_batch(args.writer, seq), partition=0)
            out.write(
                json.dumps([args.writer, seq, result.base_offset, result.record_count]) + "\n"
            )
            out.flush()
    print(json.dumps(dict(log.partition(args.topic, 0).stats)), flush=True)


def _wait_until(start_at: float) -> None:
    # All workers start appending at the same instant, so they really contend.
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["put_race", "append_race"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--topic", default="race")
    parser.add_argument("--writer", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out")
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--lose-ack", type=float, default=0.0)
    parser.add_argument("--slowdown", type=float, default=0.0)
    args = parser.parse_args(argv)
    {"put_race": put_race, "append_race": append_race}[args.kind](args)


if __name__ == "__main__":
    main()
