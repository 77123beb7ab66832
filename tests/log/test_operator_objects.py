"""The client hands out maintenance and administration as objects of their
own (issue 25, point 2; pyiceberg's ``table.maintenance``, delta-rs's
``DeltaTable.optimize``): ``log.maintenance`` and ``log.admin``, which need
only the :class:`~arrowlog.txn.view.LogView` protocol, not an ArrowLog."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

import arrowlog
from arrowlog import LogConfig, Topic, TopicConfig, TxnState
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.partition import PartitionLog
from arrowlog.storage import Store

SCHEMA = pa.schema([pa.field("id", pa.int64())])

#: what ArrowLog did for operators before these moved to log.maintenance / log.admin
OPERATOR_METHODS = (
    "compact",
    "vacuum",
    "list_transactions",
    "describe_transaction",
    "abort_transaction",
    "expire_transactions",
    "list_producers",
    "metrics",
)


class View:
    """A LogView that is not an ArrowLog: one client's parts, passed through."""

    def __init__(self, log: arrowlog.ArrowLog) -> None:
        self._log = log
        self.resolver = log.resolver

    @property
    def store(self) -> Store:
        return self._log.store

    @property
    def config(self) -> LogConfig:
        return self._log.config

    def topic(self, name: str, *, refresh: bool = False) -> Topic:
        return self._log.topic(name, refresh=refresh)

    def list_topics(self) -> list[str]:
        return self._log.list_topics()

    def partition(self, topic: str, partition: int) -> PartitionLog:
        return self._log.partition(topic, partition)

    def iter_partitions(self, topic: str) -> Iterator[PartitionLog]:
        return self._log.iter_partitions(topic)


def test_the_client_keeps_to_what_a_user_of_a_log_does() -> None:
    log = arrowlog.connect("memory://")
    assert isinstance(log.maintenance, arrowlog.Maintenance)
    assert isinstance(log.admin, arrowlog.Admin)
    assert [m for m in OPERATOR_METHODS if hasattr(arrowlog.ArrowLog, m)] == []


def test_maintenance_and_admin_need_only_a_log_view(
    make_log: Callable[..., arrowlog.ArrowLog],
) -> None:
    log = make_log()
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2))
    tx = log.producer(transactional_id="tx")
    tx.init_transactions()
    for v in range(8):
        with tx.transaction():
            tx.send("t", pa.record_batch([pa.array([v], pa.int64())], schema=SCHEMA))
    tx.close()

    view = View(make_log())
    admin = arrowlog.Admin(view)
    [info] = admin.list_transactions()
    assert (info.transactional_id, info.state) == ("tx", TxnState.COMPLETE_COMMIT)
    assert admin.metrics(["t"])["partitions"]["t/0"]["last_stable_offset"] == 16
    assert admin.open_transactions() == []

    done = arrowlog.Maintenance(view).compact(target_bytes=MIN_TARGET_BYTES)
    assert done and {c.topic for c in done} == {"t"}
    assert make_log().consumer().read("t", 0).column("id").to_pylist() == list(range(8))
    assert arrowlog.Maintenance(view).vacuum(["t"], dry_run=True) == []
