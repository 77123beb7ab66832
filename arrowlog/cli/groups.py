"""``arrowlog groups``: list, describe (with lag), reset-offsets, delete
(kafka-consumer-groups)."""

from __future__ import annotations

import dataclasses

import click

import arrowlog
from arrowlog.cli.console import parse_time
from arrowlog.errors import (
    InvalidConfigError,
    UnknownTopicOrPartitionError,
    UnstableOffsetCommitError,
)
from arrowlog.jobs.commandline import Session, leaf, with_examples
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
        if parts:
            try:
                numbers = [int(x) for x in parts.split(",")]
            except ValueError:
                raise click.BadParameter(f"--topic {spec!r}: write TOPIC or TOPIC:0,1,2") from None
            out += [(name, topic.check_partition(p)) for p in numbers]
        else:
            out += [(name, p) for p in range(topic.partitions)]
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
@click.option("--shift-by", type=int, help="Move the current offset by N (clamped to the log).")
@click.option(
    "--execute", is_flag=True, help="Apply the reset (default: a dry run that only prints it)."
)
@leaf(read_only=lambda args: not args["execute"])  # a dry run writes nothing
@with_examples(
    "arrowlog groups reset-offsets etl --topic events --to-earliest            # dry run",
    "arrowlog groups reset-offsets etl --topic events:0,1 --shift-by -100 --execute",
    "arrowlog groups reset-offsets etl --all-topics --to-datetime 2026-11-22T08:00:00Z --execute",
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
    shift_by: int | None,
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
        shift_by is not None,
    ]
    if sum(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime, --shift-by"
        )
    at = parse_time(to_datetime) if to_datetime is not None else None
    log = session.connect()
    offsets = _offsets(log, group)
    if not offsets.exists() and (shift_by is not None or all_topics):
        raise UnknownTopicOrPartitionError(f"unknown consumer group {group!r}")
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
    if execute:
        consumer.commit(new)
    session.table(rows)
    session.message(
        f"reset {len(new)} partition(s) of group {group}"
        if execute
        else "dry run: nothing written; add --execute to apply"
    )


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
