"""Backfill: bulk-load a Parquet, CSV or Arrow file into one partition of a topic
with expected offsets. Kill it at any moment and run it again: it resumes where
the log really ends, and the partition holds the input exactly once, in order.

The job is ``arrowlog load`` (alias ``arrowlog backfill``), the command
:data:`command` defines; run by itself, the root may come first::

    python -m arrowlog.jobs.backfill ROOT TOPIC FILE [--partition 0] [--start-offset 0]
        [--rows-per-batch 65536] [--create] [--storage-options JSON] [--no-progress]
    spark-submit spark_jobs/backfill.py --root ROOT TOPIC FILE [options]
"""

from __future__ import annotations

import contextlib
import sys

import click

import arrowlog
from arrowlog.jobs.commandline import (
    Session,
    interrupted,
    leaf,
    progress_bar,
    run_job,
    with_examples,
)
from arrowlog.jobs.inputs import as_topic_nullability, open_input, row_count
from arrowlog.producer.bulkload import (
    LoadMismatchError,
    LoadProgress,
    bulk_load,
    check_rows_per_batch,
)


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
def command(
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
    check_rows_per_batch(rows_per_batch)  # bad arguments before the file is looked at
    log = session.connect()
    schema, batches = open_input(file)
    if create and topic not in log.list_topics():
        with contextlib.suppress(arrowlog.TopicExistsError):
            log.create_topic(topic, schema, partitions)
    part = log.partition(topic, partition)
    batches = as_topic_nullability(batches, part.topic.schema, file)
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
    except LoadMismatchError as e:
        end = part.end_offset()
        if end and start_offset == 0:
            raise LoadMismatchError(
                f"{e}. The partition holds records up to offset {end}: a new load after "
                f"them is --start-offset {end}; a rerun takes the --start-offset its first "
                "run was given"
            ) from None
        raise
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


def main(argv: list[str] | None = None) -> int:
    """``python -m arrowlog.jobs.backfill ROOT TOPIC FILE [options]``: the same
    as ``arrowlog backfill TOPIC FILE --root ROOT [options]``."""
    return run_job(command, "backfill", argv)


if __name__ == "__main__":
    sys.exit(main())
