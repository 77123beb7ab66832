"""``arrowlog groups``: list, describe (with lag), reset-offsets, delete
(kafka-consumer-groups)."""

from __future__ import annotations

import collections
import csv
import dataclasses
import time

import click

import arrowlog
from arrowlog.cli._common import DURATION_EXAMPLE, DURATION_UNITS, with_units
from arrowlog.cli.console import parse_time
from arrowlog.errors import (
    InvalidConfigError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from arrowlog.jobs.commandline import Session, leaf, with_examples, write_csv
from arrowlog.txn.groups import GroupOffsets, list_groups
from arrowlog.txn.view import incarnation_of


@click.group("groups")
@with_examples(
    "arrowlog groups list",
    "arrowlog groups describe etl",
    "arrowlog groups reset-offsets etl --topic events --to-earliest --execute",
)
def groups() -> None:
    """Consumer groups: their positions, lag, resets and deletion."""


def _offsets(log: arrowlog.ArrowLog, group: str) -> GroupOffsets:
    return GroupOffsets(log.store, group, log.config.retry, resolver=log.resolver)


@groups.command("list")
@leaf(read_only=True)
@with_examples("arrowlog groups list", "arrowlog groups list --output json")
def list_(session: Session) -> None:
    """List the consumer groups with committed offsets."""
    log = session.connect()
    names = list_groups(log.store, log.config.retry)
    if session.output == "json":
        session.json(names)
    elif session.output == "csv":
        write_csv([{"group": n} for n in names], columns=["group"])
    else:
        for name in names:
            click.echo(name)


@groups.command("describe")
@click.argument("group")
@leaf(read_only=True)
@with_examples("arrowlog groups describe etl", "arrowlog groups describe etl --output json")
def describe(session: Session, group: str) -> None:
    """GROUP's committed offset, log end and lag in every partition of its topics.

    UNSTABLE marks partitions an undecided transaction may still move.
    """
    rows = session.connect().admin.describe_group(group)
    session.table([{"group": group, **dataclasses.asdict(r)} for r in rows])


def _targets(
    log: arrowlog.ArrowLog, group: str, topics: tuple[str, ...], all_topics: bool
) -> list[tuple[str, int]]:
    """The partitions named by --topic T / T:0,1 or --all-topics."""
    if all_topics == bool(topics):
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    if all_topics:
        offsets, unstable = _offsets(log, group).position(log.resolver, incarnation_of(log))
        names = sorted({t for t, _ in offsets} | {t for t, _ in unstable})
        return [(t, p) for t in names for p in range(log.topic(t).partitions)]
    out = []
    for spec in topics:
        name, _, parts = spec.partition(":")
        topic = log.topic(name)
        if parts or spec.endswith(":"):
            try:
                numbers = [_digits(x.strip()) for x in parts.split(",")]
            except ValueError:
                raise click.BadParameter(f"--topic {spec!r}: write TOPIC or TOPIC:0,1,2") from None
            out += [(name, topic.check_partition(p)) for p in numbers]
        else:
            out += [(name, p) for p in range(topic.partitions)]
    for (name, p), times in collections.Counter(out).items():
        if times > 1:  # as --from-file refuses a repeated line
            raise click.BadParameter(f"{name!r} names partition {p} twice", param_hint="--topic")
    return out


@groups.command("reset-offsets")
@click.argument("group")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,P]",
    help="Partitions to reset (repeatable).",
)
@click.option(
    "--all-topics", is_flag=True, help="Every partition of the topics the group has offsets for."
)
@click.option("--to-earliest", is_flag=True, help="The log start.")
@click.option(
    "--to-latest", is_flag=True, help="The last stable offset (where read_committed reading ends)."
)
@click.option("--to-offset", type=click.IntRange(min=0), help="This offset (clamped to the log).")
@click.option(
    "--to-datetime", metavar="TIME", help="The first record appended at or after TIME (ISO or ms)."
)
@click.option(
    "--by-duration",
    metavar="DURATION",
    help="The first record appended at or after DURATION ago (like 1h, 7d, or ms).",
)
@click.option("--to-current", is_flag=True, help="The group's current offset (no move).")
@click.option("--shift-by", type=int, help="Move the current offset by N (clamped to the log).")
@click.option(
    "--from-file",
    type=click.Path(dir_okay=False),
    metavar="CSV",
    help="The offsets of a file of topic,partition,offset lines (what --export prints); "
    "it names the partitions, instead of --topic or --all-topics.",
)
@click.option(
    "--export", is_flag=True, help="Print the new offsets as topic,partition,offset CSV lines."
)
@click.option(
    "--execute", is_flag=True, help="Apply the reset (default: a dry run that only prints it)."
)
@leaf(read_only=lambda args: not args["execute"])  # a dry run writes nothing
@with_examples(
    "arrowlog groups reset-offsets etl --topic events --to-earliest            # dry run",
    "arrowlog groups reset-offsets etl --topic events:0,1 --shift-by -100 --execute",
    "arrowlog groups reset-offsets etl --all-topics --to-datetime 2026-11-22T08:00:00Z --execute",
    "arrowlog groups reset-offsets etl --all-topics --to-current --export > etl.csv",
    "arrowlog groups reset-offsets etl --from-file etl.csv --execute",
)
def reset_offsets(
    session: Session,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    by_duration: str | None,
    to_current: bool,
    shift_by: int | None,
    from_file: str | None,
    export: bool,
    execute: bool,
) -> None:
    """Move GROUP's committed offsets, like kafka-consumer-groups --reset-offsets.

    Without --execute nothing is written: the new offsets are only printed.
    """
    chosen = [
        to_earliest,
        to_latest,
        to_offset is not None,
        to_datetime is not None,
        by_duration is not None,
        to_current,
        shift_by is not None,
        from_file is not None,
    ]
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, "
            "--by-duration, --to-current, --shift-by, --from-file"
        )
    at = parse_time(to_datetime) if to_datetime is not None else None
    if by_duration is not None:
        try:
            ago = with_units(by_duration, DURATION_UNITS, DURATION_EXAMPLE)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--by-duration") from None
        at = int(time.time() * 1000) - ago
    planned = _read_offsets_file(from_file) if from_file is not None else None
    if planned is not None and (topics or all_topics):
        raise click.UsageError("--from-file names the partitions: leave out --topic/--all-topics")
    log = session.connect()
    offsets = _offsets(log, group)
    if not offsets.exists() and (shift_by is not None or to_current or all_topics):
        raise UnknownTopicOrPartitionError(f"unknown consumer group {group!r}")
    if planned is not None:
        targets = [(t, log.topic(t).check_partition(p)) for t, p in planned]
    else:
        targets = _targets(log, group, topics, all_topics)
    current, unstable = offsets.position(log.resolver, incarnation_of(log))
    held = sorted(set(targets) & unstable)
    if held:
        raise UnstableOffsetCommitError(
            f"group {group}: an undecided transaction may still move {held}; retry once it ends",
            partitions=set(held),
        )
    # one consumer for the lookups and the commit: a topic created again between
    # them is refused (TopicRecreatedError), not given the old topic's targets
    consumer = log.consumer(group_id=group)
    rows, new = [], {}
    for topic, p in targets:
        part = log.partition(topic, p)
        start, end = part.start_offset(), consumer.end_offset(topic, p)
        now = current.get((topic, p))
        if to_earliest:
            target = start
        elif to_latest:
            target = end
        elif to_offset is not None:
            target = to_offset
        elif at is not None:
            target = consumer.offset_for_time(topic, p, at)
        elif planned is not None:
            target = planned[(topic, p)]
        elif to_current and now is None:
            continue  # no current offset: nothing to keep
        else:
            if now is None:
                raise InvalidConfigError(f"--shift-by: group {group} has no offset for {topic}/{p}")
            target = now + (shift_by or 0)
        target = min(max(target, start), end)  # Kafka clamps out-of-range resets too
        new[(topic, p)] = target
        rows.append(
            {
                "group": group,
                "topic": topic,
                "partition": p,
                "current_offset": now,
                "new_offset": target,
            }
        )
    if to_current and not new:
        raise InvalidConfigError(f"--to-current: group {group} has no offset in these partitions")
    if execute:
        consumer.commit(new)
    if export:
        for (topic, p), target in new.items():
            click.echo(f"{topic},{p},{target}")
    else:
        session.table(rows)
    said = (
        f"reset {len(new)} partition(s) of group {group}"
        if execute
        else "dry run: nothing written; add --execute to apply"
    )
    if export:
        click.echo(said, err=True)  # stdout holds the CSV lines alone
    else:
        session.message(said)


