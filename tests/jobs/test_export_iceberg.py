"""arrowlog.jobs.export_iceberg: committed ranges appended to an Iceberg table
(pyiceberg, a SQL catalog on SQLite) exactly once.

The oracle is a ledger the tests keep of every record they saw committed
(partition, offset, id); the table must read back equal to it, row for row,
after reruns, a SIGKILLed exporter at three points of its commit, and two
exporter processes racing. The log is on a local directory and on SeaweedFS;
the warehouse is a local directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.jobs.export_iceberg import (
    OFFSETS_KEY,
    TOPIC_KEY,
    CatalogConfig,
    export,
    exported_offsets,
    iceberg_schema,
    read_iceberg,
)
from tests.support.exports import SCHEMA, Ledger, rows
from tests.support.stores import StoreSpec

ROOT = Path(__file__).resolve().parents[2]
TABLE = "ns.events"

Row = tuple[int, int, int, str]  # partition, offset, id, label


def table_rows(catalog: CatalogConfig) -> list[Row]:
    table = read_iceberg(catalog, TABLE)
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


def arrowlog_snapshots(catalog: CatalogConfig) -> list[dict[str, str]]:
    """The summaries of the table's arrowlog snapshots, oldest first."""
    table = catalog.open().load_table(TABLE)
    out = []
    for s in table.snapshots():
        props = dict(s.summary.additional_properties) if s.summary else {}
        if TOPIC_KEY in props:
            out.append(props)
    return out


def files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


@pytest.fixture
def catalog(tmp_path: Path) -> CatalogConfig:
    return CatalogConfig.sqlite(str(tmp_path / "warehouse"))


@pytest.fixture
def spec(shared_store_spec: StoreSpec) -> StoreSpec:
    """The log on a local directory and on SeaweedFS (a real S3 server)."""
    return shared_store_spec


# --- export, append more, rerun ----------------------------------------------------


def test_reruns_export_every_committed_record_once(
    spec: StoreSpec, catalog: CatalogConfig, tmp_path: Path
) -> None:
    """Plain records, a committed transaction over both partitions, an aborted
    one, and one still open: the first export takes exactly what is committed
    below the open one; the rerun writes nothing (no snapshot, no file); once
    the open transaction commits, the next export adds it and what followed.
    The table reads back equal to the ledger, offsets and all, and each
    snapshot's summary records the stable offsets of its export."""
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 50)
    p = log.producer(transactional_id="exp")
    p.init_transactions()
    p.begin_transaction()
    ledger.send(p, 0, 100, 10)
    ledger.send(p, 1, 200, 20)
    ledger.commit(p)
    p.begin_transaction()
    ledger.send(p, 1, 1000, 5)
    ledger.abort(p)
    p.flush()  # the markers are written: the LSOs stop moving
    q = log.producer(transactional_id="open")
    q.init_transactions()
    q.begin_transaction()
    ledger.send(q, 0, 300, 7)  # open: holds partition 0's LSO
    ledger.plain(log, 1, 400, 3)  # after the open transaction, in another partition

    first = export(log, "t", TABLE, catalog=catalog)
    assert first.rows == len(ledger.committed) == 83
    assert table_rows(catalog) == ledger.expected()
    assert first.offsets == {str(k): v for k, v in log.stable_offsets("t").items()}

    warehouse = tmp_path / "warehouse"
    before = files(warehouse)
    again = export(log, "t", TABLE, catalog=catalog)
    assert (again.rows, again.snapshot_id) == (0, None)
    assert files(warehouse) == before  # no snapshot, no metadata, no data file

    ledger.commit(q)
    q.close()
    ledger.plain(log, 0, 500, 4)
    second = export(log, "t", TABLE, catalog=catalog)
    assert second.rows == 7 + 4
    assert table_rows(catalog) == ledger.expected()
    assert export(log, "t", TABLE, catalog=catalog).rows == 0

    summaries = arrowlog_snapshots(catalog)
    assert [json.loads(s[OFFSETS_KEY]) for s in summaries] == [first.offsets, second.offsets]
    assert second.offsets == {str(k): v for k, v in log.stable_offsets("t").items()}
    assert json.loads(summaries[1]["arrowlog.starting-offsets"]) == first.offsets
    table = catalog.open().load_table(TABLE)
    assert exported_offsets(table, "t") == second.offsets
    assert table.current_snapshot() is not None
    assert table.current_snapshot().snapshot_id == second.snapshot_id  # type: ignore[union-attr]


