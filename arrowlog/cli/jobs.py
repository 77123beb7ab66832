"""The jobs as subcommands: ``arrowlog load`` (alias ``backfill``: a restartable
bulk load with expected offsets), ``arrowlog export-delta`` and
``arrowlog export-iceberg``. One progress bar
each (total, percentage, ETA); Ctrl-C says where to resume."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

import arrowlog
from arrowlog.cli._common import EXIT_INTERRUPTED, Session, console, leaf, with_examples
from arrowlog.cli._inputs import open_input, row_count
from arrowlog.producer.bulkload import LoadProgress, bulk_load


@contextlib.contextmanager
def progress_bar(total: int | None, unit: str, *, enabled: bool) -> Iterator[Progress]:
    """One bar on stderr: done/total, percentage, elapsed and ETA. Live on a
    terminal; otherwise (a log file, a test) printed once when the job is done.
    On an error the bar goes away: the error's one line says it all."""
    err = console(err=True)
    live = enabled and err.is_terminal
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=err,
        disable=not live,
    )
    bar.add_task(unit, total=total)
    bar.start()
    try:
        yield bar
    except BaseException:
        bar.live.transient = True
        raise
    finally:
        bar.stop()
    if enabled and not live:
        err.print(bar.get_renderable())


def interrupted(where: str) -> click.exceptions.Exit:
    click.echo(f"interrupted at {where}; rerun to resume", err=True)
    return click.exceptions.Exit(EXIT_INTERRUPTED)


@click.command("load")
@click.argument("topic")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--partition", type=click.IntRange(min=0), default=0, show_default=True)
@click.option(
    "--start-offset",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Where the load's first row goes (the log end when it first started).",
)
@click.option(
    "--rows-per-batch", type=int, default=65_536, show_default=True, help="Rows per segment."
)
@click.option("--create", is_flag=True, help="Create the topic (schema of FILE) if missing.")
@click.option(
    "--partitions", type=click.IntRange(min=1), default=1, show_default=True, help="With --create."
)
@click.option("--no-progress", "--quiet", "no_progress", is_flag=True, help="No progress bar.")
@leaf(read_only=False, creates_root=lambda args: bool(args["create"]))
@with_examples(
    "arrowlog load events data.parquet --create",
    "arrowlog load events data.csv --partition 2 --start-offset 1000   # rerun to resume",
    "arrowlog backfill events big.parquet --rows-per-batch 100000 --root s3://bucket/logs",
)
def load(
    session: Session,
    topic: str,
    file: str,
    partition: int,
    start_offset: int,
    rows_per_batch: int,
    create: bool,
    partitions: int,
    no_progress: bool,
) -> None:
    """Bulk-load a Parquet, CSV or Arrow FILE into one partition of TOPIC with
    expected offsets.

    Kill it at any moment and run it again: it resumes where the log really
    ends, and the partition holds the input exactly once, in order.
    """
    log = session.connect()
    schema, batches = open_input(file)
    if create and topic not in log.list_topics():
        with contextlib.suppress(arrowlog.TopicExistsError):
            log.create_topic(topic, schema, partitions)
    part = log.partition(topic, partition)
    total = row_count(file)
    try:
        with progress_bar(total, "rows", enabled=not no_progress) as bar:

            def advance(p: LoadProgress) -> None:
                bar.update(bar.task_ids[0], completed=p.rows_done)

            result = bulk_load(
                part, batches, start_offset=start_offset, rows_per_batch=rows_per_batch,
                progress=advance,
            )  # fmt: skip
    except KeyboardInterrupt:
        raise interrupted(f"offset {_end_after_interrupt(part)}") from None
    click.echo(
        f"loaded {file} into {topic}/{partition}: offsets [{result.start_offset}, "
        f"{result.end_offset}), {result.rows_written:,} rows written, "
        f"{result.rows_skipped:,} already there"
    )


def _end_after_interrupt(part: arrowlog.PartitionLog) -> int:
    """Where the log ends now: an append cut short by Ctrl-C may have landed
    after all, so ask the store; what this process knows if that fails too."""
    try:
        return part.end_offset(complete=True)
    except (arrowlog.ArrowLogError, OSError, KeyboardInterrupt):
        return part.end_offset(refresh=False)


