"""Child processes for race and crash tests: ``python -m tests.support.workers KIND ...``.

Each worker opens its own store from a URL and JSON options, so the processes
share nothing but the store itself.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

import pyarrow as pa

import arrowlog
from arrowlog.partition import PartitionLog
from arrowlog.storage.url import open_store
from arrowlog.testing.faulty import Faults, FaultyStore

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
    staged = args.staged if args.mode is None else args.mode != "plain"
    return arrowlog.connect(store, config=arrowlog.LogConfig(staged_appends=staged))


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
    """Append ``count`` batches; write one JSON line per acknowledged batch.
    With ``--mode``: ``plain`` and ``staged`` append as a client with staged
    appends off or on, ``producer`` sends through an idempotent producer,
    ``expected`` appends each batch at the end it just asked for (KIP-27),
    asking again after each OffsetMismatchError."""
    log = _open(args)
    log.end_offsets(args.topic)  # connect and import now, not in the race
    race_batch(args.writer, 0)
    part = log.partition(args.topic, 0)
    producer = log.producer() if args.mode == "producer" else None
    _wait_until(args.start_at)
    until = _start(args)
    with open(args.out, "a") as out:
        for seq in range(args.count):
            if time.time() > until:
                break
            batch = race_batch(args.writer, seq)
            if producer is not None:
                result = producer.send(args.topic, batch, partition=0)
            elif args.mode == "expected":
                result = _append_where_expected(part, batch)
            else:
                result = log.append(args.topic, batch, partition=0)
            out.write(
                json.dumps([args.writer, seq, result.base_offset, result.record_count]) + "\n"
            )
            out.flush()
    print(json.dumps(dict(part.stats)), flush=True)


def _append_where_expected(part: PartitionLog, batch: pa.RecordBatch) -> arrowlog.AppendResult:
    """``batch`` at the end ``part`` reports, asked again until it lands there."""
    while True:
        end = part.end_offset()
        try:
            result = part.append(batch, expected_offset=end)
        except arrowlog.OffsetMismatchError:
            continue
        if result.base_offset != end or part.stats["staged"]:
            raise AssertionError(f"expected offset {end}: landed at {result.base_offset}")
        return result


def read_race(args: argparse.Namespace) -> None:
    """For ``--seconds``, follow the log the append_race writers extend: a
    long-lived reader and a fresh one (opened anew each round) list the log as
    often as they can, and read what is new every tenth round. Print how many
    rounds ran and every error (a listing racing the appends must never cause one)."""
    log = arrowlog.connect(open_store(args.url, json.loads(args.options)))
    following = log.partition(args.topic, 0)
    following.end_offset()  # connect and import now, not in the race
    race_batch(0, 0)
    until = _start(args)
    seen = rounds = 0
    errors: list[str] = []
    while time.time() < until:
        rounds += 1
        try:
            end = following.end_offset()
            fresh = PartitionLog(log.store, following.topic, 0, log.config)
            fresh_end = fresh.end_offset()
            if rounds % 10 == 0:
                _check_race_rows(following.read(seen, end), end - seen)
                seen = end
                if fresh.read(max(0, fresh_end - 10), fresh_end).num_rows != min(10, fresh_end):
                    raise AssertionError("a fresh reader read the wrong number of rows")
        except Exception as e:  # noqa: BLE001 - every error is reported to the test
            errors.append(f"{type(e).__name__}: {e}")
    print(json.dumps({"rounds": rounds, "end": seen, "errors": errors}), flush=True)


def _check_race_rows(table: pa.Table, count: int) -> None:
    """``table`` starts at a segment boundary and holds whole race batches."""
    if table.num_rows != count:
        raise AssertionError(f"read {table.num_rows} rows, wanted {count}")
    expect = 0
    columns = (table.column(name).to_pylist() for name in RACE_SCHEMA.names)
    for writer, seq, row in zip(*columns, strict=True):
        if row != expect:
            raise AssertionError(f"writer {writer} seq {seq}: row {row}, wanted {expect}")
        expect = 0 if row + 1 == race_batch(writer, seq).num_rows else row + 1
    if expect:
        raise AssertionError("read ended inside a batch")


TXN_SCHEMA = pa.schema([("v", pa.int64())])


def zombie(args: argparse.Namespace) -> None:
    """Worker 1 (first) or worker 2 of the zombie scenario: consume offset 0 of
    ``in``, produce its transformation to ``out``, commit with the offsets."""
    log = arrowlog.connect(open_store(args.url, json.loads(args.options)))
    producer = log.producer(transactional_id="copier.in.0")
    producer.init_transactions()
    consumer = log.consumer(group_id="copier")
    start = consumer.committed("in", 0) or 0
    value = int(consumer.read("in", 0, start, start + 1).column("v")[0].as_py())
    output = pa.record_batch({"v": [value * 10]}, schema=TXN_SCHEMA)
    producer.begin_transaction()
    producer.send_offsets_to_transaction({("in", 0): start + 1}, group_id="copier")
    if args.writer == 1 and args.early:
        producer.send("out", output, partition=0)  # out/0 is now registered
    if args.writer == 1:
        print("READY", flush=True)  # the parent SIGSTOPs us here
        sys.stdin.readline()
    try:
        producer.send("out", output, partition=0)
        producer.commit_transaction()
    except arrowlog.ProducerFencedError:
        print("FENCED", flush=True)
        return
    print("COMMITTED", flush=True)


COPY_SCHEMA = pa.schema([("id", pa.int64()), ("source", pa.int32())])


def copier(args: argparse.Namespace) -> None:
    """Consume-transform-produce input partition ``--writer`` of ``in`` into the
    same partition of ``out``, ``--count`` records per transaction, until the
    group has consumed the whole input."""
    log = arrowlog.connect(open_store(args.url, json.loads(args.options)))
    source = args.writer
    producer = log.producer(transactional_id=f"copier.in.{source}")
    producer.init_transactions()
    print("STARTED", flush=True)  # the parent's kill timer starts now
    consumer = log.consumer(group_id="copier")
    position = consumer.committed("in", source) or 0
    end = consumer.end_offset("in", source)
    while position < end:
        upto = min(position + args.count, end)
        batch = consumer.read("in", source, position, upto)
        half = batch.num_rows // 2
        with producer.transaction():  # two sends: a kill between them leaves half a copy
            producer.send("out", batch.slice(0, half), partition=source)
            producer.send_offsets_to_transaction({("in", source): upto}, group_id="copier")
            producer.send("out", batch.slice(half), partition=source)
        position = upto


def stream_copy(args: argparse.Namespace) -> None:
    """A Structured Streaming query from topic ``src`` to ``dst`` (exactly once),
    run until killed (``--action run``) or until caught up (``--action drain``)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    source = (
        spark.readStream.format("arrowlog")
        .option("topic", "src")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "150")
        .load(args.url)
    )
    out = (
        source.select("id", "partition")
        .writeStream.format("arrowlog")
        .option("topic", "dst")
        .option("txnAppId", "copy")
        .option("checkpointLocation", args.out)
    )
    if args.action == "drain":
        out.trigger(availableNow=True).start(args.url).awaitTermination()
        return
    query = out.trigger(processingTime="200 milliseconds").start(args.url)
    print("STARTED", flush=True)
    query.awaitTermination()


