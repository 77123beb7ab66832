"""arrowlog.jobs.export_delta: committed ranges appended to a Delta table
(delta-rs) exactly once, decided by the commit, not by the plan before it.

The oracle is a ledger of every record the test saw committed; the table must
read back equal to it, row for row. Races are schedules: each export runs in a
thread of its own, and its calls into delta-rs (the table's creation, its
commit) are held until the test lets them go, so two exports plan the same
range from the same table version and then commit one after the other; a last
test lets exporter processes race freely while records arrive. Log and table
are both on a local directory, or both on SeaweedFS.

Found by an adversary: two runs that read the table at the same version both
appended the range (15 rows for 10 records); two first exports both created
the table with their rows (100 for 50); the loser's error was deltalake's own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

import arrowlog
from arrowlog.jobs import export_delta
from arrowlog.jobs._export_range import OFFSETS_KEY, STARTING_KEY, TOPIC_KEY, parse_recorded
from arrowlog.jobs.export_delta import (
    DeltaExport,
    app_id,
    delta_schema,
    exported_state,
    read_delta,
    run_export,
)
from arrowlog.testing.scripted import ScriptedStore
from tests.support.exports import SCHEMA, DeltaHolds, Ledger, Place, Run, rows

ROOT = Path(__file__).resolve().parents[2]


def export(place: Place, **kwargs: Any) -> DeltaExport:
    """One run, with a connection of its own (as one command-line run has)."""
    log = place.spec.connect()
    try:
        return run_export(log, "t", place.delta, delta_storage=place.delta_storage, **kwargs)
    finally:
        log.close()


def orphans(place: Place) -> list[str]:
    """Files in the table's location that no version references."""
    table = DeltaTable(place.delta, storage_options=place.delta_storage or None)
    return table.vacuum(
        retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True
    )


def table_version(place: Place) -> int:
    return DeltaTable(place.delta, storage_options=place.delta_storage or None).version()


# --- reruns ---------------------------------------------------------------------------


def test_reruns_export_every_committed_record_once(place: Place) -> None:
    """Plain records, a committed transaction over both partitions, an aborted
    one, one still open: the first export takes exactly what is committed
    below the open one, in one commit after the empty table's creation; the
    rerun commits nothing; once the open transaction commits, the next export
    adds it and what followed. The app transactions hold the position."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 20)
    p = log.producer(transactional_id="exp")
    p.init_transactions()
    p.begin_transaction()
    ledger.send(p, 0, 100, 10)
    ledger.send(p, 1, 200, 20)
    ledger.commit(p)
    p.begin_transaction()
    ledger.send(p, 1, 1000, 5)
    ledger.abort(p)
    p.flush()
    q = log.producer(transactional_id="open")
    q.init_transactions()
    q.begin_transaction()
    ledger.send(q, 0, 300, 7)  # open: holds partition 0's LSO
    ledger.plain(log, 1, 400, 3)

    first = export(place)
    assert (first.rows, first.table_version, first.incarnation) == (53, 1, 0)
    assert place.delta_rows() == ledger.expected()
    assert first.offsets == {str(k): v for k, v in log.stable_offsets("t").items()}
    again = export(place)
    assert (again.rows, again.table_version) == (0, None)
    assert table_version(place) == 1  # nothing committed

    ledger.commit(q)
    q.close()
    ledger.plain(log, 0, 500, 4)
    second = export(place)
    assert second.rows == 7 + 4 and second.table_version == 2
    assert place.delta_rows() == ledger.expected()
    state = exported_state(place.delta, "t", storage_options=place.delta_storage)
    assert (state.version, state.incarnation, state.table_version) == (1, 0, 2)
    assert (
        state.offsets == second.offsets == {str(k): v for k, v in log.stable_offsets("t").items()}
    )
    table = DeltaTable(place.delta, storage_options=place.delta_storage or None)
    assert table.transaction_version("arrowlog-export.t/incarnation") == 0
    assert table.transaction_version("arrowlog-export.t/1") == second.offsets["1"]


def test_an_export_of_only_aborted_records_moves_the_offsets_on(place: Place) -> None:
    """A range holding only an aborted transaction and its marker: no row, but
    one commit recording the new offsets, so the next export does not read the
    range again."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    p = log.producer(transactional_id="a")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", rows(0, 5), partition=0)
    p.abort_transaction()
    p.close()
    done = export(place)
    assert (done.rows, done.offsets, done.table_version) == (0, {"0": 6}, 1)
    assert export(place).table_version is None
    assert place.delta_rows() == []


# --- races: decided by the commit -----------------------------------------------------


