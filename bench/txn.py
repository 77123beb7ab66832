"""Commit latency against the number of partitions a transaction touches.

A commit is three sequential stages whatever the partition count: the
PREPARE_COMMIT entry, the markers (one per partition, written in parallel), the
COMPLETE_COMMIT entry. Two baselines on the same store: one small put-if-absent
(``commit / put`` is 3 where requests are latency-bound), and the floor of the
three stages measured with raw puts, ``put + N puts in parallel + put``, which is
what the commit costs where the client's CPU per request dominates (loopback).
"""

from __future__ import annotations

import statistics
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

import arrowlog
from arrowlog.storage.url import open_store

SCHEMA = pa.schema([("v", pa.int64())])


def bench_commit(
    url: str, options: dict[str, object], partition_counts: tuple[int, ...], rounds: int
) -> dict[int, dict[str, float]]:
    store = open_store(url, options)
    log = arrowlog.connect(store)
    puts = []
    for i in range(rounds * 3):
        started = time.perf_counter()
        store.put_if_absent(f"bench-put/{uuid.uuid4().hex}-{i}", b"x" * 200)
        puts.append(time.perf_counter() - started)
    put = statistics.median(puts)
    results = {}
    pool = ThreadPoolExecutor(max_workers=16)
    batch = pa.record_batch({"v": [1, 2, 3]}, schema=SCHEMA)
    for count in partition_counts:
        topic = f"commit-{count}"
        log.create_topic(topic, SCHEMA, partitions=count)
        producer = log.producer(transactional_id=f"bench-{count}")
        producer.init_transactions()
        commits: list[float] = []
        ends: list[float] = []
        totals: list[float] = []
        for _ in range(rounds):
            started = time.perf_counter()
            producer.begin_transaction()
            for p in range(count):
                producer.send(topic, batch, partition=p)
            before_commit = time.perf_counter()
            producer.commit_transaction()  # one PUT, PREPARE_COMMIT
            committed = time.perf_counter()
            producer.flush()  # markers and COMPLETE, in the background
            done = time.perf_counter()
            commits.append(committed - before_commit)
            ends.append(done - before_commit)
            totals.append(done - started)
        producer.close()
        floors = []
        for r in range(rounds):
            keys = [f"bench-floor/{count}/{r}/{uuid.uuid4().hex}-{i}" for i in range(count + 2)]
            started = time.perf_counter()
            store.put_if_absent(keys[0], b"x" * 200)
            list(pool.map(lambda k: store.put_if_absent(k, b"x" * 600), keys[1:-1]))
            store.put_if_absent(keys[-1], b"x" * 200)
            floors.append(time.perf_counter() - started)
        commit = statistics.median(commits)
        floor = statistics.median(floors)
        results[count] = {
            "floor_ms": floor * 1000,
            "end_per_floor": statistics.median(ends) / floor,
            "commit_ms": commit * 1000,
            "end_ms": statistics.median(ends) * 1000,
            "transaction_ms": statistics.median(totals) * 1000,
            "put_ms": put * 1000,
            "commit_per_put": commit / put,
        }
    pool.shutdown()
    store.close()
    return results


def bench_small_transactions(
    url: str,
    options: dict[str, object],
    delta_uri: str,
    delta_options: dict[str, str] | None,
    rounds: int = 30,
) -> dict[str, float]:
    """Transactions of one 16 KiB batch to one partition, one after another,
    against delta-rs appending the same batch to a Delta table on the same store
    (each append one Delta commit: the lake's unit of atomic write)."""
    from deltalake import write_deltalake

    rows = 16 * 1024 // 8
    batch = pa.record_batch({"v": pa.array(range(rows), pa.int64())}, schema=SCHEMA)
    log = arrowlog.connect(url, options)
    log.create_topic("small-txn", SCHEMA)
    producer = log.producer(transactional_id="bench-small")
    producer.init_transactions()

    commits: list[float] = []

    def one() -> None:
        producer.begin_transaction()
        producer.send("small-txn", batch, partition=0)
        began = time.perf_counter()
        producer.commit_transaction()  # returns at PREPARE_COMMIT
        commits.append(time.perf_counter() - began)

    one()  # warm: the partition is open, the coordinator log read
    producer.flush()
    commits.clear()
    started = time.perf_counter()
    for _ in range(rounds):
        one()
    producer.flush()  # the last one's markers and COMPLETE count too
    ours = (time.perf_counter() - started) / rounds
    producer.close()
    table = pa.Table.from_batches([batch])
    write_deltalake(delta_uri, table, mode="append", storage_options=delta_options)
    started = time.perf_counter()
    for _ in range(rounds):
        write_deltalake(delta_uri, table, mode="append", storage_options=delta_options)
    delta = (time.perf_counter() - started) / rounds
    return {
        "arrowlog_txn_s": 1 / ours,
        "delta_commits_s": 1 / delta,
        "ratio": delta / ours,
        "commit_call_ms_median": statistics.median(commits) * 1000,
    }
