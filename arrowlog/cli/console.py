"""``arrowlog produce`` and ``arrowlog consume``: kafka-console-producer and
kafka-console-consumer for a columnar log."""

from __future__ import annotations

import io
import json
import time
from datetime import datetime, timezone
from typing import Any, TextIO

import click
import pyarrow as pa

import arrowlog
from arrowlog.cli._common import isolation_option
from arrowlog.errors import InvalidConfigError, OffsetOutOfRangeError
from arrowlog.format.topic import Topic
from arrowlog.jobs.commandline import (
    EXIT_INTERRUPTED,
    Session,
    json_default,
    leaf,
    with_examples,
    write_csv,
)
from arrowlog.read.consumer import Records
from arrowlog.txn.coordinator import check_id

# --- produce ------------------------------------------------------------------------


def _read_json_lines(text: TextIO, schema: pa.Schema) -> pa.Table:
    names = set(schema.names)
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as e:
            hint = ""
            if number == 1 and "," in line and not line.lstrip().startswith(("{", "[")):
                hint = " (CSV? say --format csv: only a file named *.csv is taken for one)"
            raise InvalidConfigError(f"line {number}: not JSON: {e}{hint}") from None
        if not isinstance(row, dict):
            raise InvalidConfigError(f"line {number}: expected a JSON object, got {line.strip()!r}")
        unknown = sorted(set(row) - names)
        if unknown:
            raise InvalidConfigError(
                f"line {number}: unknown field(s) {unknown}; the topic has {schema.names}"
            )
        rows.append(row)
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as e:
        raise InvalidConfigError(f"the input does not fit the topic's schema: {e}") from None


def _read_csv(data: bytes, schema: pa.Schema) -> pa.Table:
    import pyarrow.csv as pcsv

    types = {f.name: f.type for f in schema}
    try:
        table = pcsv.read_csv(
            io.BytesIO(data), convert_options=pcsv.ConvertOptions(column_types=types)
        )
    except pa.ArrowInvalid as e:
        raise InvalidConfigError(f"the CSV input does not fit the topic's schema: {e}") from None
    missing = [n for n in schema.names if n not in table.column_names]
    extra = [n for n in table.column_names if n not in types]
    if missing or extra:
        raise InvalidConfigError(
            f"CSV header: missing column(s) {missing}, unknown column(s) {extra}"
        )
    return table.select(schema.names).cast(schema)


def _input_table(source: str, fmt: str | None, schema: pa.Schema) -> pa.Table:
    if fmt is None:
        fmt = "csv" if source.lower().endswith(".csv") else "jsonl"
    stream = click.open_file(source, "rb")
    with stream:
        data = stream.read()
    if fmt == "csv":
        return _read_csv(data, schema)
    return _read_json_lines(io.StringIO(data.decode("utf-8")), schema)