def test_the_metadata_columns_are_those_of_the_spark_source(
    catalog: CatalogConfig, tmp_path: Path
) -> None:
    """topic, partition, offset and timestamp (the segment's append time, UTC
    microseconds), required, typed as the Spark source gives them."""
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 3))
    export(log, "t", TABLE, catalog=catalog)
    table = read_iceberg(catalog, TABLE)
    assert table.schema.names == ["id", "label", "topic", "partition", "offset", "timestamp"]
    fields = {f.name: f for f in table.schema}
    assert fields["partition"].type == pa.int32() and not fields["partition"].nullable
    assert fields["offset"].type == pa.int64() and not fields["offset"].nullable
    assert fields["timestamp"].type == pa.timestamp("us", tz="UTC")
    (segment,) = log.partition("t", 0).summaries(0, 3)
    stamps = table.column("timestamp").cast(pa.int64()).to_pylist()
    assert stamps == [segment.timestamp_ms * 1000] * 3


def test_an_export_of_only_aborted_records_moves_the_offsets_on(
    catalog: CatalogConfig, tmp_path: Path
) -> None:
    """A range holding only an aborted transaction and its marker: no row, but
    one snapshot recording the new offsets, so the next export does not read
    the range again."""
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    p = log.producer(transactional_id="a")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(0, 5), partition=0)
    p.abort_transaction()
    p.close()
    done = export(log, "t", TABLE, catalog=catalog)
    assert done.rows == 0 and done.snapshot_id is not None
    assert done.offsets == {"0": 6}
    assert export(log, "t", TABLE, catalog=catalog).snapshot_id is None
    assert read_iceberg(catalog, TABLE).num_rows == 0


def test_the_offsets_survive_expiry_of_every_arrowlog_snapshot(
    catalog: CatalogConfig, tmp_path: Path
) -> None:
    """Another writer appends on top of the exports (a compaction, a backfill);
    then every snapshot that carries an arrowlog summary is expired. The next
    export resumes from the table property written in the same commits, and
    exports only what is new."""
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 5)
    export(log, "t", TABLE, catalog=catalog)
    ledger.plain(log, 0, 5, 5)
    export(log, "t", TABLE, catalog=catalog)
    table = catalog.open().load_table(TABLE)
    ours = [s.snapshot_id for s in table.snapshots()]
    foreign = read_iceberg(catalog, TABLE).slice(0, 0)  # no row: only a snapshot on top
    table.append(foreign.cast(table.schema().as_arrow()))
    table.maintenance.expire_snapshots().by_ids(ours).commit()
    table = catalog.open().load_table(TABLE)
    assert arrowlog_snapshots(catalog) == []
    assert exported_offsets(table, "t") == {"0": 10}
    assert export(log, "t", TABLE, catalog=catalog).rows == 0
    ledger.plain(log, 0, 10, 3)
    assert export(log, "t", TABLE, catalog=catalog).rows == 3
    assert table_rows(catalog) == ledger.expected()


# --- types --------------------------------------------------------------------------


def test_types_iceberg_lacks_are_mapped_without_loss(
    catalog: CatalogConfig, tmp_path: Path
) -> None:
    point: pa.DataType = pa.struct([pa.field("x", pa.uint16()), pa.field("y", pa.float16())])
    fields: list[pa.Field[Any]] = [
        pa.field("u8", pa.uint8()),
        pa.field("u32", pa.uint32()),
        pa.field("u64", pa.uint64()),
        pa.field("f16", pa.float16()),
        pa.field("tag", pa.dictionary(pa.int32(), pa.string())),
        pa.field("t32", pa.time32("ms")),
        pa.field("at", pa.timestamp("ms", tz="Europe/Paris")),
        pa.field("point", point),
        pa.field("big", pa.list_(pa.uint64())),
        pa.field("i8", pa.int8()),
        pa.field("view", pa.string_view()),
        pa.field("day", pa.date64()),
    ]
    schema = pa.schema(fields)
    batch = pa.record_batch(
        [
            pa.array([0, 255], pa.uint8()),
            pa.array([0, 2**32 - 1], pa.uint32()),
            pa.array([0, 2**64 - 1], pa.uint64()),
            pa.array([1.5, -2.0], pa.float16()),
            pa.array(["a", "b"]).dictionary_encode(),
            pa.array([1, 86_399_999], pa.time32("ms")),
            pa.array([0, 1_700_000_000_123], pa.timestamp("ms", tz="Europe/Paris")),
            pa.array([{"x": 65_535, "y": 0.5}, None], point),
            pa.array([[2**64 - 1], []], pa.list_(pa.uint64())),
            pa.array([-128, 127], pa.int8()),
            pa.array(["v", None], pa.string_view()),
            pa.array([0, 86_400_000 * 20_000], pa.date64()),
        ],
        schema=schema,
    )
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", schema)
    log.append("t", batch)
    export(log, "t", TABLE, catalog=catalog)
    got = read_iceberg(catalog, TABLE).select(schema.names)
    mapped = iceberg_schema(schema)
    assert [f.type for f in mapped][:12] == [
        pa.int32(), pa.int64(), pa.decimal128(20, 0), pa.float32(), pa.string(),
        pa.time64("us"), pa.timestamp("us", tz="UTC"),
        pa.struct([pa.field("x", pa.int32()), pa.field("y", pa.float32())]),
        pa.list_(pa.decimal128(20, 0)), pa.int32(), pa.string(), pa.date32(),
    ]  # fmt: skip
    want = pa.Table.from_batches([batch]).cast(pa.schema(list(mapped)[:12]))
    assert got.cast(want.schema).equals(want)
    assert got.column("u64").to_pylist()[1] == 2**64 - 1


