"""Appends through a store that loses replies, fails and throttles: every
acknowledged batch is in the log exactly once, at the offset it was told."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import LogConfig, PartitionLog, RetryPolicy, TopicConfig
from arrowlog.storage import Store
from arrowlog.testing.faulty import Faults, FaultyStore

SCHEMA = pa.schema([("seq", pa.int64())])


def rows(seq: int, n: int) -> pa.RecordBatch:
    return pa.record_batch({"seq": [seq] * n}, schema=SCHEMA)


FAST_RETRY = LogConfig(retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.01, deadline=30))


@pytest.mark.parametrize("expected", [False, True], ids=["at-end", "expected-offset"])
def test_lost_replies_failures_and_throttling_never_duplicate_or_lose(
    store: Store, expected: bool
) -> None:
    faults = Faults(lose_ack=0.3, fail_before=0.1, slowdown=0.1, seed=7)
    faulty = FaultyStore(store, faults)
    setup = arrowlog.connect(store)
    setup.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=7))
    log = arrowlog.connect(faulty, config=FAST_RETRY)
    acked = []
    offset = 0
    for seq in range(120):
        n = 1 + seq % 4
        r = log.append("t", rows(seq, n), expected_offset=offset if expected else None)
        assert r.base_offset == offset
        acked.append((seq, r.base_offset, n))
        offset = r.next_offset
    assert faulty.injected["lose_ack"] > 10 and faulty.injected["slowdown"] > 3
    table = arrowlog.connect(store).read("t")
    want = [seq for seq, _, n in acked for _ in range(n)]
    assert table["seq"].to_pylist() == want


def test_a_store_that_never_answers_gives_an_unknown_outcome_not_a_success(store: Store) -> None:
    topic = arrowlog.connect(store).create_topic("t", SCHEMA)
    config = LogConfig(retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.005, deadline=0.3))
    # Every request fails as if its reply were lost: writes may have happened,
    # and reading back cannot tell.
    part = PartitionLog(FaultyStore(store, Faults(fail_before=1.0)), topic, 0, config)
    part._checkpoints.opened = True  # an empty partition known to end at 0, just now
    part._known.end_seen(time.monotonic())
    with pytest.raises(arrowlog.AppendOutcomeUnknownError) as info:
        part.append(rows(1, 1))
    assert info.value.offset == 0 and info.value.retriable


def test_throttling_until_the_deadline_is_a_retriable_error_that_wrote_nothing(
    store: Store,
) -> None:
    topic = arrowlog.connect(store).create_topic("t", SCHEMA)
    config = LogConfig(retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.005, deadline=0.2))
    part = PartitionLog(FaultyStore(store, Faults(slowdown=1.0)), topic, 0, config)
    part._checkpoints.opened = True
    with pytest.raises(arrowlog.TransientStoreError) as info:
        part.append(rows(1, 1))
    assert info.value.retriable and not info.value.maybe_applied
    assert arrowlog.connect(store).end_offsets("t") == {0: 0}


def test_faults_config_is_validated() -> None:
    with pytest.raises(arrowlog.InvalidConfigError):
        Faults(lose_ack=1.5)
    with pytest.raises(arrowlog.InvalidConfigError):
        RetryPolicy(deadline=0)
