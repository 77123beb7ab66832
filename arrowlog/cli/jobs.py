"""The jobs as subcommands: ``arrowlog load`` (alias ``backfill``: a restartable
bulk load with expected offsets) and ``arrowlog export-delta``. One progress bar
each (total, percentage, ETA); Ctrl-C says where to resume."""

from __future__ import annotations

import contextlib
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
