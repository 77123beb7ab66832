"""What the table exports (Delta, Iceberg) share: the next committed range of a
topic after the offsets the previous export recorded, and reading it.

An export records, in the same table commit as its rows, the offsets where it
ended. The next export starts there and ends at the ends of one read_committed
snapshot of the topic (:func:`arrowlog.consumer.snapshot_ends`): a transaction
committing meanwhile is in that export whole, or in the next one whole; asking
each partition's LSO in turn could cut it in two. The table commit is the only
point at which a range counts as exported, so a crash anywhere before it leaves
the recorded offsets as they were, and the rerun reads the same range again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from arrowlog.consumer import snapshot_ends
from arrowlog.errors import CorruptObjectError
from arrowlog.log import ArrowLog
from arrowlog.scan import EARLIEST, output_schema, plan_scan, read_task

#: The key under which an export records its end offsets, as JSON
#: ``{"<partition>": <next offset>}``.
OFFSETS_KEY = "arrowlog.offsets"


@dataclass(frozen=True)
class ExportRange:
    """Offsets ``[starting, ending)`` of every partition of ``topic`` to export
    next. A partition missing from the recorded offsets starts at -2 (its log
    start, resolved when the range is read)."""

    topic: str
    starting: dict[int, int]
    ending: dict[int, int]
    #: the offsets the previous export recorded (partition as a string)
    recorded: dict[str, int]

    @property
    def nothing_new(self) -> bool:
        """True when every partition's recorded offset is already its end."""
        return all(self.recorded.get(str(p)) == end for p, end in self.ending.items())

    def starting_json(self) -> dict[str, int]:
        return {str(p): o for p, o in sorted(self.starting.items())}

    def ending_json(self) -> dict[str, int]:
        """The offsets to record once this range is exported."""
        return {str(p): o for p, o in sorted(self.ending.items())}


def next_range(log: ArrowLog, topic: str, recorded: Mapping[str, int]) -> ExportRange:
    """The range to export after ``recorded`` (the previous export's end
    offsets): up to the ends of one read_committed snapshot of the topic.

    Raises:
        UnknownTopicOrPartitionError: no such topic.
    """
    exported = {int(p): int(o) for p, o in recorded.items()}
    ending = snapshot_ends(log, topic, exported)
    starting = {p: exported.get(p, EARLIEST) for p in ending}
    return ExportRange(topic, starting, ending, {str(p): o for p, o in exported.items()})


def parse_recorded(text: str, where: str) -> dict[str, int]:
    """Recorded offsets read back from a table (``{"0": 42, ...}``).

    Raises:
        CorruptObjectError: not such a JSON object.
    """
    try:
        value = json.loads(text)
        if not isinstance(value, dict):
            raise ValueError("not an object")
        out = {str(int(p)): int(o) for p, o in value.items()}
    except (ValueError, TypeError) as e:
        raise CorruptObjectError(f"recorded offsets {text!r} are not valid ({e})", key=where) from e
    if any(o < 0 for o in out.values()):
        raise CorruptObjectError(f"recorded offsets {text!r} are not valid", key=where)
    return out


def read_range_batches(
    log: ArrowLog,
    span: ExportRange,
    schema: pa.Schema | None = None,
    progress: Callable[[int], None] | None = None,
) -> Iterator[pa.RecordBatch]:
    """The records of ``span`` under read_committed, with the ``topic``,
    ``partition``, ``offset`` and ``timestamp`` columns the Spark source gives,
    as batches of ``schema`` (default: :func:`arrowlog.scan.output_schema`).
    Planned by the planner the Spark source uses, read here without Spark.
    ``progress`` is called with the offsets of each task read.

    Raises:
        OffsetOutOfRangeError: a recorded offset lies below the log start now
            (records were deleted before they were exported).
    """
    plan = plan_scan(
        log,
        [span.topic],
        starting={(span.topic, p): o for p, o in span.starting.items()},
        ending={(span.topic, p): o for p, o in span.ending.items()},
        isolation_level="read_committed",
    )
    out = schema or output_schema(log.topic(span.topic).schema)
    for task in plan.tasks:
        yield from read_task(log.store, task, out)
        if progress is not None:
            progress(sum(s.hi - s.lo for s in task.segments))


def spark_reader(spark: Any, root: str, span: ExportRange, storage: Mapping[str, Any]) -> Any:
    """``span`` as a Spark DataFrame (``format("arrowlog")``, read_committed)."""
    # imported here: arrowlog.spark needs the spark extra, the Iceberg export does not
    from arrowlog.spark.options import spark_storage_options

    reader = (
        spark.read.format("arrowlog")
        .option("topic", span.topic)
        .option("startingOffsets", json.dumps({span.topic: span.starting_json()}))
        .option("endingOffsets", json.dumps({span.topic: span.ending_json()}))
        .option("isolationLevel", "read_committed")
    )
    for key, value in spark_storage_options(dict(storage)).items():
        reader = reader.option(key, value)
    return reader.load(root)