def _json_object(option: str, text: str | None) -> dict[str, object] | None:
    """An option's JSON object (None when not given).

    Raises:
        InvalidConfigError: not a JSON object.
    """
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as e:
        raise arrowlog.InvalidConfigError(f"{option}: not valid JSON: {e}") from None
    if not isinstance(value, dict):
        raise arrowlog.InvalidConfigError(f"{option} must be a JSON object")
    return value


from_new_incarnation = click.option(
    "--from-new-incarnation",
    is_flag=True,
    help="If TOPIC was deleted and created again since the table's last export, export "
    "the new topic from its start into the table. Without it such a run refuses "
    "(TopicRecreatedError) and writes nothing.",
)


skip_deleted = click.option(
    "--skip-deleted",
    is_flag=True,
    help="If records after the table's recorded offsets were deleted (retention, "
    "delete-records) before an export read them, skip them and export from the log start "
    "(Spark's failOnDataLoss=false). Without it such a run fails (OffsetOutOfRangeError) "
    "and writes nothing.",
)


@click.command("export-delta")
@click.argument("topic")
@click.argument("delta_path")
@click.option(
    "--delta-storage-options",
    metavar="JSON",
    help="delta-rs's storage options for DELTA_PATH, e.g. '{\"AWS_ENDPOINT_URL\": "
    '"http://127.0.0.1:8333", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "us-east-1"}\' '
    "(credentials too, or from the AWS_* environment).",
)
@from_new_incarnation
@skip_deleted
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@leaf(read_only=True)
@with_examples(
    "arrowlog export-delta events /data/delta/events",
    "arrowlog export-delta events s3://lake/delta/events --root s3://bucket/logs "
    '--delta-storage-options \'{"AWS_REGION": "eu-west-1"}\'',
    "arrowlog export-delta events /data/delta/events --from-new-incarnation",
)
def export_delta(
    session: Session,
    topic: str,
    delta_path: str,
    delta_storage_options: str | None,
    from_new_incarnation: bool,
    skip_deleted: bool,
    no_progress: bool,
) -> None:
    """Export TOPIC's newly committed records to the Delta table at
    DELTA_PATH, exactly once.

    Each run appends from where the previous one ended to the end of one
    read_committed snapshot of the topic, in one Delta commit whose app
    transactions record the offsets and the topic's incarnation; the commit
    lands only if no other export of the topic committed since the run read
    them: a rerun, a crashed run's rerun or a second exporter racing this one
    never appends a row twice. The first run creates the table. The log is
    only read. Needs the delta extra (delta-rs).
    """
    from arrowlog.jobs.export_delta import check_path, run_export

    options = _json_object("--delta-storage-options", delta_storage_options)
    check_path(delta_path)  # a usage error, before the log is opened
    log = session.connect()
    total = [0]
    try:
        with progress_bar(None, "offsets", enabled=not no_progress) as bar:

            def advance(done: int, of: int) -> None:
                total[0] = of
                bar.update(bar.task_ids[0], completed=done, total=of)

            result = run_export(
                log, topic, delta_path,
                delta_storage={str(k): str(v) for k, v in (options or {}).items()},
                on_recreated="restart" if from_new_incarnation else "fail",
                on_data_loss="skip" if skip_deleted else "fail", progress=advance,
            )  # fmt: skip
            bar.update(bar.task_ids[0], completed=total[0], total=total[0])
    except KeyboardInterrupt:
        # nothing of this run counts unless its Delta commit landed: the rerun
        # finds out from the table itself
        raise interrupted("the last committed export") from None
    if session.output == "json":
        session.json(
            {"topic": topic, "table": delta_path, "rows": result.rows, "offsets": result.offsets,
             "incarnation": result.incarnation, "version": result.table_version,
             "attempts": result.attempts}
        )  # fmt: skip
        return
    where = f"version {result.table_version}" if result.table_version is not None else "no commit"
    click.echo(
        f"exported {result.rows:,} rows of {topic} to {delta_path} ({where}); "
        f"now at {_position(result.offsets, result.incarnation)}"
    )


def _position(offsets: dict[str, int], incarnation: int) -> str:
    return str(offsets) if incarnation == 0 else f"{offsets} of incarnation {incarnation}"