def test_two_runs_planned_from_one_version_append_the_range_once(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One export has run ({"0": 5}); five records more. Runs a and b both read
    the table at the same version and plan [5, 10); both reach their commit
    (held there). a commits; then b's commit is tried: a landed in between
    with the topic's app transaction, so delta-rs fails b's, and b reads the
    table again and finds nothing new. The table holds each record once; b's
    data file is left, referenced by no version, and vacuum(full=True) removes
    it (the cleanup the docs give)."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 5)
    assert export(place).offsets == {"0": 5}
    ledger.plain(log, 0, 5, 5)

    holds = DeltaHolds(monkeypatch)
    a_commit, b_commit = holds.hold("a", "commit"), holds.hold("b", "commit")
    a, b = Run("a", lambda: export(place)), Run("b", lambda: export(place))
    a_commit.wait_reached()
    b_commit.wait_reached()  # both planned [5, 10) on the same version
    a_commit.release()
    won: DeltaExport = a.result()
    b_commit.release()
    lost: DeltaExport = b.result()

    assert place.delta_rows() == ledger.expected()
    assert (won.rows, won.attempts, won.table_version) == (5, 1, 2)
    assert (lost.rows, lost.attempts, lost.table_version) == (0, 2, None)
    assert lost.offsets == won.offsets == {"0": 10}
    assert table_version(place) == 2
    assert exported_state(place.delta, "t", storage_options=place.delta_storage).version == 1
    left = orphans(place)
    assert len(left) == 1 and left[0].endswith(".parquet")
    table = DeltaTable(place.delta, storage_options=place.delta_storage or None)
    table.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True)
    assert orphans(place) == []
    assert place.delta_rows() == ledger.expected()


def test_a_run_that_planned_before_another_committed_writes_no_file(place: Place) -> None:
    """Run b reads the table ({"0": 5}) and is held while it plans (its
    listing of the partition); run a exports [5, 10) meanwhile. b's plan is
    [5, 10) too, but before writing any file it sees the run number moved,
    plans again from the table and finds nothing new: no row twice, and no
    file left behind (the adversary's schedule: a commits, then b's write
    starts)."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 5)
    export(place)
    ledger.plain(log, 0, 5, 5)

    store = ScriptedStore(place.spec.open())
    planning = store.hold("list", "t/0/segments/")
    b = Run(
        "b",
        lambda: run_export(arrowlog.connect(store), "t", place.delta,
                           delta_storage=place.delta_storage),
    )  # fmt: skip
    planning.wait_reached()
    assert export(place).rows == 5
    planning.release()
    lost: DeltaExport = b.result()

    assert place.delta_rows() == ledger.expected()
    assert (lost.rows, lost.attempts, lost.offsets) == (0, 2, {"0": 10})
    assert orphans(place) == []


def test_two_first_exports_create_the_table_once_and_append_once(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No table yet. Runs a and b both find none and go to create it (held
    there). a creates it (version 0: the columns, no rows) and plans on it;
    then b's creation fails (the table exists) and b uses a's table, planning
    the same range on version 0. a commits, b's commit conflicts, b finds
    nothing new. One creation, one append: 50 rows for 50 records."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 30)
    ledger.plain(log, 1, 100, 20)

    holds = DeltaHolds(monkeypatch)
    a_create, b_create = holds.hold("a", "create"), holds.hold("b", "create")
    a_commit, b_commit = holds.hold("a", "commit"), holds.hold("b", "commit")
    a, b = Run("a", lambda: export(place)), Run("b", lambda: export(place))
    a_create.wait_reached()
    b_create.wait_reached()  # neither found a table
    a_create.release()
    a_commit.wait_reached()  # a created the table and planned the range on it
    b_create.release()
    b_commit.wait_reached()  # b's creation failed; b planned on a's table
    assert table_version(place) == 0
    a_commit.release()
    won: DeltaExport = a.result()
    b_commit.release()
    lost: DeltaExport = b.result()

    assert (won.rows, won.table_version) == (50, 1)
    assert (lost.rows, lost.attempts) == (0, 2)
    assert place.delta_rows() == ledger.expected()
    assert table_version(place) == 1
    history = DeltaTable(place.delta, storage_options=place.delta_storage or None).history()
    assert [h.get("operationMetrics", {}).get("num_added_rows") for h in history] == [50, 0]


def test_a_run_that_keeps_losing_raises_export_conflict_error(
    place: Place, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With two attempts allowed, run b loses twice: to a, which planned the
    same range on the same version and committed first, and, having planned
    again with three new records, to c, which exported those meanwhile. b
    raises ExportConflictError (retriable), with delta-rs's CommitFailedError
    as its cause, and committed nothing: every record is in the table once."""
    monkeypatch.setattr(export_delta, "MAX_ATTEMPTS", 2)
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 5)
    export(place)
    ledger.plain(log, 0, 5, 5)

    holds = DeltaHolds(monkeypatch)
    a_commit = holds.hold("a", "commit")
    b_first, b_second = holds.hold("b", "commit"), holds.hold("b", "commit")
    a, b = Run("a", lambda: export(place)), Run("b", lambda: export(place))
    a_commit.wait_reached()
    b_first.wait_reached()
    a_commit.release()
    assert a.result().rows == 5
    ledger.plain(log, 0, 10, 3)
    b_first.release()
    b_second.wait_reached()  # b lost once, planned [10, 13) again
    assert Run("c", lambda: export(place)).result().rows == 3
    b_second.release()
    with pytest.raises(arrowlog.ExportConflictError, match="2 commits in a row") as caught:
        b.result()
    assert caught.value.retriable
    assert isinstance(caught.value.__cause__, CommitFailedError)
    assert place.delta_rows() == ledger.expected()
    assert exported_state(place.delta, "t", storage_options=place.delta_storage).offsets == {
        "0": 13
    }