CRASH_STEPS = ["after_begin", "after_data", "after_prepare", "after_some_markers",
               "after_all_markers", "before_complete"]  # fmt: skip


def txn_crash(args: argparse.Namespace) -> None:
    """Run one transaction over the three partitions of ``out`` and SIGKILL
    ourselves at the protocol step ``--step``."""
    from arrowlog.partition import PartitionLog
    from arrowlog.producer import _coordinator_session as session_module
    from arrowlog.producer._transactions import TransactionManager
    from arrowlog.txn.coordinator import CoordinatorLog, TxnState

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    step = args.step
    markers = {"n": 0}
    real_register = TransactionManager._register
    real_finish = getattr(session_module, "finish")  # noqa: B009
    real_marker = PartitionLog.append_control
    real_write = CoordinatorLog.write

    def register(self, **kwargs):  # type: ignore[no-untyped-def]
        real_register(self, **kwargs)
        if step == "after_begin":
            die()

    def finish(*a, **k):  # type: ignore[no-untyped-def]
        if step == "after_prepare":
            die()
        return real_finish(*a, **k)

    def marker(self, *a, **k):  # type: ignore[no-untyped-def]
        result = real_marker(self, *a, **k)
        markers["n"] += 1
        if step == "after_some_markers" or (step == "after_all_markers" and markers["n"] == 3):
            die()
        return result

    def write(self, prev, new, **kwargs):  # type: ignore[no-untyped-def]
        if step == "before_complete" and new.state in (
            TxnState.COMPLETE_COMMIT,
            TxnState.COMPLETE_ABORT,
        ):
            die()
        return real_write(self, prev, new, **kwargs)

    TransactionManager._register = register  # type: ignore[method-assign]
    setattr(session_module, "finish", finish)  # noqa: B010 - where the producer looks it up
    PartitionLog.append_control = marker  # type: ignore[method-assign]
    CoordinatorLog.write = write  # type: ignore[method-assign]

    log = arrowlog.connect(open_store(args.url, json.loads(args.options)))
    producer = log.producer(transactional_id="crashy")
    producer.init_transactions()
    producer.begin_transaction()
    for p in range(3):
        producer.send("out", pa.record_batch({"v": [p, p + 100]}, schema=TXN_SCHEMA), partition=p)
        if step == "after_data" and p == 1:
            die()
    producer.send_offsets_to_transaction({("in", 0): 3}, group_id="crashy-group")
    if args.action == "commit":
        producer.commit_transaction()
    else:
        producer.abort_transaction()
    print("FINISHED", flush=True)


