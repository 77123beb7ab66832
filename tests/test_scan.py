"""Scan planning without Spark: offsets JSON with partitions left out."""

from __future__ import annotations

import pyarrow as pa

import arrowlog
from arrowlog.scan import plan_scan


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
