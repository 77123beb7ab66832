"""``arrowlog delete-records`` (kafka-delete-records: the log start moves) and
``arrowlog vacuum`` (removes what deleted records left once their topic's
delete_delay_ms has passed; ``--dry-run`` lists it)."""

from __future__ import annotations

import click

from arrowlog.cli._common import Session, leaf, with_examples


@click.command("delete-records")
@click.argument("topic")
@click.option(
    "--partition",
    "partitions",
    type=click.IntRange(min=0),
    multiple=True,
    required=True,
    help="A partition whose records to delete (repeat for more).",
)
@click.option(
    "--before",
    type=click.IntRange(min=0),
    required=True,
    help="Delete the records below this offset: the partition's log start moves here.",
)
@leaf(read_only=False)
@with_examples(
    "arrowlog delete-records events --partition 0 --before 1000",
    "arrowlog delete-records events --partition 0 --partition 1 --before 500 --output json",
)
def delete_records(session: Session, topic: str, partitions: tuple[int, ...], before: int) -> None:
    """Delete TOPIC's records below --before in each --partition, like
    kafka-delete-records: readers see the new log start at once; `arrowlog
    vacuum` removes the segments once the topic's delete_delay_ms has passed.
    An offset past a partition's end fails before anything is written."""
    log = session.connect()
    for p in partitions:  # every offset checked before any is written
        end = log.partition(topic, p).end_offset()
        if before > end:
            raise click.BadParameter(
                f"--before {before} is past the end of partition {p} ({end})",
                param_hint="--before",
            )
    rows = [
        {"topic": topic, "partition": p, "log_start": log.delete_records(topic, p, before)}
        for p in partitions
    ]
    session.table(rows)


@click.command("vacuum")
@click.argument("topics", nargs=-1)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List what would be removed, and why; write and remove nothing "
    "(ages by this machine's clock, not the store's).",
)
@leaf(read_only=lambda args: bool(args["dry_run"]))
@with_examples("arrowlog vacuum --dry-run", "arrowlog vacuum events --output json")
def vacuum(session: Session, topics: tuple[str, ...], dry_run: bool) -> None:
    """Remove the segments of deleted records (below the log start) whose topic's
    delete_delay_ms has passed, in TOPICS (default: every topic). Killed
    anywhere, running it again finishes."""
    log = session.connect()
    removed = log.vacuum(topics or None, dry_run=dry_run)
    session.table([{"key": r.key, "reason": r.reason} for r in removed])
    verb = "would remove" if dry_run else "removed"
    session.message(f"{verb} {len(removed)} object(s)")
