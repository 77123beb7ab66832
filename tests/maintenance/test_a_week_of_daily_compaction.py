"""A week of a log in minutes (issue 11): an injected clock (:mod:`tests.support.clocks`)
makes every day pass at once. Each day, many small transactions (some aborted),
multi-partition transactions written the way the Spark sink writes (several
batches per partition, then one commit), and plain appends go to 4 partitions;
then compaction and vacuum run as a daily job would. At the end the object
count and the bytes stored are reported before and after, every committed range
(each day's, and each whole partition) reads back exactly as before, with its
offsets and timestamps, and opening a partition costs the same requests.

Run with ``-s`` to see the report.

Origin: issue 11, compaction of small transactions (was tests/test_week.py).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import TopicConfig
from arrowlog.maintenance.cleanup import STAGING_PREFIX
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.read.scan import output_schema, plan_scan, read_task
from arrowlog.storage import Store
from arrowlog.storage.wrappers import CountingStore
from tests.support.clocks import Clocks, ClockStore
from tests.support.schedules import FAST

DAY_MS = 24 * 3600 * 1000
PARTITIONS = 4
FIELDS: list[pa.Field[Any]] = [
    pa.field("id", pa.int64()),
    pa.field("kind", pa.string()),
    pa.field("amount", pa.float64()),
]
SCHEMA = pa.schema(FIELDS)


def batch(first: int, rows: int) -> pa.RecordBatch:
    ids = list(range(first, first + rows))
    return pa.record_batch(
        {
            "id": ids,
            "kind": [("click", "view", "buy")[i % 3] for i in ids],
            "amount": [i * 0.5 for i in ids],
        },
        schema=SCHEMA,
    )


def usage(store: Store) -> tuple[int, int]:
    infos = [i for i in store.list("events") if "/" in i.key]
    return len(infos), sum(i.size for i in infos)


def committed(log: arrowlog.ArrowLog, ranges: dict[int, list[tuple[int, int]]]) -> list[pa.Table]:
    """Every range read_committed, as the Spark source reads it: rows with
    their partition, offset and timestamp."""
    schema = output_schema(SCHEMA)
    out = []
    for partition, spans in ranges.items():
        for lo, hi in spans:
            plan = plan_scan(
                log, ["events"], starting={("events", partition): lo},
                ending={("events", partition): hi},
            )  # fmt: skip
            tasks = [t for t in plan.tasks if t.partition == partition]
            batches = [b for t in tasks for b in read_task(log.store, t, schema)]
            out.append(pa.Table.from_batches(batches, schema=schema).sort_by("offset"))
    return out


def bookkeeping(store: Store) -> dict[str, int]:
    """How many objects of each kind of bookkeeping are stored."""
    kinds = ("producer-ids", "coordinator", "groups", "staging", "transactional-ids")
    return {k: sum(1 for _ in store.list(f"_arrowlog/{k}/")) for k in kinds}


def open_cost(store: Store) -> dict[str, int]:
    counting = CountingStore(store)
    arrowlog.connect(counting, config=FAST).end_offsets("events")
    return dict(counting.counts)


#: memory and a local directory: the clock is the injected one, so on SeaweedFS the
#: week is the same requests again (thousands: the suite's time); daily compaction
#: and vacuum on SeaweedFS is test_cleanup_schedules' three weeks, run there too
WEEK_STORES = ["memory", "local"]


@pytest.mark.slow
@pytest.mark.parametrize("store_spec", WEEK_STORES, indirect=True)
def test_a_week_of_small_transactions_compacts_to_few_objects_reading_the_same(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = ClockStore(store)
    clocks = Clocks(clock, monkeypatch)
    log = arrowlog.connect(clock, config=FAST)
    log.create_topic(
        "events", SCHEMA, partitions=PARTITIONS, config=TopicConfig(checkpoint_interval=20)
    )
    app = log.producer(transactional_id="app")
    app.init_transactions()
    group = log.consumer(group_id="etl")
    job = log.producer(transactional_id="spark-job")
    job.init_transactions()
    ids = 0
    days: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    for _day in range(7):
        starts = log.end_offsets("events")
        for n in range(24):  # small transactions, one batch each
            app.begin_transaction()
            app.send("events", batch(ids, 5), partition=n % PARTITIONS)
            ids += 5
            (app.abort_transaction if n % 6 == 5 else app.commit_transaction)()
        for _ in range(2):  # the Spark sink's shape: batches per partition, one commit
            job.begin_transaction()
            for p in range(PARTITIONS):
                for _ in range(3):
                    job.send("events", batch(ids, 40), partition=p)
                    ids += 40
            job.commit_transaction()
        for p in range(PARTITIONS):  # plain appends, a producer each (as Spark tasks)
            task = log.producer()
            task.send("events", batch(ids, 10), partition=p)
            task.flush()
            ids += 10
        for hour in range(24):  # a consumer group commits every hour
            group.commit({("events", p): hour for p in range(PARTITIONS)})
        # a streaming task's staged file whose micro-batch failed
        clock.put_if_absent(f"{STAGING_PREFIX}q/{_day}.arrow", b"staged rows")
        app.flush()
        job.flush()
        ends = {p: log.consumer().stable_offset("events", p) for p in range(PARTITIONS)}
        for p in range(PARTITIONS):
            days[p].append((starts[p], ends[p]))
        clocks.advance(DAY_MS)
    whole = {p: [(0, spans[-1][1])] for p, spans in days.items()}
    before_reads = committed(log, days) + committed(log, whole)
    before_objects, before_bytes = usage(store)
    before_open = open_cost(clock)

    done = log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(TopicConfig().delete_delay_ms + 2000)
    removed = log.maintenance.vacuum()

    after_objects, after_bytes = usage(store)
    fresh = arrowlog.connect(clock, config=FAST)
    assert committed(fresh, days) + committed(fresh, whole) == before_reads
    assert committed(log, days) + committed(log, whole) == before_reads
    after_open = open_cost(clock)
    print(
        f"\na week on {store.url.split(':')[0]}: {sum(len(s) for s in days.values())} "
        f"day-partitions, {len(done)} compacted objects, {len(removed)} objects removed; "
        f"objects {before_objects} -> {after_objects}, bytes {before_bytes:,} -> "
        f"{after_bytes:,}; opening a partition: {before_open} -> {after_open}"
    )
    assert len(done) >= PARTITIONS
    assert after_objects * 4 < before_objects
    assert after_bytes < before_bytes
    assert after_open == before_open

    # the bookkeeping: a week more (quiet), and the daily job runs again
    position = {p: group.committed("events", p) for p in range(PARTITIONS)}
    kept_before = bookkeeping(store)
    clocks.advance(7 * DAY_MS)
    log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    clocks.advance(TopicConfig().delete_delay_ms + 2000)
    log.maintenance.vacuum()
    kept_after = bookkeeping(store)
    print(f"bookkeeping a week later: {kept_before} -> {kept_after}")
    fresh = arrowlog.connect(clock, config=FAST)
    assert committed(fresh, days) + committed(fresh, whole) == before_reads
    assert {p: fresh.consumer(group_id="etl").committed("events", p) for p in position} == position
    # a group: its newest entry and the start object cleanup put
    assert kept_after["groups"] == 2 and kept_after["staging"] == 0
    assert kept_after["producer-ids"] <= 2  # at most the two transactional ids'
    # what stays: the entries of the transactions whose records are in the
    # tail not compacted yet (a reader may ask about them), and the newest
    assert kept_after["coordinator"] * 5 < kept_before["coordinator"]
    assert sum(kept_after.values()) * 5 < sum(kept_before.values())
