"""The oracle of the export schedules: a ledger of the records a test saw committed and
aborted, the two kinds of table (Delta, Iceberg) behind one interface, and each
export's table commit held by the name of its thread."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.jobs.export_delta import read_delta, run_export
from arrowlog.jobs.export_iceberg import CatalogConfig, read_iceberg
from arrowlog.jobs.export_iceberg import export as export_iceberg
from arrowlog.storage import Store
from arrowlog.storage.url import open_store
from tests.support.exports import Gate

Kind = Literal["delta", "iceberg"]
FIELDS: list[pa.Field[Any]] = [pa.field("id", pa.int64(), nullable=False)]
SCHEMA = pa.schema(FIELDS)

#: the client that deletes and creates topics trusts no cached version
QUICK = arrowlog.LogConfig(metadata_max_age_ms=0)

Key = tuple[int, int]  # partition, offset


def ids(start: int, n: int) -> pa.RecordBatch:
    return pa.record_batch({"id": list(range(start, start + n))}, schema=SCHEMA)


@dataclass
class Ledger:
    """Every record the test saw committed, (partition, offset) -> id, and the
    ids of records it aborted."""

    committed: dict[Key, int] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)

    def plain(
        self, log: arrowlog.ArrowLog, partition: int, start: int, n: int, topic: str = "t"
    ) -> None:
        done = log.append(topic, ids(start, n), partition=partition)
        self.add(done, start)

    def add(self, done: arrowlog.AppendResult, start: int) -> None:
        for i in range(done.record_count):
            self.committed[(done.partition, done.base_offset + i)] = start + i


@dataclass
class Txn:
    """One transaction's sends, entered in the ledger when it commits."""

    ledger: Ledger
    producer: arrowlog.Producer
    sent: list[tuple[arrowlog.AppendResult, int]] = field(default_factory=list)

    @classmethod
    def begin(cls, ledger: Ledger, log: arrowlog.ArrowLog, name: str) -> Txn:
        p = log.producer(transactional_id=name)
        p.init_transactions()
        p.begin_transaction()
        return cls(ledger, p)

    def send(self, partition: int, start: int, n: int, topic: str = "t") -> None:
        self.sent.append((self.producer.send(topic, ids(start, n), partition=partition), start))

    def commit(self) -> None:
        self.producer.commit_transaction()
        self.producer.flush()
        for done, start in self.sent:
            self.ledger.add(done, start)

    def abort(self) -> None:
        self.producer.abort_transaction()
        self.producer.flush()
        for done, start in self.sent:
            self.ledger.aborted.update(range(start, start + done.record_count))

    def ids(self) -> set[int]:
        return {start + i for done, start in self.sent for i in range(done.record_count)}


Row = tuple[int, int, int]  # partition, offset, id


def check_prefix(rows: list[Row], ledger: Ledger, offsets: dict[str, int]) -> None:
    """The table holds, each once, exactly the committed records below the
    recorded offsets."""
    assert len(rows) == len(set(rows)), f"a row was exported twice: {rows}"
    assert not {i for _, _, i in rows} & ledger.aborted, "an aborted record was exported"
    want = sorted((p, o, i) for (p, o), i in ledger.committed.items() if o < offsets.get(str(p), 0))
    assert sorted(rows) == want


@dataclass
class Table:
    """A Delta table or an Iceberg table (SQLite catalog) in a directory."""

    kind: Kind
    where: Path
    delta_storage: dict[str, str] = field(default_factory=dict)
    uri: str = ""

    def __post_init__(self) -> None:
        if not self.uri:
            self.uri = str(self.where / "delta")

    @property
    def catalog(self) -> CatalogConfig:
        return CatalogConfig.sqlite(str(self.where / "warehouse"))

    def export(self, log: arrowlog.ArrowLog, topic: str = "t", **kwargs: Any) -> Any:
        if self.kind == "delta":
            return run_export(log, topic, self.uri, delta_storage=self.delta_storage, **kwargs)
        return export_iceberg(log, topic, "ns.events", catalog=self.catalog, **kwargs)

    def exists(self) -> bool:
        if self.kind == "delta":
            from deltalake import DeltaTable

            return DeltaTable.is_deltatable(self.uri, self.delta_storage or None)
        return (self.where / "warehouse").exists()

    def arrow(self) -> pa.Table:
        if self.kind == "delta":
            return read_delta(self.uri, storage_options=self.delta_storage)
        return read_iceberg(self.catalog, "ns.events")

    def rows(self, topic: str = "t") -> list[Row]:
        table = self.arrow()
        got = zip(
            table.column("topic").to_pylist(),
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            strict=True,
        )
        return sorted((p, o, i) for t, p, o, i in got if t == topic)  # type: ignore[misc]


def local_log(path: Path) -> Store:
    return open_store(str(path), {"fsync": False})


class CommitHolds:
    """Each export's table commit held where the test says, by the name of the
    thread that runs the export: delta-rs's ``write_deltalake`` carrying app
    transactions (the export's commit, not the table's creation) once the
    export's batches are all read (the Delta export streams the range into
    delta-rs: the batches are read here first, then the held write goes on
    with them), or the SQL catalog's ``commit_table`` (an Iceberg commit,
    after the data files are written)."""

    def __init__(self, kind: Kind, monkeypatch: pytest.MonkeyPatch) -> None:
        self._gates: dict[str, list[Gate]] = {}
        if kind == "delta":
            import deltalake

            real_write: Callable[..., None] = deltalake.write_deltalake

            def write(table_or_uri: Any, data: Any, **kwargs: Any) -> None:
                properties = kwargs.get("commit_properties")
                if properties is not None and properties.app_transactions:
                    if isinstance(data, pa.RecordBatchReader):
                        data = pa.Table.from_batches(list(data), schema=data.schema)
                    self._pause()
                real_write(table_or_uri, data, **kwargs)

            monkeypatch.setattr(deltalake, "write_deltalake", write)
        else:
            from pyiceberg.catalog.sql import SqlCatalog

            real_commit = SqlCatalog.commit_table

            def commit_table(catalog: SqlCatalog, *args: Any, **kwargs: Any) -> Any:
                self._pause()
                return real_commit(catalog, *args, **kwargs)

            monkeypatch.setattr(SqlCatalog, "commit_table", commit_table)

    def hold(self, thread: str) -> Gate:
        gate = Gate()
        self._gates.setdefault(thread, []).append(gate)
        return gate

    def _pause(self) -> None:
        queue = self._gates.get(threading.current_thread().name)
        if queue:
            queue.pop(0).pause()