@pytest.mark.parametrize(
    "kind",
    [pa.timestamp("ns"), pa.time64("ns"), pa.duration("s"), pa.null(), pa.decimal256(50, 2)],
    ids=str,
)
def test_a_type_without_a_lossless_iceberg_type_is_refused_writing_nothing(
    catalog: CatalogConfig, tmp_path: Path, kind: pa.DataType
) -> None:
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", pa.schema([pa.field("id", pa.int64()), pa.field("c", kind)]))
    with pytest.raises(arrowlog.UnsupportedTypeError, match="column 'c'"):
        export(log, "t", TABLE, catalog=catalog)
    assert not (tmp_path / "warehouse").exists()  # no catalog, no table


def test_a_table_whose_columns_differ_is_refused_writing_nothing(
    catalog: CatalogConfig, tmp_path: Path
) -> None:
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    log.create_topic("other", pa.schema([pa.field("name", pa.string())]))
    log.append("t", rows(0, 2))
    log.append("other", pa.record_batch({"name": ["x"]}))
    export(log, "t", TABLE, catalog=catalog)
    before = files(tmp_path / "warehouse")
    with pytest.raises(arrowlog.SchemaMismatchError, match="does not take topic 'other'"):
        export(log, "other", TABLE, catalog=catalog)
    assert files(tmp_path / "warehouse") == before


def test_a_catalog_that_does_not_answer_is_a_retriable_export_table_error(
    tmp_path: Path,
) -> None:
    """pyiceberg's own error (here requests' ConnectionError from a REST
    catalog nobody serves) becomes ExportTableError, retriable, with it as the
    cause; nothing is written."""
    import requests

    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 2))
    rest = CatalogConfig("remote", {"type": "rest", "uri": "http://127.0.0.1:9"})
    with pytest.raises(arrowlog.ExportTableError, match=r"Iceberg table ns\.events") as caught:
        export(log, "t", TABLE, catalog=rest)
    assert caught.value.retriable
    assert isinstance(caught.value.__cause__, requests.ConnectionError)


def test_a_bad_table_identifier_is_refused(catalog: CatalogConfig, tmp_path: Path) -> None:
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    for bad in ("events", "ns.", "../x.y", "ns.a/b", "ns..t"):
        with pytest.raises(arrowlog.InvalidNameError):
            export(log, "t", bad, catalog=catalog)
    assert not (tmp_path / "warehouse").exists()


# --- crashes and races: exporter processes ---------------------------------------------


def _worker(spec: StoreSpec, warehouse: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tests.support.export_iceberg_worker",
        "--root", spec.url, "--options", json.dumps(spec.options),
        "--warehouse", str(warehouse), *extra,
    ]  # fmt: skip


def _results(out: str) -> Iterator[dict[str, Any]]:
    for line in out.splitlines():
        yield json.loads(line)


def _mixed(spec: StoreSpec) -> tuple[arrowlog.ArrowLog, Ledger]:
    log = spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 40)
    p = log.producer(transactional_id="w")
    p.init_transactions()
    p.begin_transaction()
    ledger.send(p, 0, 100, 10)
    ledger.send(p, 1, 200, 10)
    ledger.commit(p)
    p.close()
    return log, ledger


