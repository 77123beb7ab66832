"""``arrowlog topics``: create, list, describe, alter, delete (kafka-topics)."""

from __future__ import annotations

import dataclasses
from typing import Any

import click
import pyarrow as pa

from arrowlog.cli._common import (
    BYTE_UNITS,
    DURATION_EXAMPLE,
    DURATION_UNITS,
    SIZE_EXAMPLE,
    with_units,
)
from arrowlog.config import TopicConfig
from arrowlog.errors import InvalidConfigError, TopicExistsError
from arrowlog.jobs.command_store import coerce_option
from arrowlog.jobs.commandline import Session, leaf, with_examples, write_csv
from arrowlog.jobs.inputs import parse_schema, schema_of_file
from arrowlog.log.topics import ALTERABLE


@click.group()
@with_examples(
    "arrowlog topics create events --partitions 4 --schema 'id: int64 not null, name: string'",
    "arrowlog topics list",
    "arrowlog topics describe events",
)
def topics() -> None:
    """Create, list, describe, alter and delete topics."""


def _config_values(items: tuple[str, ...]) -> dict[str, Any]:
    known = [f.name for f in dataclasses.fields(TopicConfig)]
    values: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip().replace("-", "_").replace(".", "_")
        if not sep or key not in known:
            raise InvalidConfigError(
                f"--config takes KEY=VALUE with KEY one of {known}, got {item!r}"
            )
        if key in ALTERABLE and text.strip().lower() == "none":
            values[key] = None
        elif key.endswith(("_ms", "_bytes")):
            units, example = (
                (DURATION_UNITS, DURATION_EXAMPLE) if key.endswith("_ms")
                else (BYTE_UNITS, SIZE_EXAMPLE)
            )  # fmt: skip
            try:
                values[key] = with_units(text, units, example)
            except ValueError as e:
                raise InvalidConfigError(f"--config {key}: {e}") from None
        else:
            values[key] = coerce_option(key, text)
    return values


def _topic_config(items: tuple[str, ...]) -> TopicConfig | None:
    values = _config_values(items)
    return TopicConfig(**values) if values else None


@topics.command("create")
@click.argument("topic")
@click.option("--partitions", type=click.IntRange(min=1), default=1, show_default=True)
@click.option(
    "--schema", "schema_text", metavar="FIELDS", help="e.g. 'id: int64 not null, v: string'"
)
@click.option(
    "--schema-from",
    type=click.Path(dir_okay=False),
    metavar="FILE",
    help="Take the schema of a .parquet, .csv or .arrow file.",
)
@click.option(
    "--config",
    multiple=True,
    metavar="KEY=VALUE",
    help="max_batch_bytes, checkpoint_interval, max_transaction_timeout_ms, "
    "compression=zstd|lz4|none, delete_delay_ms, retention_ms, retention_bytes "
    "(repeatable).",
)
@click.option("--if-not-exists", is_flag=True, help="Succeed if the topic exists already.")
@click.option(
    "--allow-unsafe-store",
    is_flag=True,
    help="Create the topic even on a store `arrowlog doctor --record` judged unsafe.",
)
@leaf(read_only=False, creates_root=True)
@with_examples(
    "arrowlog topics create events --schema 'id: int64 not null, name: string' --partitions 4",
    "arrowlog topics create events --schema-from sample.parquet --config checkpoint_interval=50",
)
def create(
    session: Session,
    topic: str,
    partitions: int,
    schema_text: str | None,
    schema_from: str | None,
    config: tuple[str, ...],
    if_not_exists: bool,
    allow_unsafe_store: bool,
) -> None:
    """Create TOPIC with a schema and a partition count."""  # fmt: skip
    if (schema_text is None) == (schema_from is None):
        raise click.UsageError("give exactly one of --schema and --schema-from")
    schema = parse_schema(schema_text) if schema_text else schema_of_file(str(schema_from))
    topic_config = _topic_config(config)
    log = session.connect()
    wait = log.reuse_wait(topic)
    if wait > 0:
        session.message(
            f"topic {topic} was deleted: waiting {wait:.1f} s until every client that held "
            "it has noticed (metadata_max_age_ms), then creating it anew"
        )
    try:
        created = log.create_topic(
            topic, schema, partitions, config=topic_config, allow_unsafe_store=allow_unsafe_store
        )
    except TopicExistsError:
        if not if_not_exists:
            raise
        session.message(f"topic {topic} exists already")
        return
    session.message(f"created topic {created.name} with {created.partitions} partition(s)")


