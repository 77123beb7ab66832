"""``arrowlog get-offsets`` (kafka-get-offsets --time) and ``arrowlog dump``
(kafka-dump-log: a segment's header, writer identity, checksum verdict and rows;
a checkpoint's window, index and producer state)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

import arrowlog
from arrowlog.cli._common import isolation_option, partitions_option
from arrowlog.cli.console import iso, parse_time
from arrowlog.errors import CorruptObjectError, CorruptSegmentError, InvalidConfigError
from arrowlog.format.checkpoint import Checkpoint
from arrowlog.format.segment import SegmentHeader, decode_segment, read_header
from arrowlog.format.topic import parse_checkpoint_key, parse_segment_key
from arrowlog.jobs.commandline import EXIT_CORRUPT, Session, leaf, with_examples


@click.command("get-offsets")
@click.argument("topic")
@partitions_option
@click.option(
    "--time",
    "when",
    default="latest",
    show_default=True,
    metavar="earliest|latest|TIME",
    help="TIME: ISO date-time or ms; gives the first offset appended at or after it.",
)
@isolation_option(
    "read_uncommitted", "latest: the high watermark (read_uncommitted) or the last stable offset."
)
@leaf(read_only=True)
@with_examples(
    "arrowlog get-offsets events",
    "arrowlog get-offsets events --time earliest",
    "arrowlog get-offsets events --time 2026-11-22T08:00:00Z --output json",
)
def get_offsets(
    session: Session, topic: str, partitions: tuple[int, ...], when: str, isolation_level: str
) -> None:
    """Offsets of TOPIC's partitions at a time, like kafka-get-offsets --time.

    For a TIME later than every record: where reading ends (the log end).
    """
    log = session.connect()
    described = log.topic(topic)
    wanted = [described.check_partition(p) for p in partitions] or list(range(described.partitions))
    consumer = log.consumer(isolation_level=isolation_level)  # type: ignore[arg-type]
    at = None if when in ("earliest", "latest") else parse_time(when)
    rows = []
    for p in wanted:
        if when == "earliest":
            offset = log.partition(topic, p).start_offset()
        elif at is None:
            offset = consumer.end_offset(topic, p)
        else:
            offset = consumer.offset_for_time(topic, p, at)
        rows.append({"topic": topic, "partition": p, "offset": offset})
    session.table(rows)


def _read_object(session: Session, target: str) -> tuple[str, bytes]:
    """``(key, bytes)`` of a local file, else of a key under --root."""
    path = Path(target)
    if path.is_file():
        return path.name, path.read_bytes()
    if session.root is None:
        raise FileNotFoundError(f"{target}: no such file (or give --root to read a key)")
    log = session.connect()
    return target, bytes(log.store.get(target))


def _segment_key_of(log: arrowlog.ArrowLog, topic: str, partition: int, offset: int) -> str:
    refs = log.partition(topic, partition).segments(offset, offset + 1)
    return refs[0].key


def _header_rows(header: SegmentHeader) -> dict[str, Any]:
    return {
        "base_offset": header.base_offset,
        "last_offset": header.last_offset,
        "record_count": header.record_count,
        "timestamp": iso(header.timestamp_ms),
        "append_id": header.append_id,
        **dataclasses.asdict(header.identity),
    }


def _dump_segment(session: Session, key: str, data: bytes, rows: int) -> bool:
    verdict, header, batch = "ok", None, None
    try:
        header, batch = decode_segment(data, key=key)
    except CorruptSegmentError as e:
        verdict = f"MISMATCH: {e}"
        try:  # the header carries its own checksum: it may still be readable
            found = read_header(data, key=key)
            header = found if isinstance(found, SegmentHeader) else None
        except CorruptSegmentError:
            header = None
    out: dict[str, Any] = {"key": key, "size": len(data), "checksum": verdict}
    if header is not None:
        out["header"] = _header_rows(header)
    if batch is not None and header is not None and not header.identity.control:
        base = header.base_offset
        out["rows"] = [
            {"offset": base + i, **row} for i, row in enumerate(batch.slice(0, rows).to_pylist())
        ]
    _show(session, out)
    return verdict == "ok"


def _dump_checkpoint(session: Session, key: str, data: bytes, start: int) -> bool:
    try:
        cp = Checkpoint.from_json(data, key=key, start=start)
    except CorruptObjectError as e:
        _show(session, {"key": key, "size": len(data), "checksum": f"MISMATCH: {e}"})
        return False
    segments = [dataclasses.asdict(s) for s in cp.segments]
    _show(
        session,
        {
            "key": key,
            "size": len(data),
            "checksum": "ok",
            "header": {"log_start": cp.log_start, "window_start": cp.start, "window_end": cp.end,
                       "segments": len(cp.segments)},
            "rows": segments,
            "producers": [dataclasses.asdict(e) for e in cp.state.producers.values()],
            "open_transactions": [dataclasses.asdict(t) for t in cp.state.open_txns.values()],
        },
    )  # fmt: skip
    return True


def _show(session: Session, out: dict[str, Any]) -> None:
    if session.output == "json":
        session.json(out)
        return
    click.echo(f"Dumping {out['key']} ({out['size']:,} bytes)")
    click.echo(f"checksum: {out['checksum']}")
    for name, value in out.get("header", {}).items():
        click.echo(f"{name}: {value}")
    for section in ("producers", "open_transactions", "rows"):
        if section in out:
            click.echo(f"{section}:")
            session.table(out[section])


@click.command("dump")
@click.argument("target", required=False, metavar="[FILE|KEY]")
@click.option("--topic", help="With --partition and --offset: the segment holding that offset.")
@click.option("--partition", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--offset", type=click.IntRange(min=0))
@click.option(
    "--rows", type=click.IntRange(min=0), default=10, show_default=True, help="Rows to print."
)
@leaf(read_only=True)
@with_examples(
    "arrowlog dump /data/log/events/0/segments/00000000000000000042.arrow",
    "arrowlog dump events/0/checkpoints/99999999999999999999.json --root s3://bucket/logs",
    "arrowlog dump --topic events --partition 0 --offset 42 --rows 3",
)
def dump(
    session: Session,
    target: str | None,
    topic: str | None,
    partition: int,
    offset: int | None,
    rows: int,
) -> None:
    """Print a segment or a checkpoint like kafka-dump-log: header, writer
    identity, checksum verdict, rows.

    FILE is a local file; KEY an object under --root. Exits with 4 when the
    checksum does not match.
    """
    if target is None:
        if topic is None or offset is None:
            raise click.UsageError("give FILE, KEY, or --topic with --offset")
        log = session.connect()
        target = _segment_key_of(log, topic, partition, offset)
    elif topic is not None:
        raise click.UsageError("give FILE/KEY or --topic, not both")
    key, data = _read_object(session, target)
    if parse_segment_key(key) is not None or key.endswith(".arrow"):
        good = _dump_segment(session, key, data, rows)
    elif (start := parse_checkpoint_key(key)) is not None:
        good = _dump_checkpoint(session, key, data, start)
    else:
        raise InvalidConfigError(
            f"{target}: not a segment (<offset:020d>.arrow) or a checkpoint (<n:020d>.json)"
        )
    if not good:
        raise click.exceptions.Exit(EXIT_CORRUPT)


__all__ = ["dump", "get_offsets"]