def _start(args: argparse.Namespace) -> float:
    """With ``--ready``, say READY and wait for the parent's go (a line on stdin):
    importing and connecting can take seconds on a loaded machine. The time to
    stop, ``--seconds`` from now (never without it)."""
    if args.ready:
        print("READY", flush=True)
        sys.stdin.readline()
    return time.time() + args.seconds if args.seconds else float("inf")


def _wait_until(start_at: float) -> None:
    # All workers start appending at the same instant, so they really contend.
    delay = start_at - time.time()
    if delay > 0:
        time.sleep(delay)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "kind",
        choices=["put_race", "append_race", "read_race", "zombie", "txn_crash", "copier",
                 "stream_copy"],
    )  # fmt: skip
    parser.add_argument("--step", choices=CRASH_STEPS)
    parser.add_argument("--early", action="store_true", help="zombie: produce before the pause")
    parser.add_argument("--action", choices=["commit", "abort", "run", "drain"], default="commit")
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--topic", default="race")
    parser.add_argument("--writer", type=int, default=0)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--out")
    parser.add_argument("--start-at", type=float, default=0.0)
    parser.add_argument("--ready", action="store_true", help="say READY, start on a stdin line")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long")
    parser.add_argument("--lose-ack", type=float, default=0.0)
    parser.add_argument("--slowdown", type=float, default=0.0)
    parser.add_argument("--staged", action="store_true", help="stage appends that lose a race")
    parser.add_argument(
        "--mode", choices=["plain", "staged", "producer", "expected"], help="append_race: how"
    )
    args = parser.parse_args(argv)
    workers = {"put_race": put_race, "append_race": append_race, "read_race": read_race,
               "zombie": zombie, "txn_crash": txn_crash, "copier": copier,
               "stream_copy": stream_copy}  # fmt: skip
    workers[args.kind](args)


if __name__ == "__main__":
    main()
