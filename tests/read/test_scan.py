"""Scan planning without Spark: offsets JSON with partitions left out."""

from __future__ import annotations

import pyarrow as pa

import arrowlog
from arrowlog.read.scan import ScanPlan, plan_scan


def test_partitions_left_out_of_the_json_start_at_earliest_and_end_at_latest() -> None:
    log = arrowlog.connect("memory://")
    schema = pa.schema([("v", pa.int64())])
    log.create_topic("t", schema, partitions=2)
    for p in (0, 1):
        log.append("t", pa.record_batch({"v": [1, 2, 3]}, schema=schema), partition=p)
    plan = plan_scan(log, ["t"], starting={("t", 0): 1}, ending={("t", 0): 2})
    spans = {(r.partition, r.start, r.end) for r in plan.ranges}
    assert spans == {(0, 1, 2), (1, 0, 3)}


def test_latest_may_end_lower_to_keep_a_transaction_whole_a_numeric_end_never_does() -> None:
    """An undecided transaction U holds t/0's LSO; a committed T sits after it
    in t/0 and in t/1. "latest" ends t/1 before T (T whole or not at all); an
    end given as a number (a streaming micro-batch's), even one equal to the
    LSO, is kept as given: its offsets are promised whole."""
    log = arrowlog.connect("memory://")
    schema = pa.schema([("v", pa.int64())])
    log.create_topic("t", schema, partitions=2)
    one = pa.record_batch({"v": [1]}, schema=schema)
    u = log.producer(transactional_id="u")
    u.init_transactions()
    u.begin_transaction()
    u.send("t", one, partition=0)
    log.append("t", one, partition=1)
    t = log.producer(transactional_id="t")
    t.init_transactions()
    with t.transaction():
        t.send("t", one, partition=0)
        t.send("t", one, partition=1)
    t.flush()  # its markers
    assert log.stable_offsets("t") == {0: 0, 1: 3}
    latest = plan_scan(log, ["t"])
    assert {(r.partition, r.end) for r in latest.ranges} == {(0, 0), (1, 1)}
    numeric = plan_scan(log, ["t"], ending={("t", 0): 0, ("t", 1): 3})
    assert {(r.partition, r.end) for r in numeric.ranges} == {(0, 0), (1, 3)}
    assert sum(s.hi - s.lo for task in numeric.tasks for s in task.segments) == 2


def torn_log() -> arrowlog.ArrowLog:
    """An open transaction A holds t/1's LSO; a committed B has records in t/0
    (offsets 1, 2) and in t/1 behind A's; a plain record in t/0 before B (0)
    and after it (4, past B's marker at 3)."""
    log = arrowlog.connect("memory://")
    schema = pa.schema([("v", pa.int64())])
    log.create_topic("t", schema, partitions=2)
    log.append("t", pa.record_batch({"v": [0]}, schema=schema), partition=0)
    a = log.producer(transactional_id="a")
    a.init_transactions()
    a.begin_transaction()
    a.send("t", pa.record_batch({"v": [100]}, schema=schema), partition=1)
    b = log.producer(transactional_id="b")
    b.init_transactions()
    with b.transaction():
        b.send("t", pa.record_batch({"v": [1, 2]}, schema=schema), partition=0)
        b.send("t", pa.record_batch({"v": [3]}, schema=schema), partition=1)
    b.flush()  # its markers
    log.append("t", pa.record_batch({"v": [4]}, schema=schema), partition=0)
    assert log.stable_offsets("t") == {0: 5, 1: 0}
    return log


def planned(plan: ScanPlan) -> set[tuple[int, int]]:
    """(partition, offset) of every record the plan's tasks read."""
    return {
        (task.partition, offset)
        for task in plan.tasks
        for s in task.segments
        for offset in range(s.lo, s.hi)
    }


def test_filters_pick_records_of_the_snapshot_and_never_move_where_it_ends() -> None:
    """The snapshot ends t/0 before B (B's t/1 records are behind A). A read of
    t/0 alone, or of offsets that end before B's marker, still ends there:
    the filters only pick records of the whole read's snapshot."""
    log = torn_log()
    whole = plan_scan(log, ["t"])
    assert {(r.partition, r.start, r.end) for r in whole.ranges} == {(0, 0, 1), (1, 0, 0)}
    assert planned(whole) == {(0, 0)}
    for narrowed in (
        plan_scan(log, ["t"], keep_partitions={("t", 0)}),
        plan_scan(log, ["t"], max_offset=2),
        plan_scan(log, ["t"], keep_partitions={("t", 0)}, min_offset=1),
        plan_scan(log, ["t"], min_timestamp_us=0),
    ):
        assert narrowed.ranges == whole.ranges
        assert planned(narrowed) <= planned(whole)
    assert planned(plan_scan(log, ["t"], keep_partitions={("t", 0)}, min_offset=1)) == set()
    assert planned(plan_scan(log, ["t"], keep_partitions={("t", 1)})) == set()


def test_offset_filters_cut_the_tasks_inside_the_snapshot() -> None:
    log = arrowlog.connect("memory://")
    schema = pa.schema([("v", pa.int64())])
    log.create_topic("t", schema, partitions=2)
    for p in (0, 1):
        log.append("t", pa.record_batch({"v": [1, 2, 3, 4]}, schema=schema), partition=p)
    plan = plan_scan(log, ["t"], keep_partitions={("t", 1)}, min_offset=1, max_offset=2)
    assert {(r.partition, r.start, r.end) for r in plan.ranges} == {(0, 0, 4), (1, 0, 4)}
    assert planned(plan) == {(1, 1), (1, 2)}
