"""Exactly-once under scheduled faults: each test replays, step by step, a schedule
that broke a guarantee (issue 7). Random faults never found these: each needs two
events in a given order, which a :class:`ScriptedStore` makes happen.

Every test runs on memory, a local directory and SeaweedFS over HTTP.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import TypeVar

import pyarrow as pa
import pytest

import arrowlog
from arrowlog import LogConfig, RetryPolicy
from arrowlog.errors import AppendOutcomeUnknownError
from arrowlog.storage import Store
from arrowlog.storage.scripted import ScriptedStore
from arrowlog.topic import segment_key

T = TypeVar("T")
SCHEMA = pa.schema([("v", pa.int64())])
# Short deadlines: a schedule decides every outcome, the clock never should.
FAST = LogConfig(retry=RetryPolicy(initial_backoff=0.001, max_backoff=0.01, deadline=0.3))


def rows(*values: int) -> pa.RecordBatch:
    return pa.record_batch({"v": list(values)}, schema=SCHEMA)


class Background:
    """Runs a call in a thread; ``result()`` joins it and re-raises its error."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._out: list[object] = []
        self._err: list[BaseException] = []

        def run() -> None:
            try:
                self._out.append(call())
            except BaseException as e:  # noqa: BLE001 - re-raised by result()
                self._err.append(e)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def result(self, timeout: float = 30.0) -> object:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the scheduled call never finished"
        if self._err:
            raise self._err[0]
        return self._out[0]


@pytest.fixture
def scripted(store: Store) -> Iterator[ScriptedStore]:
    yield ScriptedStore(store)


def values(log: arrowlog.ArrowLog, topic: str, partition: int = 0) -> list[int]:
    column = log.partition(topic, partition).read().column("v")
    return [v for v in column.to_pylist() if isinstance(v, int)]


# --- 1. a PUT that lands after its reply timed out ---------------------------------


def test_late_put_after_unknown_outcome_is_recognised_by_writer_identity(
    store: Store, scripted: ScriptedStore
) -> None:
    """send: the PUT times out on the client, the store applies it later.
    flush() resends with the same sequence: its tail check finds nothing yet, its
    PUT meets 503s, the late original lands, its next PUT finds the key taken.
    What sits there is the same (producer id, epoch, sequence): its own batch,
    not a rival's, so nothing is appended a second time."""
    arrowlog.connect(store).create_topic("t", SCHEMA)
    log = arrowlog.connect(scripted, config=FAST)
    p = log.producer()
    seg0 = segment_key("t", 0, 0)
    late = scripted.late_put(seg0)
    failing = scripted.fail("put_if_absent", seg0, nth=2, times=10**9)
    with pytest.raises(AppendOutcomeUnknownError):
        p.send("t", rows(1, 2), partition=0)
    failing.stop()
    scripted.throttle("put_if_absent", seg0, times=2)
    gate = scripted.hold("put_if_absent", seg0, nth=3)
    flush = Background(p.flush)
    gate.wait_reached()
    assert late.land()
    gate.release()
    flush.result()
    assert values(arrowlog.connect(store), "t") == [1, 2]
    r = p.send("t", rows(3), partition=0)
    assert r.base_offset == 2
    assert values(arrowlog.connect(store), "t") == [1, 2, 3]