@pytest.mark.slow
@pytest.mark.parametrize("kill_at", ["before-commit", "metadata-written", "after-commit"])
def test_an_exporter_killed_in_its_commit_then_rerun_exports_once(
    spec: StoreSpec, catalog: CatalogConfig, tmp_path: Path, kill_at: str
) -> None:
    """SIGKILL after the data files (and manifests) are written but before the
    catalog is asked; after the new metadata file is written but before the
    catalog's pointer moves; and after the commit. Killed before the commit,
    the run leaves only files no snapshot references, and the rerun exports
    the range once; killed after it, the rerun finds the offsets recorded and
    writes nothing."""
    log, ledger = _mixed(spec)
    warehouse = tmp_path / "warehouse"
    killed = subprocess.run(
        _worker(spec, warehouse, "--kill-at", kill_at),
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -9, killed.stderr
    data = {f for f in files(warehouse) if f.endswith(".parquet")}
    assert data, "the exporter died before it wrote any data file"
    table = catalog.open().load_table(TABLE)
    committed = kill_at == "after-commit"
    assert (table.current_snapshot() is not None) == committed
    if not committed:
        assert read_iceberg(catalog, TABLE).num_rows == 0  # the orphans are not read

    rerun = subprocess.run(
        _worker(spec, warehouse), cwd=ROOT, capture_output=True, text=True, timeout=120,
        check=True,
    )  # fmt: skip
    (result,) = _results(rerun.stdout)
    assert result["rows"] == (0 if committed else len(ledger.committed))
    assert table_rows(catalog) == ledger.expected()
    assert len(arrowlog_snapshots(catalog)) == 1
    assert result["offsets"] == {str(k): v for k, v in log.stable_offsets("t").items()}


@pytest.mark.slow
def test_two_exporters_committing_the_same_range_export_it_once(
    spec: StoreSpec, catalog: CatalogConfig, tmp_path: Path
) -> None:
    """Two processes read the same recorded offsets and write the same range,
    then both commit on top of the same snapshot (a barrier holds each at its
    commit until both are there). The catalog's compare-and-swap lets one
    commit land; the other reloads the table, finds the range recorded and
    stops. pyiceberg's own retry would have rebased its append and exported
    the range twice."""
    _, ledger = _mixed(spec)
    warehouse = tmp_path / "warehouse"
    argv = _worker(spec, warehouse, "--barrier", str(tmp_path / "barrier"), "--parties", "2")
    procs = [
        subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    results = sorted((r for out, _ in outs for r in _results(out)), key=lambda r: r["attempts"])
    assert [r["rows"] for r in results] == [len(ledger.committed), 0]
    assert [r["attempts"] for r in results] == [1, 2]  # the loser looked again
    assert results[1]["snapshot"] is None and results[0]["offsets"] == results[1]["offsets"]
    assert table_rows(catalog) == ledger.expected()
    assert len(arrowlog_snapshots(catalog)) == 1
    # the table references the winner's data files only; pyiceberg 0.12 removes
    # the loser's manifests but leaves its data files, unreferenced (orphans)
    table = catalog.open().load_table(TABLE)
    referenced = {Path(t.file.file_path.removeprefix("file://")) for t in table.scan().plan_files()}
    assert len(referenced) == 1 and referenced < set(warehouse.rglob("*.parquet"))


@pytest.mark.slow
def test_two_exporters_racing_while_records_arrive_leave_no_duplicate_and_no_gap(
    spec: StoreSpec, catalog: CatalogConfig, tmp_path: Path
) -> None:
    """Two exporter processes export over and over while this process commits
    transactions into both partitions; a last export catches up. Every
    committed record is in the table once, and the snapshots' ranges follow
    each other with neither gap nor overlap."""
    log, ledger = _mixed(spec)
    warehouse = tmp_path / "warehouse"
    argv = _worker(spec, warehouse, "--rounds", "6")
    procs = [
        subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    p = log.producer(transactional_id="feeder")
    p.init_transactions()
    for i in range(8):
        p.begin_transaction()
        ledger.send(p, 0, 1000 + 10 * i, 3)
        ledger.send(p, 1, 2000 + 10 * i, 2)
        ledger.commit(p)
    p.close()
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    export(log, "t", TABLE, catalog=catalog)
    assert table_rows(catalog) == ledger.expected()
    previous: dict[str, int] = {}
    for summary in arrowlog_snapshots(catalog):
        starting = json.loads(summary["arrowlog.starting-offsets"])
        assert {k: v for k, v in starting.items() if v >= 0} == previous  # no gap, no overlap
        previous = json.loads(summary[OFFSETS_KEY])
