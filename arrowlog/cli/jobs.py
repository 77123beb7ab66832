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
from arrowlog.bulkload import LoadProgress, bulk_load
from arrowlog.cli._common import EXIT_INTERRUPTED, Session, console, leaf, with_examples
from arrowlog.cli._inputs import open_input, row_count


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


@click.command("export-delta")
@click.argument("topic")
@click.argument("delta_path")
@click.option("--no-progress", is_flag=True, help="No progress bar.")
@leaf(read_only=False)
@with_examples(
    "arrowlog export-delta events /data/delta/events",
    "arrowlog export-delta events s3://bucket/delta/events --root s3://bucket/logs",
)
def export_delta(session: Session, topic: str, delta_path: str, no_progress: bool) -> None:
    """Export TOPIC's newly committed records to a Delta table, exactly once.

    Each run exports from where the previous one ended to the last stable
    offsets, tagged with a Delta app transaction: a rerun after a crash never
    exports a row twice. Needs the spark and delta extras.
    """
    from arrowlog.jobs._spark import local_session
    from arrowlog.jobs.export_delta import export, exported_state

    log = session.connect()
    before = exported_state(delta_path, topic)
    stable = log.stable_offsets(topic)
    starts = log.start_offsets(topic)
    total = sum(end - before.offsets.get(str(p), starts[p]) for p, end in stable.items())
    try:
        with progress_bar(total, "offsets", enabled=not no_progress) as bar:
            spark = local_session("arrowlog-export-delta")
            rows = export(spark, session.root or "", topic, delta_path, dict(session.options))
            bar.update(bar.task_ids[0], completed=total)
    except KeyboardInterrupt:
        # nothing of this run counts unless its Delta commit landed: the rerun
        # finds out from the table itself
        raise interrupted(f"offsets {before.offsets or 'the log start'}") from None
    after = exported_state(delta_path, topic)
    click.echo(f"exported {rows:,} rows of {topic} to {delta_path}; now at {after.offsets}")


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
    no_progress: bool,
) -> None:
    """Export TOPIC's newly committed records to the Iceberg table TABLE
    (NAMESPACE.NAME), exactly once.

    Each run appends from where the previous one ended to the end of one
    read_committed snapshot of the topic, in one Iceberg snapshot whose summary
    records the offsets: a rerun, a crashed run's rerun or a second exporter
    racing this one never appends a row twice. The first run creates the table.
    The log is only read. Needs the iceberg extra.
    """
    from arrowlog.jobs.export_iceberg import CatalogConfig, check_identifier, export

    check_identifier(table)
    if not (warehouse or catalog_uri or catalog_properties or catalog_name != "arrowlog"):
        raise click.UsageError(
            "no Iceberg catalog: pass --warehouse DIR (an SQLite catalog is kept there as "
            "catalog.db), --catalog-properties JSON, or --catalog-name NAME (.pyiceberg.yaml)",
            ctx=click.get_current_context(),
        )
    properties = None
    if catalog_properties:
        try:
            properties = json.loads(catalog_properties)
        except ValueError as e:
            raise arrowlog.InvalidConfigError(
                f"--catalog-properties: not valid JSON: {e}"
            ) from None
        if not isinstance(properties, dict):
            raise arrowlog.InvalidConfigError("--catalog-properties must be a JSON object")
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

            result = export(log, topic, table, catalog=config, progress=advance)
            bar.update(bar.task_ids[0], completed=total[0], total=total[0])
    except KeyboardInterrupt:
        # nothing of this run counts unless its snapshot was committed: the
        # rerun finds out from the table itself
        raise interrupted("the last committed export") from None
    if session.output == "json":
        session.json(
            {"topic": topic, "table": table, "rows": result.rows, "offsets": result.offsets,
             "snapshot_id": result.snapshot_id, "attempts": result.attempts}
        )  # fmt: skip
        return
    where = f"snapshot {result.snapshot_id}" if result.snapshot_id else "no new snapshot"
    click.echo(
        f"exported {result.rows:,} rows of {topic} to {table} ({where}); now at {result.offsets}"
    )
