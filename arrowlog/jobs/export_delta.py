"""Export the committed records of a topic to a Delta table, exactly once.

Each run exports what was committed since the previous run: from the offsets the
previous export recorded, to the topic's last stable offsets. Rows and offsets go
into the Delta table in one Delta commit, tagged with a Delta app transaction
(``arrowlog-export.<topic>``, version = run number), so a rerun after a crash
either sees that commit (and starts after it) or redoes the same range: no row
is exported twice or skipped.

The range is read with ``spark.read.format("arrowlog")``. The Delta write uses
delta-spark when its jars are on Spark's classpath (``txnAppId``/``txnVersion``
options), and delta-rs (``deltalake``) otherwise. The range and the "nothing
new" check are shared with the Iceberg export (:mod:`arrowlog.jobs._export_range`).
Only the delta-rs path runs on the project's machines (delta-spark's jars come
from Maven Central).

    arrowlog export-delta TOPIC DELTA_PATH --root ROOT [--storage-options JSON]
    python -m arrowlog.jobs.export_delta ROOT TOPIC DELTA_PATH [--storage-options JSON]
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

import arrowlog
from arrowlog.jobs._export_range import OFFSETS_KEY, next_range, parse_recorded, spark_reader

__all__ = ["OFFSETS_KEY", "ExportState", "app_id", "export", "exported_state", "main", "read_delta"]


@dataclass(frozen=True)
class ExportState:
    """What the Delta table says was exported: the app transaction version and
    the next offset of every partition."""

    version: int
    offsets: dict[str, int]


def app_id(topic: str) -> str:
    return f"arrowlog-export.{topic}"


def exported_state(path: str, topic: str) -> ExportState:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        return ExportState(-1, {})
    table = DeltaTable(path)
    version = table.transaction_version(app_id(topic))
    if version is None:
        return ExportState(-1, {})
    for commit in table.history():  # newest first
        offsets = commit.get(OFFSETS_KEY)
        if offsets is not None:
            return ExportState(int(version), parse_recorded(offsets, path))
    raise arrowlog.ArrowLogError(f"{path}: app transaction {version} has no recorded offsets")


def export(spark: Any, root: str, topic: str, path: str, storage: dict[str, Any]) -> int:
    """Export the next committed range; returns the number of rows exported."""
    log = arrowlog.connect(root, storage)
    state = exported_state(path, topic)
    span = next_range(log, topic, state.offsets)
    if span.nothing_new:
        return 0
    df = spark_reader(spark, root, span, storage)
    version = state.version + 1
    ending = span.ending_json()
    metadata = {OFFSETS_KEY: json.dumps(ending)}
    if _has_delta_spark(spark):
        (
            df.write.format("delta").mode("append")
            .option("txnAppId", app_id(topic)).option("txnVersion", version)
            .option("userMetadata", json.dumps(metadata)).save(path)
        )  # fmt: skip
        return int(df.count())
    from deltalake import CommitProperties, Transaction, write_deltalake

    table: pa.Table = df.toArrow()
    # timestamps as microseconds, the unit Delta stores
    write_deltalake(
        path,
        table,
        mode="append",
        commit_properties=CommitProperties(
            custom_metadata=metadata, app_transactions=[Transaction(app_id(topic), version)]
        ),
    )
    return int(table.num_rows)


def _has_delta_spark(spark: Any) -> bool:
    try:
        spark._jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Exception:  # noqa: BLE001 - not on the classpath
        return False
    return True


def read_delta(path: str) -> pa.Table:
    """The Delta table's rows (through pyarrow.dataset: DeltaTable.to_pyarrow_table
    was seen to crash the interpreter at exit here)."""
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    table = DeltaTable(path)
    return ds.dataset(table.file_uris(), format="parquet").to_table()


def main(argv: list[str] | None = None) -> int:
    """``python -m arrowlog.jobs.export_delta ROOT TOPIC DELTA_PATH [options]``: the
    same as ``arrowlog export-delta TOPIC DELTA_PATH --root ROOT [options]``."""
    from arrowlog.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        return cli_main(["export-delta", *args])
    return cli_main(["export-delta", "--root", args[0], *args[1:]])


if __name__ == "__main__":
    sys.exit(main())
