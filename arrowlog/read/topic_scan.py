"""A topic's committed rows for any Arrow engine: :class:`TopicScan`.

``log.scan("events")`` plans the read of every partition as one read_committed
snapshot (a transaction's records are in it everywhere or nowhere), with the
planner the Spark source uses (:func:`arrowlog.read.scan.plan_scan`). The scan
then hands its rows to whoever asks, as often as asked, always the same rows:
as an Arrow C stream (``__arrow_c_stream__``: DuckDB, Polars, pyarrow, and any
engine of the Arrow PyCapsule interface), a ``RecordBatchReader``, a table, a
pandas DataFrame, or a Polars LazyFrame that pushes its projection and
predicate into the scan (:meth:`TopicScan.to_polars`).
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from arrowlog.errors import (
    InvalidConfigError,
    SegmentNotFoundError,
    UnknownColumnError,
    UnknownTopicOrPartitionError,
)
from arrowlog.format.stats import Predicate, check_predicates
from arrowlog.partition import projected
from arrowlog.read.filters import Filter, ScanFilter, field_names, scan_filter
from arrowlog.read.scan import (
    METADATA_COLUMNS,
    ScanPlan,
    ScanTask,
    metadata_names,
    output_schema,
    plan_scan,
    read_task,
)
from arrowlog.read.visibility import IsolationLevel, check_isolation_level
from arrowlog.txn.view import LogView

if TYPE_CHECKING:
    import pandas
    import polars

#: the metadata columns a scan can add, in this order
METADATA = ("partition", "offset", "timestamp")
#: bytes per task: small enough for several to be read at once
TASK_BYTES = 32 * 1024 * 1024
#: tasks read at once (each is fetched segment after segment)
READ_THREADS = 4

Offsets = int | Mapping[int, int]
Time = datetime.datetime | int


class TopicScan:
    """The rows of one topic as of one snapshot, taken when the scan is made.

    Use :meth:`ArrowLog.scan <arrowlog.ArrowLog.scan>` to make one.
    """

    def __init__(
        self,
        log: LogView,
        topic: str,
        *,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
        metadata: bool = False,
        partitions: Iterable[int] | None = None,
        start: Offsets | None = None,
        end: Offsets | None = None,
        start_time: Time | None = None,
        end_time: Time | None = None,
        isolation_level: IsolationLevel = "read_committed",
        plan_hints: Sequence[Predicate] = (),
    ) -> None:
        self.isolation_level: IsolationLevel = check_isolation_level(isolation_level)
        self._log = log
        self.topic = topic
        described = log.topic(topic)
        names = metadata_names(described.schema)
        full = output_schema(described.schema)  # topic columns, topic, partition, offset, ...
        self._metadata = full
        readable = pa.schema([f for f in full if f.name != names["topic"]])
        #: the columns of this scan's rows, in order
        self.schema = _output(readable, described.schema, names, columns, metadata)
        self._filter = scan_filter(filter, readable)
        self._names = names
        self._columns = _topic_columns(described.schema, self.schema, self._filter, filter)
        numbers = None if partitions is None else _partitions(partitions)
        every = range(described.partitions)
        wanted = set(every if numbers is None else numbers)
        named = set(wanted)
        for given in (start, end):
            if isinstance(given, Mapping):
                keys = {k for k in given if isinstance(k, int)}
                if numbers is not None and keys - numbers:
                    raise InvalidConfigError(
                        f"an offset for partition {min(keys - numbers)}, which the scan "
                        f"does not read (partitions={sorted(numbers)})"
                    )
                named |= keys
        missing = sorted(p for p in named if p not in every)
        if missing:
            raise UnknownTopicOrPartitionError(
                f"topic {topic!r} has partitions 0..{described.partitions - 1}, not {missing[0]}"
            )
        pushed = _Pushed([*self._filter.conjuncts, *plan_hints], names, described.schema)
        times = (_ms(start_time, "start_time"), _ms(end_time, "end_time"))
        count = described.partitions
        while True:
            wanted = set(range(count) if numbers is None else numbers)
            self.plan: ScanPlan = _plan(
                log, topic, wanted, start, end, times, pushed, isolation_level
            )
            if numbers is not None:
                break
            # every partition: one added while planning may hold part of a
            # transaction the snapshot shows committed, so plan again with it
            now = log.topic(topic, refresh=True).partitions
            if now == count:
                break
            count = now

    @property
    def ranges(self) -> dict[int, tuple[int, int]]:
        """Each partition read, with the offsets ``[start, end)`` of its range
        (where a later read continues: ``start=scan.ends``)."""
        return {r.partition: (r.start, r.end) for r in self.plan.ranges}

    @property
    def ends(self) -> dict[int, int]:
        """Where each partition's range ended."""
        return {r.partition: r.end for r in self.plan.ranges}

    def to_batches(self) -> Iterator[pa.RecordBatch]:
        """The rows, partition by partition in offset order, as batches of
        :attr:`schema`; several tasks are fetched at once."""
        tasks = self.plan.tasks
        if not tasks:
            return
        with ThreadPoolExecutor(min(READ_THREADS, len(tasks))) as pool:
            pending: list[Future[list[pa.RecordBatch]]] = []
            queued = iter(tasks)
            for task in itertools.islice(queued, READ_THREADS):
                pending.append(pool.submit(self._read, task))
            while pending:
                done = pending.pop(0).result()
                nxt = next(queued, None)
                if nxt is not None:
                    pending.append(pool.submit(self._read, nxt))
                yield from done

    def _read(self, task: ScanTask) -> list[pa.RecordBatch]:
        # the metadata columns by this scan's names: those of the projection
        # alone would differ where a column left out of it clashes
        topic = projected(task.schema or pa.schema([]), self._columns)
        read = pa.schema(
            [*topic, *(self._metadata.field(self._names[m]) for m in METADATA_COLUMNS)]
        )
        out = []
        try:
            for batch in read_task(self._log.store, task, read, self._columns):
                batch = batch.drop_columns([self._names["topic"]])
                kept = self._filter.apply(batch)
                if kept.num_rows:
                    out.append(kept.select(self.schema.names))
        except SegmentNotFoundError as e:
            raise SegmentNotFoundError(
                f"{e}. Records of this scan's snapshot were removed since it was made "
                "(deleted and vacuumed, or the topic deleted): make the scan again",
                key=e.key,
            ) from None
        return out

    def to_reader(self) -> pa.RecordBatchReader:
        """The rows as a stream: read as it is consumed."""
        return pa.RecordBatchReader.from_batches(self.schema, self.to_batches())

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule interface: DuckDB (``duckdb.sql("select * from
        scan")``), ``polars.from_arrow``, ``pyarrow.table`` and others read the
        scan's rows through it."""
        reader: Any = self.to_reader()  # the stubs do not type the PyCapsule methods
        return reader.__arrow_c_stream__(requested_schema)

    def to_table(self) -> pa.Table:
        """The rows as one table."""
        return pa.Table.from_batches(list(self.to_batches()), self.schema)

    def to_pandas(self, **kwargs: Any) -> pandas.DataFrame:
        """The rows as a pandas DataFrame (``kwargs``: ``pa.Table.to_pandas``'s)."""
        return self.to_table().to_pandas(**kwargs)

    def to_polars(self) -> polars.LazyFrame:
        """A Polars LazyFrame of the rows: its projection and predicate are
        handed to a scan made for them (Polars' IO plugin API), so columns
        no query uses are not fetched and segments no row of which matches
        are not read.

        Raises:
            MissingDependencyError: polars is not installed.
        """
        from arrowlog.read.polars import lazy_frame

        return lazy_frame(self)

    def narrowed(
        self, columns: Sequence[str] | None, hints: Sequence[Predicate] | None
    ) -> TopicScan:
        """This scan's ranges, with ``columns`` of its schema, planned again
        to read less: the same snapshot's rows. ``hints`` (filter tuples an
        engine spelled its predicate's conjuncts as) only leave out what the
        plan proves none of their rows are in; the engine filters the rows
        by its own predicate, whose semantics may differ from pyarrow's (in
        Polars NaN is above every number, a float literal takes a float32
        column's type)."""
        return TopicScan(
            self._log,
            self.topic,
            columns=list(self.schema.names) if columns is None else columns,
            filter=self._filter.exact,
            partitions=self.ranges,
            start={p: s for p, (s, _) in self.ranges.items()},
            end=self.ends,
            isolation_level=self.isolation_level,
            plan_hints=hints or (),
        )

    def __repr__(self) -> str:
        rows = sum(t.rows for t in self.plan.tasks)
        return (
            f"TopicScan({self.topic!r}, partitions={len(self.plan.ranges)}, "
            f"records<={rows}, columns={self.schema.names})"
        )


def _output(
    readable: pa.Schema,
    topic_schema: pa.Schema,
    names: Mapping[str, str],
    columns: Sequence[str] | None,
    metadata: bool,
) -> pa.Schema:
    if columns is None:
        extra = [names[m] for m in METADATA] if metadata else []
        return pa.schema([*topic_schema, *(readable.field(n) for n in extra)])
    if isinstance(columns, str):
        raise InvalidConfigError(f"columns: a list of names, not the string {columns!r}")
    missing = [c for c in columns if c not in readable.names]
    if missing:
        raise UnknownColumnError(
            f"no column {missing[0]!r}: the topic has {topic_schema.names}, and the "
            f"scan adds {[names[m] for m in METADATA]}"
        )
    if len(set(columns)) != len(columns):
        raise InvalidConfigError(f"columns: a name given twice in {list(columns)}")
    wanted = list(columns)
    if metadata:
        wanted += [names[m] for m in METADATA if names[m] not in wanted]
    return pa.schema([readable.field(n) for n in wanted])


def _topic_columns(
    topic_schema: pa.Schema, out: pa.Schema, scan: ScanFilter, given: Filter | None
) -> list[str] | None:
    """The topic's columns to fetch: those of the output and of the filter
    (all of them when the filter's columns are not known)."""
    wanted = {n for n in out.names if n in topic_schema.names}
    if scan.exact is not None:
        fields = field_names(given)
        if fields is None:
            return None
        wanted |= fields & set(topic_schema.names)
    if wanted == set(topic_schema.names):
        return None
    if not wanted:
        # a segment is read by its columns: one of them gives the rows' count
        return topic_schema.names[:1]
    return [n for n in topic_schema.names if n in wanted]


def _plan(
    log: LogView,
    topic: str,
    wanted: set[int],
    start: Offsets | None,
    end: Offsets | None,
    times: tuple[int | None, int | None],
    pushed: _Pushed,
    isolation_level: IsolationLevel,
) -> ScanPlan:
    """The plan of the scan of ``wanted`` partitions."""
    keep = None if pushed.partitions is None else wanted & pushed.partitions
    return plan_scan(
        log,
        [topic],
        starting=_offsets(topic, start, "start", wanted),
        ending=_offsets(topic, end, "end", wanted),
        starting_timestamp=times[0],
        ending_timestamp=times[1],
        isolation_level=isolation_level,
        partitions={(topic, p) for p in wanted},
        keep_partitions=None if keep is None else {(topic, p) for p in keep},
        min_offset=pushed.min_offset,
        max_offset=pushed.max_offset,
        min_timestamp_us=pushed.min_timestamp_us,
        max_timestamp_us=pushed.max_timestamp_us,
        target_bytes=TASK_BYTES,
        where=pushed.where or None,
    )


def _partitions(given: Iterable[int]) -> set[int]:
    if isinstance(given, (str, bytes)):
        raise InvalidConfigError(f"partitions: numbers, not {given!r}")
    out = set()
    for p in given:
        if isinstance(p, bool) or not isinstance(p, int) or p < 0:
            raise InvalidConfigError(f"partitions: each a number >= 0, got {p!r}")
        out.add(p)
    return out


def _offsets(topic: str, value: Offsets | None, name: str, wanted: set[int]) -> Any:
    """plan_scan's offsets: "earliest"/"latest", or one per partition."""
    if value is None:
        return "earliest" if name == "start" else "latest"
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [(p, value) for p in sorted(wanted)]
    else:
        raise InvalidConfigError(
            f"{name}: an offset, or a mapping of partition to offset, not {value!r}"
        )
    out = {}
    for p, offset in items:
        if isinstance(p, bool) or not isinstance(p, int) or p < 0:
            raise InvalidConfigError(f"{name}: partition numbers >= 0, got {p!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidConfigError(f"{name}: offsets >= 0, got {offset!r} for partition {p}")
        out[(topic, p)] = offset
    return out


def _ms(value: Time | None, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            raise InvalidConfigError(
                f"{name}: a datetime with a time zone (datetime.timezone.utc), not a naive one"
            )
        return int(value.timestamp() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidConfigError(f"{name}: a datetime or milliseconds since the epoch")
    return value


class _Pushed:
    """What the plan can use of a filter's conjuncts."""

    def __init__(
        self, conjuncts: Sequence[Predicate], names: Mapping[str, str], schema: pa.Schema
    ) -> None:
        self.partitions: set[int] | None = None
        self.min_offset: int | None = None
        self.max_offset: int | None = None
        self.min_timestamp_us: int | None = None
        self.max_timestamp_us: int | None = None
        self.where: list[Predicate] = []
        for column, op, value in conjuncts:
            if column == names["partition"]:
                self._partition(op, value)
            elif column == names["offset"]:
                self._offset(op, value)
            elif column == names["timestamp"]:
                self._timestamp(op, value)
            elif column in schema.names:
                try:
                    self.where += check_predicates(schema, [(column, op, value)])
                except (InvalidConfigError, UnknownColumnError):
                    continue  # the rows are filtered all the same

    def _partition(self, op: str, value: Any) -> None:
        if op in ("==", "=") and _integer(value):
            found = {value}
        elif op == "in" and all(_integer(v) for v in value):
            found = set(value)
        else:
            return
        self.partitions = found if self.partitions is None else self.partitions & found

    def _offset(self, op: str, value: Any) -> None:
        low, high = _bounds(op, value)
        if low is not None:
            self.min_offset = low if self.min_offset is None else max(self.min_offset, low)
        if high is not None:
            self.max_offset = high if self.max_offset is None else min(self.max_offset, high)

    def _timestamp(self, op: str, value: Any) -> None:
        if not isinstance(value, datetime.datetime) or value.tzinfo is None:
            return
        us = _micros(value)
        low, high = _bounds(op, us)
        if low is not None:
            self.min_timestamp_us = (
                low if self.min_timestamp_us is None else max(self.min_timestamp_us, low)
            )
        if high is not None:
            self.max_timestamp_us = (
                high if self.max_timestamp_us is None else min(self.max_timestamp_us, high)
            )


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _bounds(op: str, value: Any) -> tuple[int | None, int | None]:
    """Inclusive integer bounds ``op value`` implies."""
    if not _integer(value):
        return None, None
    return {
        "==": (value, value),
        "=": (value, value),
        ">": (value + 1, None),
        ">=": (value, None),
        "<": (None, value - 1),
        "<=": (None, value),
    }.get(op, (None, None))


def _micros(value: datetime.datetime) -> int:
    delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