@topics.command("list")
@leaf(read_only=True)
@with_examples("arrowlog topics list --root s3://bucket/logs", "arrowlog topics list --output json")
def list_topics(session: Session) -> None:
    """List topic names."""
    names = sorted(session.connect().list_topics())
    if session.output == "json":
        session.json(names)
    elif session.output == "csv":
        write_csv([{"topic": n} for n in names], columns=["topic"])
    else:
        for name in names:
            click.echo(name)


def _schema_lines(schema: pa.Schema) -> list[str]:
    return [f"{f.name}: {f.type}{'' if f.nullable else ' not null'}" for f in schema]


@topics.command("describe")
@click.argument("topic", required=False)
@leaf(read_only=True)
@with_examples("arrowlog topics describe events", "arrowlog topics describe --output json")
def describe(session: Session, topic: str | None) -> None:
    """Schema, config and per-partition offsets of TOPIC (default: every topic)."""
    log = session.connect()
    names = [topic] if topic else sorted(log.list_topics())
    described = [log.describe_topic(name) for name in names]
    if session.output == "json":
        session.json(
            [
                {
                    "topic": d.topic.name,
                    "partitions": d.topic.partitions,
                    "schema": _schema_lines(d.topic.schema),
                    "config": dataclasses.asdict(d.topic.config),
                    "partition_offsets": [dataclasses.asdict(p) for p in d.partitions],
                }
                for d in described
            ]
        )
        return
    if session.output == "csv":  # one table: the partitions of every topic
        session.table(
            [
                {"topic": d.topic.name, **dataclasses.asdict(p)}
                for d in described
                for p in d.partitions
            ]
        )
        return
    for d in described:
        config = " ".join(f"{k}={v}" for k, v in dataclasses.asdict(d.topic.config).items())
        click.echo(
            f"Topic: {d.topic.name}\tPartitionCount: {d.topic.partitions}\tConfigs: {config}"
        )
        click.echo("Schema: " + ", ".join(_schema_lines(d.topic.schema)))
        session.table([{"topic": d.topic.name, **dataclasses.asdict(p)} for p in d.partitions])


@topics.command("alter")
@click.argument("topic")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    help="The new partition count (more than today's).",
)
@click.option(
    "--config",
    multiple=True,
    metavar="KEY=VALUE",
    help="retention_ms (like 7d, 36h) or retention_bytes (like 10GiB): a number, a number "
    "with a unit, or none for no limit (repeatable).",
)
@leaf(read_only=False)
@with_examples(
    "arrowlog topics alter events --partitions 8",
    "arrowlog topics alter events --config retention_ms=7d --config retention_bytes=none",
)
def alter(session: Session, topic: str, partitions: int | None, config: tuple[str, ...]) -> None:
    """Add partitions to TOPIC (--partitions is the new total, as in
    kafka-topics), or change its retention (applied by the next `arrowlog
    vacuum`). Every value is checked before anything is written."""
    if partitions is None and not config:
        raise click.UsageError("give --partitions, --config, or both")
    changes = _config_values(config)
    if changes:  # checked whole before any write
        unknown = sorted(set(changes) - ALTERABLE)
        if unknown:
            why = (
                ": how long writers trust their view of the log end rests on it, so it "
                'stays as the topic was created (docs/protocol.md, "Deleting records")'
                if unknown == ["delete_delay_ms"]
                else ""
            )
            raise InvalidConfigError(
                f"only {sorted(ALTERABLE)} can change, not {', '.join(unknown)}{why}"
            )
        dataclasses.replace(TopicConfig(), **changes)
    log = session.connect()
    if partitions is not None:
        log.create_partitions(topic, partitions)
        session.message(f"topic {topic} now has {partitions} partition(s)")
    if changes:
        altered = log.alter_topic_config(topic, **changes)
        shown = ", ".join(f"{k}={getattr(altered.config, k)}" for k in sorted(changes))
        session.message(f"topic {topic} now has {shown}")


@topics.command("delete")
@click.argument("topic")
@leaf(read_only=False)
@with_examples("arrowlog topics delete events")
def delete(session: Session, topic: str) -> None:
    """Delete TOPIC and its records. The delete is durable at once; removing the
    objects may be cut short (a crash, Ctrl-C): run it again to finish."""
    log = session.connect()
    deletion = log.delete_topic(topic)
    if deletion.already_deleted:
        session.message(
            f"topic {topic} was already deleted; removed {deletion.objects_deleted} "
            "object(s) left behind"
        )
    else:
        session.message(f"deleted topic {topic} ({deletion.objects_deleted} object(s) removed)")