@click.command("produce")
@click.argument("topic")
@click.option(
    "--input",
    "source",
    default="-",
    show_default=True,
    metavar="FILE",
    help="JSON lines or CSV; '-' reads stdin.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["jsonl", "csv"]),
    help="Default: by file suffix, else jsonl.",
)
@click.option(
    "--partition", type=click.IntRange(min=0), help="Send every record to this partition."
)
@click.option(
    "--key",
    metavar="COLUMN",
    help="Route each record by this column: CRC32C of the value's text modulo the partition count.",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Records per segment.",
)
@leaf(read_only=False)
@with_examples(
    'echo \'{"id": 1, "name": "a"}\' | arrowlog produce events --partition 0',
    "arrowlog produce events --input rows.csv --key id",
    "arrowlog produce events --input rows.jsonl --output json",
)
def produce(
    session: Session,
    topic: str,
    source: str,
    fmt: str | None,
    partition: int | None,
    key: str | None,
    batch_size: int,
) -> None:
    """Append records read from JSON lines or CSV to TOPIC.

    The whole input is read and checked against the topic's schema before the
    first record is sent: bad input writes nothing. Without --partition or
    --key, each batch goes to the next partition in turn. For large files use
    `arrowlog load` (restartable, with expected offsets).
    """
    if partition is not None and key is not None:
        raise click.UsageError("give --partition or --key, not both")
    log = session.connect()
    described = log.topic(topic)
    if partition is not None:
        described.check_partition(partition)
    if key is not None and key not in described.schema.names:
        raise InvalidConfigError(
            f"--key {key!r} is not a column of {topic}: {described.schema.names}"
        )
    table = _input_table(source, fmt, described.schema)
    if table.num_rows == 0:
        raise InvalidConfigError("no records in the input")
    batches = table.to_batches(max_chunksize=batch_size)
    checker = log.partition(topic, partition or 0)
    for batch in batches:
        checker.prepare_batch(batch)  # every batch is checked before the first is sent
    producer = log.producer()
    results: list[arrowlog.AppendResult] = []
    for batch in batches:
        if key is not None:
            results.extend(producer.send_keyed(topic, batch, key=key))
        else:
            results.append(producer.send(topic, batch, partition=partition))
    session.table(
        [
            {
                "topic": r.topic,
                "partition": r.partition,
                "base_offset": r.base_offset,
                "records": r.record_count,
            }
            for r in results
        ]
    )
    session.message(f"produced {table.num_rows:,} record(s) to {topic}")


# --- consume ------------------------------------------------------------------------


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from an int or an ISO 8601 date-time (UTC
    unless it names a zone)."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        moment = datetime.fromisoformat(stripped.replace("Z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither milliseconds nor an ISO date-time like 2026-11-22T08:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return int(moment.timestamp() * 1000)


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds")


def position_names(columns: list[str]) -> tuple[str, str, str]:
    """The names of a record's partition, offset and timestamp beside a topic's
    ``columns``: a topic column of the same name keeps it, ours takes an
    ``arrowlog_`` prefix (again, while that clashes too)."""
    taken = set(columns)
    out = []
    for name in ("partition", "offset", "timestamp"):
        while name in taken:
            name = f"arrowlog_{name}"
        out.append(name)
    return out[0], out[1], out[2]


class _Sink:
    """Where consumed records go: lines (table), JSON lines, CSV, or a Parquet file."""

    def __init__(self, session: Session, topic: Topic, parquet: str | None) -> None:
        # A path given, the records go to a Parquet file instead of stdout.
        self._json = session.output == "json"
        self._csv = session.output == "csv"
        self._topic = topic
        self._parquet_path = parquet
        self._writer: Any = None
        self._header_done = False
        self._positions = position_names(topic.schema.names)
        self.count = 0

    def write(self, partition: int, records: Records) -> None:
        self.count += records.batch.num_rows
        if self._parquet_path is not None:
            self._write_parquet(partition, records)
            return
        stamp = iso(records.timestamp_ms)
        if self._csv:
            self._write_csv(partition, records, stamp)
            return
        lines = []
        for i, row in enumerate(records.batch.to_pylist()):
            offset = records.offset + i
            if self._json:
                lines.append(json.dumps(
                    {"topic": self._topic.name, "partition": partition, "offset": offset,
                     "timestamp": stamp, "value": row},
                    default=json_default,
                ))  # fmt: skip
            else:
                value = json.dumps(row, default=json_default)
                lines.append(f"{partition}\t{offset}\t{stamp}\t{value}")
        if not self._json and not self._header_done:
            click.echo("PARTITION\tOFFSET\tTIMESTAMP\tVALUE")
            self._header_done = True
        click.echo("\n".join(lines))

    def _write_csv(self, partition: int, records: Records, stamp: str) -> None:
        """partition, offset, timestamp and the topic's columns, one line a
        record (nested values as JSON); the header once."""
        at_partition, at_offset, at_time = self._positions
        rows = [
            {at_partition: partition, at_offset: records.offset + i, at_time: stamp, **row}
            for i, row in enumerate(records.batch.to_pylist())
        ]
        write_csv(rows, header=not self._header_done, columns=self._csv_columns())
        self._header_done = True

    def _csv_columns(self) -> list[str]:
        return [*self._positions, *self._topic.schema.names]

    def _write_parquet(self, partition: int, records: Records) -> None:
        import pyarrow.parquet as pq

        batch = records.batch
        n = batch.num_rows
        extra: list[pa.Array[Any]] = [
            pa.array([partition] * n, pa.int32()),
            pa.array(range(records.offset, records.offset + n), pa.int64()),
            pa.array([records.timestamp_ms] * n, pa.timestamp("ms", tz="UTC")),
        ]
        table = pa.Table.from_batches([batch])
        for name, column in zip(self._positions, extra, strict=True):
            table = table.append_column(name, column)
        if self._writer is None:
            self._writer = pq.ParquetWriter(str(self._parquet_path), table.schema)
        self._writer.write_table(table)

    def close(self) -> None:
        if self._csv and not self._header_done:  # no record: the columns still
            write_csv([], columns=self._csv_columns())
            self._header_done = True
        if self._writer is not None:
            self._writer.close()
        elif self._parquet_path is not None:
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_batches([], self._topic.schema), self._parquet_path)