@click.command("export-iceberg")
@click.argument("topic")
@click.argument("table")
@click.option(
    "--warehouse",
    envvar="ARROWLOG_ICEBERG_WAREHOUSE",
    show_envvar=True,
    help="Where tables are written; a local one also keeps the default SQLite catalog "
    "(WAREHOUSE/catalog.db).",
)
@click.option(
    "--catalog-uri",
    envvar="ARROWLOG_ICEBERG_CATALOG_URI",
    show_envvar=True,
    help="The SQL catalog's SQLAlchemy URL (default: sqlite:///WAREHOUSE/catalog.db).",
)
@click.option(
    "--catalog-name",
    default="arrowlog",
    show_default=True,
    help="The catalog's name; alone, a catalog configured for pyiceberg (.pyiceberg.yaml).",
)
@click.option(
    "--catalog-properties",
    metavar="JSON",
    help='Any pyiceberg catalog, e.g. \'{"type": "rest", "uri": "http://..."}\'.',
)
@from_new_incarnation
@skip_deleted
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@leaf(read_only=True)
@with_examples(
    "arrowlog export-iceberg events analytics.events --warehouse /data/iceberg",
    "arrowlog export-iceberg events analytics.events --root s3://bucket/logs "
    "--warehouse /data/iceberg",
    "arrowlog export-iceberg events db.events --catalog-properties "
    '\'{"type": "rest", "uri": "http://localhost:8181"}\'',
)
def export_iceberg(
    session: Session,
    topic: str,
    table: str,
    warehouse: str | None,
    catalog_uri: str | None,
    catalog_name: str,
    catalog_properties: str | None,
    from_new_incarnation: bool,
    skip_deleted: bool,
    no_progress: bool,
) -> None:
    """Export TOPIC's newly committed records to the Iceberg table TABLE
    (NAMESPACE.NAME), exactly once.

    Each run appends from where the previous one ended to the end of one
    read_committed snapshot of the topic, in one Iceberg snapshot whose summary
    records the offsets and the topic's incarnation: a rerun, a crashed run's
    rerun or a second exporter racing this one never appends a row twice. The
    first run creates the table. The log is only read. Needs the iceberg extra.
    """
    from arrowlog.jobs.export_iceberg import CatalogConfig, check_identifier, export

    check_identifier(table)
    if not (warehouse or catalog_uri or catalog_properties or catalog_name != "arrowlog"):
        raise click.UsageError(
            "no Iceberg catalog: pass --warehouse DIR (an SQLite catalog is kept there as "
            "catalog.db), --catalog-properties JSON, or --catalog-name NAME (.pyiceberg.yaml)",
            ctx=click.get_current_context(),
        )
    properties = _json_object("--catalog-properties", catalog_properties or None)
    config = CatalogConfig.resolve(
        name=catalog_name, warehouse=warehouse, uri=catalog_uri, properties=properties
    )
    log = session.connect()
    total = [0]
    try:
        with progress_bar(None, "offsets", enabled=not no_progress) as bar:

            def advance(done: int, of: int) -> None:
                total[0] = of
                bar.update(bar.task_ids[0], completed=done, total=of)

            result = export(
                log, topic, table, catalog=config,
                on_recreated="restart" if from_new_incarnation else "fail",
                on_data_loss="skip" if skip_deleted else "fail", progress=advance,
            )  # fmt: skip
            bar.update(bar.task_ids[0], completed=total[0], total=total[0])
    except KeyboardInterrupt:
        # nothing of this run counts unless its snapshot was committed: the
        # rerun finds out from the table itself
        raise interrupted("the last committed export") from None
    if session.output == "json":
        session.json(
            {"topic": topic, "table": table, "rows": result.rows, "offsets": result.offsets,
             "incarnation": result.incarnation, "snapshot_id": result.snapshot_id,
             "attempts": result.attempts}
        )  # fmt: skip
        return
    where = f"snapshot {result.snapshot_id}" if result.snapshot_id else "no new snapshot"
    click.echo(
        f"exported {result.rows:,} rows of {topic} to {table} ({where}); "
        f"now at {_position(result.offsets, result.incarnation)}"
    )
