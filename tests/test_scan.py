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
