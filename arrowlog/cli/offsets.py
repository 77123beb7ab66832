"""``arrowlog get-offsets`` (kafka-get-offsets --time) and ``arrowlog dump``
(kafka-dump-log: a segment's header, writer identity, checksum verdict and rows;
a commit object's staged batches, their offsets and keys; a staged data
object's rows; a checkpoint's window, index and producer state)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

import arrowlog
from arrowlog.cli._common import isolation_option, partitions_option
from arrowlog.cli.console import iso, parse_time
from arrowlog.errors import CorruptObjectError, CorruptSegmentError, InvalidConfigError
from arrowlog.format.checkpoint import Checkpoint, SegmentSummary
from arrowlog.format.segment import SegmentHeader, decode_segment, read_header
from arrowlog.format.topic import (
    batch_key,
    parse_checkpoint_key,
    parse_segment_key,
    segment_key,
)
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


@dataclasses.dataclass(frozen=True, slots=True)
class _Held:
    """Where the batch holding an offset is: its object's key, its base
    offset, and for a staged batch the key of the commit object naming it."""

    key: str
    base: int
    committed_by: str | None = None


def _held_at(log: arrowlog.ArrowLog, topic: str, partition: int, offset: int) -> _Held:
    part = log.partition(topic, partition)
    obj = part.objects(offset, offset + 1)[0]
    batch = next(b for b in obj.batches() if b.base <= offset < b.end)
    prefix = part.topic.prefix
    if batch.at is None:
        return _Held(segment_key(prefix, partition, obj.base), obj.base)
    key = batch_key(prefix, partition, batch.base, batch.at)
    return _Held(key, batch.base, segment_key(prefix, partition, obj.base))


def _header_rows(header: SegmentHeader, held: _Held | None) -> dict[str, Any]:
    base: int | str = header.base_offset
    last: int | str = header.last_offset
    if header.staged:
        # its offsets are where the commit naming it put it, not in it
        base, last = ("given by the commit that names it",) * 2
        if held is not None:
            base, last = held.base, held.base + header.record_count - 1
    rows: dict[str, Any] = {
        "base_offset": base,
        "last_offset": last,
        "record_count": header.record_count,
        "timestamp": iso(header.timestamp_ms),
        "append_id": header.append_id,
        **dataclasses.asdict(header.identity),
    }
    if header.staged:
        rows["staged"] = True
        if held is not None and held.committed_by is not None:
            rows["committed_by"] = held.committed_by
    if header.refs is not None:
        rows["commits"] = f"{len(header.refs)} staged batch(es), listed under refs"
    return rows


def _ref_rows(key: str, header: SegmentHeader) -> list[dict[str, Any]]:
    """A commit object's staged batches: their offsets (one after another from
    the commit's base) and their objects' keys (beside the commit's
    segments/ folder)."""
    assert header.refs is not None
    home = key[: key.rfind("segments/")] if "segments/" in key else ""
    rows, base = [], header.base_offset
    for ref in header.refs:
        who = ref.identity
        rows.append({
            "base_offset": base, "last_offset": base + ref.record_count - 1,
            "record_count": ref.record_count, "key": home + ref.at, "size": ref.size,
            "timestamp": iso(ref.timestamp_ms), "append_id": ref.append_id,
            "producer_id": who.producer_id, "producer_epoch": who.producer_epoch,
            "base_sequence": who.base_sequence,
        })  # fmt: skip
        base += ref.record_count
    return rows


def _dump_segment(
    session: Session, key: str, data: bytes, rows: int, held: _Held | None = None
) -> bool:
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
        out["header"] = _header_rows(header, held)
        if header.refs is not None:
            out["refs"] = _ref_rows(key, header)
    if batch is not None and header is not None and not header.identity.control and not header.refs:
        shown = batch.slice(0, rows).to_pylist()
        if header.staged and held is None:
            # dumped by its key: which offsets it holds only the commit says
            out["rows"] = [{"row": i, **row} for i, row in enumerate(shown)]
        else:
            base = held.base if header.staged and held is not None else header.base_offset
            out["rows"] = [{"offset": base + i, **row} for i, row in enumerate(shown)]
    _show(session, out)
    return verdict == "ok"


def _dump_checkpoint(session: Session, key: str, data: bytes, start: int) -> bool:
    try:
        cp = Checkpoint.from_json(data, key=key, start=start)
    except CorruptObjectError as e:
        _show(session, {"key": key, "size": len(data), "checksum": f"MISMATCH: {e}"})
        return False
    segments = [_summary_row(s) for s in cp.segments]
    staged = [{"commit": s.base, **_summary_row(b)} for s in cp.segments for b in s.refs]
    out = {
        "key": key,
        "size": len(data),
        "checksum": "ok",
        "header": {"log_start": cp.log_start, "window_start": cp.start, "window_end": cp.end,
                   "segments": len(cp.segments), "staged_batches": len(staged)},
        "rows": segments,
        "producers": [dataclasses.asdict(e) for e in cp.state.producers.values()],
        "open_transactions": [dataclasses.asdict(t) for t in cp.state.open_txns.values()],
    }  # fmt: skip
    if staged:
        # beside the rows: a commit's row holds its batches' count, not them
        out["refs"] = staged
    _show(session, out)
    return True


def _summary_row(s: SegmentSummary) -> dict[str, Any]:
    """A summary as one row: a commit object's batches counted (``refs``)."""
    row = {f.name: getattr(s, f.name) for f in dataclasses.fields(s) if f.name != "refs"}
    if s.refs:
        row["refs"] = len(s.refs)
    return row


def _show(session: Session, out: dict[str, Any]) -> None:
    if session.output == "json":
        session.json(out)
        return
    click.echo(f"Dumping {out['key']} ({out['size']:,} bytes)")
    click.echo(f"checksum: {out['checksum']}")
    for name, value in out.get("header", {}).items():
        click.echo(f"{name}: {value}")
    for section in ("producers", "open_transactions", "refs", "rows"):
        if section in out:
            click.echo(f"{section}:")
            session.table(out[section])


@click.command("dump")
@click.argument("target", required=False, metavar="[FILE|KEY]")
@click.option(
    "--topic",
    help="With --partition and --offset: the segment holding that offset (a staged batch's "
    "object, with the commit naming it).",
)
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
    identity, checksum verdict, rows. A commit object shows the staged
    batches it commits (refs: their offsets and keys); a staged data object
    its rows, with their offsets when found through --offset.

    FILE is a local file; KEY an object under --root. Exits with 4 when the
    checksum does not match.
    """
    if session.output == "csv":
        raise click.UsageError(
            "a dump is header lines and sections of rows, no one table: give --output table or json"
        )
    held = None
    if target is None:
        if topic is None or offset is None:
            raise click.UsageError("give FILE, KEY, or --topic with --offset")
        log = session.connect()
        held = _held_at(log, topic, partition, offset)
        target = held.key
    elif topic is not None:
        raise click.UsageError("give FILE/KEY or --topic, not both")
    key, data = _read_object(session, target)
    if parse_segment_key(key) is not None or key.endswith(".arrow"):
        good = _dump_segment(session, key, data, rows, held)
    elif (start := parse_checkpoint_key(key)) is not None:
        good = _dump_checkpoint(session, key, data, start)
    else:
        raise InvalidConfigError(
            f"{target}: not a segment (<offset:020d>.arrow) or a checkpoint (<n:020d>.json)"
        )
    if not good:
        raise click.exceptions.Exit(EXIT_CORRUPT)


__all__ = ["dump", "get_offsets"]