def _worker(place: Place, rounds: int) -> list[str]:
    return [
        sys.executable, "-m", "tests.support.export_delta_worker",
        "--root", place.spec.url, "--options", json.dumps(place.spec.options),
        "--delta", place.delta, "--delta-options", json.dumps(place.delta_storage),
        "--rounds", str(rounds),
    ]  # fmt: skip


@pytest.mark.slow
def test_exporter_processes_racing_while_records_arrive_export_each_once(place: Place) -> None:
    """Three exporter processes export six times each while this process
    commits transactions into both partitions; a last export catches up.
    Every committed record is in the table exactly once, and the commits'
    ranges follow each other with neither gap nor overlap."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA, partitions=2)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 10)
    argv = _worker(place, 6)
    procs = [
        subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    p = log.producer(transactional_id="feeder")
    p.init_transactions()
    for i in range(10):
        p.begin_transaction()
        ledger.send(p, 0, 1000 + 10 * i, 3)
        ledger.send(p, 1, 2000 + 10 * i, 2)
        ledger.commit(p)
    p.close()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results += [json.loads(line) for line in out.splitlines()]
    assert len(results) == 18
    export(place)
    assert place.delta_rows() == ledger.expected()
    assert sum(r["rows"] for r in results) <= len(ledger.committed)

    table = DeltaTable(place.delta, storage_options=place.delta_storage or None)
    commits = sorted(
        (h for h in table.history() if h.get(TOPIC_KEY) == "t"), key=lambda h: h["version"]
    )
    previous: dict[str, int] = {}
    for commit in commits:
        starting = json.loads(commit[STARTING_KEY])
        assert {k: v for k, v in starting.items() if v >= 0} == previous  # no gap, no overlap
        previous = parse_recorded(commit[OFFSETS_KEY], "history").offsets
    assert previous == {str(k): v for k, v in log.stable_offsets("t").items()}


# --- tables written before incarnations were recorded ----------------------------------


def test_a_table_of_an_older_export_is_read_as_incarnation_0(place: Place) -> None:
    """A table as exports wrote them before they recorded incarnations: the
    run number as the only app transaction, the offsets in the commit's
    metadata. The next export starts after those offsets, and records its
    position in app transactions from then on; the topic created again is
    refused as for any table of incarnation 0."""
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    ledger = Ledger()
    ledger.plain(log, 0, 0, 8)
    old = log.consumer().read("t", 0, 0, 5)
    old = old.append_column("topic", pa.array(["t"] * 5))
    old = old.append_column("partition", pa.array([0] * 5, pa.int32()))
    old = old.append_column("offset", pa.array(range(5), pa.int64()))
    old = old.append_column("timestamp", pa.array([0] * 5, pa.timestamp("us", tz="UTC")))
    write_deltalake(
        place.delta, old.cast(delta_schema(SCHEMA)), mode="append",
        storage_options=place.delta_storage or None,
        commit_properties=CommitProperties(
            custom_metadata={OFFSETS_KEY: json.dumps({"0": 5})},
            app_transactions=[Transaction(app_id("t"), 0)],
        ),
    )  # fmt: skip
    state = exported_state(place.delta, "t", storage_options=place.delta_storage)
    assert (state.version, state.offsets, state.incarnation, state.legacy) == (0, {"0": 5}, 0, True)

    done = export(place)
    assert (done.rows, done.offsets) == (3, {"0": 8})
    assert place.delta_rows() == ledger.expected()
    state = exported_state(place.delta, "t", storage_options=place.delta_storage)
    assert (state.version, state.offsets, state.legacy) == (1, {"0": 8}, False)

    admin = place.spec.connect(config=arrowlog.LogConfig(metadata_max_age_ms=0))
    admin.delete_topic("t")
    admin.create_topic("t", SCHEMA)
    admin.append("t", rows(50, 2))
    with pytest.raises(arrowlog.TopicRecreatedError):
        export(place)


# --- types and typed errors -------------------------------------------------------------


def test_types_delta_lacks_are_mapped_without_loss(place: Place) -> None:
    """Unsigned integers to the next wider signed type (uint64 to
    decimal(20, 0)), float16 to float, dictionaries to their values, date64 to
    date, exact nanosecond timestamps to microseconds, a zone to UTC: each
    value reads back equal (delta-rs alone refused 255 in a uint8 column and
    truncated nanoseconds)."""
    fields: list[pa.Field[Any]] = [
        pa.field("u8", pa.uint8()),
        pa.field("u32", pa.uint32()),
        pa.field("u64", pa.uint64()),
        pa.field("f16", pa.float16()),
        pa.field("tag", pa.dictionary(pa.int32(), pa.string())),
        pa.field("ns", pa.timestamp("ns")),
        pa.field("at", pa.timestamp("ms", tz="Europe/Paris")),
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
            pa.array([1_000, 1_700_000_000_123_456_000], pa.timestamp("ns")),
            pa.array([0, 1_700_000_000_123], pa.timestamp("ms", tz="Europe/Paris")),
            pa.array([0, 86_400_000 * 20_000], pa.date64()),
        ],
        schema=schema,
    )
    log = place.spec.connect()
    log.create_topic("t", schema)
    log.append("t", batch)
    assert export(place).rows == 2
    got = read_delta(place.delta, storage_options=place.delta_storage).select(schema.names)
    mapped = pa.schema(list(delta_schema(schema))[: len(schema)])
    want = pa.Table.from_batches([batch]).cast(mapped)
    assert got.cast(mapped).sort_by("u8").equals(want)
    assert got.column("u64").to_pylist()[1] == 2**64 - 1


def test_a_column_delta_cannot_hold_is_refused_before_anything_is_written(place: Place) -> None:
    fields: list[pa.Field[Any]] = [pa.field("id", pa.int64()), pa.field("c", pa.time64("us"))]
    log = place.spec.connect()
    log.create_topic("t", pa.schema(fields))
    with pytest.raises(arrowlog.UnsupportedTypeError, match="column 'c'"):
        export(place)
    assert not DeltaTable.is_deltatable(place.delta, place.delta_storage or None)


def test_a_value_that_would_change_is_refused_and_nothing_is_committed(place: Place) -> None:
    """A nanosecond timestamp that is not a whole microsecond: the safe cast
    refuses it (UnsupportedTypeError); the table stays as created, empty."""
    schema = pa.schema([pa.field("ns", pa.timestamp("ns"))])
    log = place.spec.connect()
    log.create_topic("t", schema)
    log.append("t", pa.record_batch([pa.array([1_001], pa.timestamp("ns"))], schema=schema))
    with pytest.raises(arrowlog.UnsupportedTypeError, match="without loss"):
        export(place)
    assert table_version(place) == 0
    assert exported_state(place.delta, "t", storage_options=place.delta_storage).version == -1


def test_a_table_whose_columns_differ_is_refused_writing_nothing(place: Place) -> None:
    log = place.spec.connect()
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 2))
    write_deltalake(
        place.delta, pa.table({"name": ["x"]}), mode="error",
        storage_options=place.delta_storage or None,
    )  # fmt: skip
    with pytest.raises(arrowlog.SchemaMismatchError, match="does not take") as caught:
        export(place)
    assert type(caught.value.__cause__).__name__ == "SchemaMismatchError"  # delta-rs's
    assert table_version(place) == 0
    assert orphans(place) == []


@pytest.mark.s3
def test_a_store_that_refuses_the_table_is_an_export_table_error(
    s3_server: Any, tmp_path: Path
) -> None:
    """delta-rs given a wrong secret: SeaweedFS refuses its requests; the
    export raises ExportTableError (not retriable: the same run fails the same
    way), delta-rs's error as the cause, and the log is untouched."""
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0, 2))
    storage = {
        "AWS_ENDPOINT_URL": s3_server.endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": s3_server.access_key,
        "AWS_SECRET_ACCESS_KEY": "wrong",
    }
    path = f"s3://{s3_server.bucket}/refused/events"
    with pytest.raises(arrowlog.ExportTableError, match=f"Delta table {path}") as caught:
        run_export(log, "t", path, delta_storage=storage)
    assert not caught.value.retriable
    cause = caught.value.__cause__
    assert cause is not None and not isinstance(cause, arrowlog.ArrowLogError)