def _start_offsets(
    log: arrowlog.ArrowLog,
    consumer: arrowlog.Consumer,
    topic: str,
    partitions: list[int],
    offset: str,
    from_time: str | None,
) -> dict[int, int]:
    if from_time is not None:
        at = parse_time(from_time)
        return {p: consumer.offset_for_time(topic, p, at) for p in partitions}
    if offset == "earliest":
        return {p: log.partition(topic, p).start_offset() for p in partitions}
    if offset == "latest":
        return {p: consumer.end_offset(topic, p) for p in partitions}
    if not offset.isdigit():
        raise click.BadParameter(
            f"--offset takes earliest, latest or an offset >= 0, not {offset!r}"
        )
    return {partitions[0]: int(offset)}


def _commit(
    consumer: arrowlog.Consumer, topic: str, positions: dict[int, int], committed: dict[int, int]
) -> None:
    """Commit the positions that moved since the last commit (after the
    records were written out: a crash reads them again, never skips them)."""
    moved = {p: at for p, at in positions.items() if committed.get(p) != at}
    if moved:
        consumer.commit({(topic, p): at for p, at in moved.items()})
        committed.update(moved)


def _poll(
    consumer: arrowlog.Consumer,
    topic: str,
    positions: dict[int, int],
    sink: _Sink,
    left: int | None,
) -> int:
    """Read every partition from its position to where reading ends now; returns
    the records read (never more than ``left``)."""
    got = 0
    for p, position in positions.items():
        if left is not None and got >= left:
            break
        end = consumer.end_offset(topic, p)
        if position >= end:
            continue
        want = None if left is None else left - got
        reached = position
        for records in consumer.iter_records(topic, p, position, end, max_records=want):
            sink.write(p, records)
            got += records.batch.num_rows
            reached = records.offset + records.batch.num_rows
        stopped_by_limit = left is not None and got >= left
        # a full read moves past trailing control records and aborted batches too
        positions[p] = reached if stopped_by_limit else end
    return got


