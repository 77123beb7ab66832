"""Helpers of the export tests: where the log and the table live (:class:`Place`), both
exports behind one interface (:class:`Target`), calls held in threads of their own
name, and the ledger of committed records a table must read back equal to."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import arrowlog
from arrowlog.jobs.export_delta import read_delta, run_export
from arrowlog.jobs.export_iceberg import CatalogConfig, read_iceberg
from arrowlog.jobs.export_iceberg import export as export_iceberg
from tests.support.stores import StoreSpec

Row = tuple[int, int, int, str]  # partition, offset, id, label


@dataclass(frozen=True)
class Place:
    """A log and a Delta table path, with the options that reach each."""

    spec: StoreSpec
    delta: str
    delta_storage: dict[str, str]

    def delta_rows(self) -> list[Row]:
        """The table's rows, sorted; fails if one is there twice."""
        table = read_delta(self.delta, storage_options=self.delta_storage)
        assert set(table.column("topic").to_pylist()) <= {"t"}
        got = zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            table.column("label").to_pylist(),
            strict=True,
        )
        out: list[Row] = sorted(got)  # type: ignore[arg-type]
        assert len(out) == len(set(out)), "a row was exported twice"
        return out


class Gate:
    """One held call: ``wait_reached`` until it arrives, ``release`` to let it go."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self._open = threading.Event()

    def wait_reached(self, timeout: float = 60.0) -> None:
        assert self.reached.wait(timeout), "the held call never arrived"

    def release(self) -> None:
        self._open.set()

    def pause(self) -> None:
        self.reached.set()
        assert self._open.wait(120), "the held call was never released"


Kind = Literal["create", "commit"]


class DeltaHolds:
    """delta-rs's ``write_deltalake`` as the exports call it, each call held
    where the test says: by the thread making it (each export runs in a thread
    of its own name) and by kind, the table's creation (no app transaction) or
    an export's commit (its app transactions), in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import deltalake

        self._real: Callable[..., None] = deltalake.write_deltalake
        self._gates: dict[tuple[str, Kind], list[Gate]] = defaultdict(list)
        monkeypatch.setattr(deltalake, "write_deltalake", self._write)

    def hold(self, thread: str, kind: Kind) -> Gate:
        gate = Gate()
        self._gates[(thread, kind)].append(gate)
        return gate

    def _write(self, table_or_uri: Any, data: Any, **kwargs: Any) -> None:
        properties = kwargs.get("commit_properties")
        committing = properties is not None and bool(properties.app_transactions)
        kind: Kind = "commit" if committing else "create"
        queue = self._gates.get((threading.current_thread().name, kind))
        if queue:
            queue.pop(0).pause()
        self._real(table_or_uri, data, **kwargs)


class Run:
    """A call in a thread of its own name; ``result()`` joins it and re-raises."""

    def __init__(self, name: str, call: Callable[[], Any]) -> None:
        self._out: list[Any] = []
        self._err: list[BaseException] = []

        def run() -> None:
            try:
                self._out.append(call())
            except BaseException as e:  # noqa: BLE001 - re-raised by result()
                self._err.append(e)

        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._thread.start()

    def result(self, timeout: float = 120.0) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the scheduled call never finished"
        if self._err:
            raise self._err[0]
        return self._out[0]


ExportRow = tuple[int, int, int]  # partition, offset, id


class Target(Protocol):
    def export(self, log: arrowlog.ArrowLog, **kwargs: Any) -> tuple[int, dict[str, int], int]:
        """One export: rows, the offsets recorded, their incarnation."""

    def rows(self) -> list[ExportRow]: ...

    def exists(self) -> bool: ...


class DeltaTarget:
    def __init__(self, place: Place) -> None:
        self.place = place

    def export(self, log: arrowlog.ArrowLog, **kwargs: Any) -> tuple[int, dict[str, int], int]:
        done = run_export(
            log, "t", self.place.delta, delta_storage=self.place.delta_storage, **kwargs
        )
        return done.rows, done.offsets, done.incarnation

    def rows(self) -> list[ExportRow]:
        return sorted((p, o, i) for p, o, i, _ in self.place.delta_rows())

    def exists(self) -> bool:
        return DeltaTable.is_deltatable(self.place.delta, self.place.delta_storage or None)


class IcebergTarget:
    def __init__(self, warehouse: Path) -> None:
        self.warehouse = warehouse
        self.catalog = CatalogConfig.sqlite(str(warehouse))

    def exists(self) -> bool:
        return self.warehouse.exists()

    def export(self, log: arrowlog.ArrowLog, **kwargs: Any) -> tuple[int, dict[str, int], int]:
        done = export_iceberg(log, "t", "ns.events", catalog=self.catalog, **kwargs)
        return done.rows, done.offsets, done.incarnation

    def rows(self) -> list[ExportRow]:
        table = read_iceberg(self.catalog, "ns.events")
        got = zip(
            table.column("partition").to_pylist(),
            table.column("offset").to_pylist(),
            table.column("id").to_pylist(),
            strict=True,
        )
        return sorted(got)  # type: ignore[arg-type]


def ids(start: int, n: int) -> list[ExportRow]:
    return [(0, i, start + i) for i in range(n)]


# --- a topic of labelled records, and the ledger of those committed ----------------

FIELDS: list[pa.Field[Any]] = [
    pa.field("id", pa.int64(), nullable=False),
    pa.field("label", pa.string()),
]
SCHEMA = pa.schema(FIELDS)


def rows(start: int, n: int) -> pa.RecordBatch:
    ids = list(range(start, start + n))
    return pa.record_batch({"id": ids, "label": [f"r{i}" for i in ids]}, schema=SCHEMA)


class Ledger:
    """Every record the test saw committed, by (partition, offset)."""

    def __init__(self) -> None:
        self.committed: dict[tuple[int, int], int] = {}
        self._pending: list[tuple[arrowlog.AppendResult, int]] = []

    def plain(self, log: arrowlog.ArrowLog, partition: int, start: int, n: int) -> None:
        self._add(log.append("t", rows(start, n), partition=partition), start)

    def send(self, p: arrowlog.Producer, partition: int, start: int, n: int) -> None:
        self._pending.append((p.send("t", rows(start, n), partition=partition), start))

    def commit(self, p: arrowlog.Producer) -> None:
        p.commit_transaction()
        for result, start in self._pending:
            self._add(result, start)
        self._pending.clear()

    def abort(self, p: arrowlog.Producer) -> None:
        p.abort_transaction()
        self._pending.clear()

    def _add(self, result: arrowlog.AppendResult, start: int) -> None:
        for i in range(result.record_count):
            self.committed[(result.partition, result.base_offset + i)] = start + i

    def expected(self) -> list[Row]:
        return sorted((p, o, i, f"r{i}") for (p, o), i in self.committed.items())
