"""Latency of one small batch, beside the store's own floor, in one run.

For 1 KiB batches, ``samples`` rounds, each round measuring once, in turn:

- put: obstore's own conditional PUT (``put(mode="create")``) of the segment
  bytes such a batch is stored as, to a new key on the same store; get: an
  obstore GET of that object (the floors);
- send: an idempotent producer's ``send`` to partition 0, acknowledged
  (``flush`` returned);
- send to read: the same batch, from before its send until a consumer on its
  own connection (read_uncommitted) has it back, polling from the
  acknowledgement on;
- transaction: ``begin_transaction``, ``send``, ``commit_transaction``
  returned (the commit point, PREPARE_COMMIT, is written; markers and
  COMPLETE_COMMIT follow in the background and are waited for after the
  round, outside the clock);
- transaction to read: from before ``begin_transaction`` until a
  read_committed consumer on its own connection has the batch.

The rounds interleave the measures, so that each sees the same server.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import obstore

import arrowlog
from bench.backend import Backend
from bench.core import make_batch, segments_of
from bench.figures import latency_ms

RECORD_BYTES = 1 << 10
SAMPLES = 300
WARM_ROUNDS = 5
MEASURES = ("put", "get", "send", "send_to_read", "transaction", "transaction_to_read")
LABELS = {
    "put": "obstore conditional PUT (floor)",
    "get": "obstore GET of it (floor)",
    "send": "idempotent send, acknowledged",
    "send_to_read": "send to read (read_uncommitted)",
    "transaction": "one-batch transaction, committed",
    "transaction_to_read": "transaction to read (read_committed)",
}


def poll_until_visible(consumer: arrowlog.Consumer, topic: str, offset: int) -> int:
    """Read from ``offset`` until the record there comes back; how many reads it took."""
    polls = 0
    while True:
        polls += 1
        try:
            if consumer.read(topic, 0, start=offset).num_rows:
                return polls
        except arrowlog.OffsetOutOfRangeError:
            pass  # the reader's end is still below the offset


def bench_latency(backend: Backend, samples: int = SAMPLES) -> dict[str, dict[str, float]]:
    batch = make_batch(RECORD_BYTES)
    segment = segments_of(batch, 1)[0]
    tag = uuid.uuid4().hex[:6]
    writer = arrowlog.connect(backend.url, backend.options)
    reader = arrowlog.connect(backend.url, backend.options)  # the consumer's own client
    plain, txn = f"latency-send-{tag}", f"latency-txn-{tag}"
    for topic in (plain, txn):
        writer.create_topic(topic, batch.schema)
    producer = writer.producer()
    transactional = writer.producer(transactional_id=f"bench-latency-{tag}")
    transactional.init_transactions()
    uncommitted = reader.consumer(isolation_level="read_uncommitted")
    committed = reader.consumer(isolation_level="read_committed")
    times: dict[str, list[float]] = {name: [] for name in MEASURES}
    polls = {"send_to_read": 0, "transaction_to_read": 0}

    def floors(i: int) -> dict[str, float]:
        key = f"latency-floor/{tag}/{i:08d}"
        began = time.perf_counter()
        obstore.put(backend.raw, key, segment, mode="create")
        put = time.perf_counter()
        obstore.get(backend.raw, key).bytes()
        return {"put": put - began, "get": time.perf_counter() - put}

    def send(_: int) -> dict[str, float]:
        began = time.perf_counter()
        result = producer.send(plain, batch, partition=0)
        producer.flush()
        acked = time.perf_counter()
        polls["send_to_read"] += poll_until_visible(uncommitted, plain, result.base_offset)
        return {"send": acked - began, "send_to_read": time.perf_counter() - began}

    def transaction(_: int) -> dict[str, float]:
        began = time.perf_counter()
        transactional.begin_transaction()
        result = transactional.send(txn, batch, partition=0)
        transactional.commit_transaction()
        done = time.perf_counter()
        polls["transaction_to_read"] += poll_until_visible(committed, txn, result.base_offset)
        seen = time.perf_counter()
        transactional.flush()  # markers and COMPLETE_COMMIT, outside the clock
        return {"transaction": done - began, "transaction_to_read": seen - began}

    rounds: list[Callable[[int], dict[str, float]]] = [floors, send, transaction]
    for i in range(-WARM_ROUNDS, samples):
        # rotate the order so no measure always runs right after the same one
        for measure in rounds[i % 3 :] + rounds[: i % 3]:
            for name, seconds in measure(i).items():
                if i >= 0:
                    times[name].append(seconds)
    producer.close()
    transactional.close()
    writer.close()
    reader.close()
    out = {name: latency_ms(t) for name, t in times.items()}
    for name, count in polls.items():
        out[name]["polls_per_read"] = count / (samples + WARM_ROUNDS)
    return out


def print_latency(results: dict[str, dict[str, dict[str, float]]]) -> None:
    for name, r in results.items():
        samples = int(r["put"]["count"])
        put = r["put"]
        print(f"Latency on {name}, {RECORD_BYTES >> 10} KiB batches, {samples} interleaved "
              "rounds (p50 / p99 ms; x put = p50 and p99 against obstore's conditional "
              "PUT's)")  # fmt: skip
        print(f"{'measure':<38} {'p50 ms':>7} {'p99 ms':>7} {'x put':>11}")
        for measure in MEASURES:
            m = r[measure]
            ratio = f"{m['p50_ms'] / put['p50_ms']:.1f} / {m['p99_ms'] / put['p99_ms']:.1f}"
            print(f"{LABELS[measure]:<38} {m['p50_ms']:>7.2f} {m['p99_ms']:>7.2f} {ratio:>11}")
        print(
            f"(reads per visible record: send {r['send_to_read']['polls_per_read']:.2f}, "
            f"transaction {r['transaction_to_read']['polls_per_read']:.2f})"
        )
        print()