@click.command("consume")
@click.argument("topic")
@click.option("--partition", type=click.IntRange(min=0), help="One partition (default: all).")
@click.option(
    "--offset",
    default="earliest",
    show_default=True,
    metavar="earliest|latest|N",
    help="Where to start; N needs --partition.",
)
@click.option("--from-beginning", is_flag=True, help="Same as --offset earliest (the default).")
@click.option(
    "--from-time",
    metavar="TIME",
    help="Start at the first record appended at or after TIME (ISO or ms).",
)
@click.option(
    "--max-records", type=click.IntRange(min=1), help="Stop after this many; reads no further."
)
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new records.")
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    help="With --follow: stop once no record came for this long.",
)
@click.option(
    "--poll-ms",
    type=click.IntRange(min=10),
    default=500,
    show_default=True,
    help="With --follow: pause between polls.",
)
@isolation_option("read_committed")
@click.option(
    "--to-parquet", metavar="FILE", help="Write the records (and their offsets) to a Parquet file."
)
@click.option(
    "--group",
    metavar="GROUP",
    help="Start at GROUP's committed offsets (--offset earliest|latest where it has none) "
    "and commit the offsets read after each poll, as kafka-console-consumer --group.",
)
@leaf(read_only=lambda args: args["group"] is None)  # a group's reader commits
@with_examples(
    "arrowlog consume events --max-records 10",
    "arrowlog consume events --group etl --follow   # resumes where etl left off",
    "arrowlog consume events --partition 0 --offset 42 --output json | head",
    "arrowlog consume events --from-time 2026-11-22T08:00:00Z --to-parquet out.parquet",
    "arrowlog consume events --follow --timeout-ms 10000",
)
def consume(
    session: Session,
    topic: str,
    partition: int | None,
    offset: str,
    from_beginning: bool,
    from_time: str | None,
    max_records: int | None,
    follow: bool,
    timeout_ms: int | None,
    poll_ms: int,
    isolation_level: str,
    to_parquet: str | None,
    group: str | None,
) -> None:
    """Print the records of TOPIC with their real offsets and append times.

    Offsets are the log's own: records of aborted transactions and transaction
    markers leave gaps. Under read_committed (the default) reading ends at the
    last stable offset. Output: tab-separated lines (partition, offset,
    timestamp, the record as JSON), JSON lines with --output json, or a Parquet
    file with --to-parquet.
    """
    if from_beginning:
        offset = "earliest"
    if offset.isdigit() and partition is None:
        raise click.UsageError("--offset N needs --partition")
    if timeout_ms is not None and not follow:
        raise click.UsageError("--timeout-ms goes with --follow")
    if group is not None and (offset.isdigit() or from_time is not None):
        raise click.UsageError(
            "with --group, reading starts at the group's offsets: move them with "
            "`arrowlog groups reset-offsets` (--offset earliest|latest applies where it has none)"
        )
    if group is not None:
        check_id("group id", group)
    log = session.connect()
    described = log.topic(topic)
    partitions = (
        [described.check_partition(partition)]
        if partition is not None
        else list(range(described.partitions))
    )
    consumer = log.consumer(group_id=group, isolation_level=isolation_level)  # type: ignore[arg-type]
    positions = _start_offsets(log, consumer, topic, partitions, offset, from_time)
    committed: dict[int, int] = {}
    if group is not None:
        for p in partitions:
            at = consumer.committed(topic, p)
            if at is not None:
                positions[p] = at
        # what counts as committed: a partition never read is not given an offset
        committed = dict(positions)
    for p, position in positions.items():
        part = log.partition(topic, p)
        start, end = part.start_offset(), part.end_offset()
        if not start <= position <= end:
            raise OffsetOutOfRangeError(
                f"{topic}/{p}: offset {position} is outside the log [{start}, {end}]"
            )
    sink = _Sink(session, described, to_parquet)
    try:
        left = max_records
        quiet_since = time.monotonic()
        while True:
            got = _poll(consumer, topic, positions, sink, left)
            if group is not None and to_parquet is None:  # the lines are out: commit
                _commit(consumer, topic, positions, committed)
            if left is not None:
                left -= got
            if not follow or left == 0:
                break
            if got:
                quiet_since = time.monotonic()
            elif timeout_ms is not None and (time.monotonic() - quiet_since) * 1000 >= timeout_ms:
                break
            time.sleep(poll_ms / 1000)
    except KeyboardInterrupt:
        sink.close()
        click.echo(f"Processed a total of {sink.count} records", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    sink.close()
    if group is not None:  # a Parquet file is whole only once closed
        _commit(consumer, topic, positions, committed)
    click.echo(f"Processed a total of {sink.count} records", err=True)
