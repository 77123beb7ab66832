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
        commits, totals = [], []
        for _ in range(rounds):
            started = time.perf_counter()
            producer.begin_transaction()
            producer.add_partitions((topic, p) for p in range(count))
            for p in range(count):
                producer.send(topic, batch, partition=p)
            before_commit = time.perf_counter()
            producer.commit_transaction()
            done = time.perf_counter()
            commits.append(done - before_commit)
            totals.append(done - started)
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
            "commit_per_floor": commit / floor,
            "commit_ms": commit * 1000,
            "transaction_ms": statistics.median(totals) * 1000,
            "put_ms": put * 1000,
            "commit_per_put": commit / put,
        }
    pool.shutdown()
    store.close()
    return results
