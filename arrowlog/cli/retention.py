"""``arrowlog delete-records`` (kafka-delete-records: the log start moves),
``arrowlog compact`` (small segments into compacted objects) and ``arrowlog
vacuum`` (removes what deleted records and compaction left once their topic's
delete_delay_ms has passed; ``--dry-run`` lists it; staged objects no commit
names are listed and left in place)."""

from __future__ import annotations

import re
from collections.abc import Callable

import click

from arrowlog.cli._common import (
    BYTE_UNITS,
    DURATION_EXAMPLE,
    DURATION_UNITS,
    SIZE_EXAMPLE,
    with_units,
)
from arrowlog.config import DEFAULT_RETAIN_MS
from arrowlog.jobs.commandline import Session, leaf, progress_bar, with_examples
from arrowlog.maintenance.compaction import (
    DEFAULT_TARGET_BYTES,
    MAX_TARGET_BYTES,
    MIN_TARGET_BYTES,
    Compacted,
)


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


def _with_units(units: dict[str, int], example: str) -> Callable[..., int]:
    """A click callback reading :func:`with_units`."""

    def parse(ctx: click.Context, param: click.Parameter, value: str) -> int:
        try:
            return with_units(value, units, example)
        except ValueError as e:
            raise click.BadParameter(str(e)) from None

    return parse


#: a size in bytes: an int, or with a unit (KiB, MiB, GiB)
_byte_size = _with_units(BYTE_UNITS, SIZE_EXAMPLE)
#: a duration in ms: an int, or with a unit (ms, s, m, h, d)
_duration_ms = _with_units(DURATION_UNITS, DURATION_EXAMPLE)


@click.command("vacuum")
@click.argument("topics", nargs=-1)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List what would be removed, and why; write and remove nothing "
    "(ages by this machine's clock, not the store's).",
)
@click.option(
    "--retain",
    "retain_ms",
    callback=_duration_ms,
    default=str(DEFAULT_RETAIN_MS),
    show_default="7d",
    help="How long bookkeeping (producer ids, coordinator and group entries, "
    "transactional ids, staged files) must be idle before it goes (1h or more; "
    "like 7d, 36h, or ms). Applies when no TOPICS are named.",
)
@leaf(read_only=lambda args: bool(args["dry_run"]))
@with_examples(
    "arrowlog vacuum --dry-run",
    "arrowlog vacuum events --output json",
    "arrowlog vacuum --retain 14d",
)
def vacuum(session: Session, topics: tuple[str, ...], dry_run: bool, retain_ms: int) -> None:
    """Remove the segments of deleted records (below the log start) and of
    compacted ranges whose topic's delete_delay_ms has passed, in TOPICS
    (default: every topic), applying each topic's retention; a commit object
    goes with the staged objects it names. Without TOPICS, also remove the
    bookkeeping idle longer than --retain that nothing refers to. Staged
    objects that no commit names, older than the delay (a writer killed
    between its upload and its commit leaves one), are listed with action
    "leave" and never removed: a commit could still name one. Killed
    anywhere, running it again finishes."""
    log = session.connect()
    removed = log.maintenance.vacuum(topics or None, dry_run=dry_run, retain_ms=retain_ms)
    rows = [{"key": r.key, "action": "remove", "reason": r.reason} for r in removed]
    rows += [
        {
            "key": o.key,
            "action": "leave",
            "reason": f"orphaned staged object: no commit names it, written {o.age_ms // 1000} s "
            "ago; left in place (vacuum never removes one: a commit could still name it)",
        }
        for o in removed.orphans
    ]
    if dry_run or session.output != "table" or len(rows) <= LIST_AT_MOST:
        session.table(rows)
    else:
        session.table(_by_reason(rows))
        session.message(f"(--dry-run lists each object; --output json gives all {len(rows)})")
    verb = "would remove" if dry_run else "removed"
    left = f"; left {len(removed.orphans)} orphaned staged object(s) in place"
    session.message(f"{verb} {len(removed)} object(s){left if removed.orphans else ''}")


#: a vacuum that removed more objects than this prints them grouped by reason
LIST_AT_MOST = 20


def _by_reason(rows: list[dict[str, str]]) -> list[dict[str, object]]:
    """One row per action and kind of reason (the reason with its numbers
    blanked), with how many objects and an example key."""
    groups: dict[tuple[str, str], list[str]] = {}
    for row in rows:
        kind = re.sub(r"\d+", "N", row["reason"])
        groups.setdefault((row["action"], kind), []).append(row["key"])
    return [
        {"objects": len(keys), "action": action, "reason": kind, "e.g.": keys[0]}
        for (action, kind), keys in sorted(groups.items(), key=lambda g: -len(g[1]))
    ]


@click.command("compact")
@click.argument("topics", nargs=-1)
@click.option(
    "--target-bytes",
    callback=_byte_size,
    default=str(DEFAULT_TARGET_BYTES),
    show_default="64MiB",
    help=f"The size a compacted object aims at ({MIN_TARGET_BYTES >> 20}MiB to "
    f"{MAX_TARGET_BYTES >> 30}GiB; units KiB, MiB, GiB).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="List the ranges that would be compacted; write nothing.",
)
@click.option("--no-progress", is_flag=True, help="No progress bar (one per partition done).")
@leaf(read_only=lambda args: bool(args["dry_run"]))
@with_examples(
    "arrowlog compact --dry-run",
    "arrowlog compact events --target-bytes 128MiB",
    "arrowlog compact && arrowlog vacuum   # the segments go once delete_delay_ms has passed",
)
def compact(
    session: Session, topics: tuple[str, ...], target_bytes: int, dry_run: bool, no_progress: bool
) -> None:
    """Rewrite the committed records of small segments in TOPICS (default: every
    topic) into compacted objects of about --target-bytes: every complete
    checkpoint window but the newest, up to the last stable offset. Readers use
    them at once; `arrowlog vacuum` removes the segments once the topic's
    delete_delay_ms has passed. Killed anywhere, running it again finishes."""
    if not MIN_TARGET_BYTES <= target_bytes <= MAX_TARGET_BYTES:
        raise click.BadParameter(
            f"{target_bytes} is not between {MIN_TARGET_BYTES} and {MAX_TARGET_BYTES}",
            param_hint="--target-bytes",
        )
    log = session.connect()
    names = list(topics) if topics else sorted(log.list_topics())
    total = sum(log.topic(name).partitions for name in names)
    # a bar beside machine-read output, or for a plan that writes nothing, is noise
    shown = not (no_progress or dry_run or session.output != "table")
    with progress_bar(total, "partitions", enabled=shown) as bar:

        def advance(topic: str, partition: int, compacted: list[Compacted]) -> None:
            bar.advance(bar.task_ids[0])

        done = log.maintenance.compact(
            topics or None, target_bytes=target_bytes, dry_run=dry_run, progress=advance
        )
    session.table(
        [
            {
                "topic": c.topic,
                "partition": c.partition,
                "start": c.start,
                "end": c.end,
                "segments": c.segments,
                "staged": c.staged,
                "bytes": c.bytes_before,
                "records": c.records,
                "key": c.key,
            }
            for c in done
        ]
    )
    verb = "would compact" if dry_run else "compacted"
    segments = sum(c.segments for c in done)
    staged = sum(c.staged for c in done)
    named = f" (and {staged} staged object(s) their commits name)" if staged else ""
    session.message(f"{verb} {segments} segment(s){named} into {len(done)} object(s)")