def _read_offsets_file(path: str) -> dict[tuple[str, int], int]:
    """The offsets of a ``topic,partition,offset`` CSV file (kafka-consumer-groups'
    --export format), in its order.

    Raises:
        InvalidConfigError: a line of another form, or a partition given twice.
    """
    out: dict[tuple[str, int], int] = {}
    # utf-8-sig: a spreadsheet saves CSV with a byte order mark
    with open(path, newline="", encoding="utf-8-sig") as f:
        for number, row in enumerate(csv.reader(f), start=1):
            if not row or not "".join(row).strip():
                continue
            try:
                topic, partition, offset = (c.strip() for c in row)
                key, value = (topic, _digits(partition)), _digits(offset)
            except ValueError:
                raise InvalidConfigError(
                    f"--from-file {path} line {number}: expected topic,partition,offset, "
                    f"got {','.join(row)!r}"
                ) from None
            if key in out or key[1] < 0 or value < 0 or not topic:
                raise InvalidConfigError(
                    f"--from-file {path} line {number}: {','.join(row)!r} "
                    + ("names a partition again" if key in out else "is not a partition offset")
                )
            out[key] = value
    if not out:
        raise InvalidConfigError(f"--from-file {path}: no topic,partition,offset line")
    return out


def _digits(text: str) -> int:
    """A number of ASCII digits alone: int() also reads '4_0' as 40 and other
    scripts' digits, so a mangled line would move the group where nobody said."""
    if not text.isascii() or not text.isdigit():
        raise ValueError(text)
    return int(text)


@groups.command("delete")
@click.argument("group")
@leaf(read_only=False)
@with_examples("arrowlog groups delete etl")
def delete(session: Session, group: str) -> None:
    """Delete GROUP's committed offsets.

    Refused while an undecided transaction has offsets for the group.
    """
    log = session.connect()
    offsets = _offsets(log, group)
    if not offsets.exists():
        raise UnknownTopicOrPartitionError(f"unknown consumer group {group!r}")
    removed = offsets.delete()
    session.message(f"deleted group {group} ({removed} entries)")
