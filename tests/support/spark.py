"""Helpers of the Spark tests: the session's master, the readers a batch read runs
through, readers and writers pointed at a test's store, and what the library itself
reads of the same options (the rows every Spark read must return)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import arrowlog
from arrowlog.read.scan import TopicPartition, metadata_names
from arrowlog.read.visibility import IsolationLevel
from arrowlog.spark.options import spark_storage_options
from tests.support.stores import StoreSpec

PUSHDOWN_FLAG = "spark.sql.python.filterPushdown.enabled"

#: the session's master: ``make test-spark-cluster`` runs the read tests with
#: ``local-cluster[2,1,1024]`` (executors in JVMs and Python workers of their own,
#: so that nothing read depends on the driver's process, files or credentials)
MASTER = os.environ.get("ARROWLOG_SPARK_MASTER", "local[2, 3]")  # 3 attempts per task


def absolute_pythonpath() -> None:
    """Spark's Python workers start in the JVM's directory: a relative entry of
    PYTHONPATH (``PYTHONPATH=.`` in a worktree) must not change meaning there."""
    entries = os.environ.get("PYTHONPATH")
    if entries:
        os.environ["PYTHONPATH"] = os.pathsep.join(
            str(Path(e).resolve()) for e in entries.split(os.pathsep) if e
        )


#: the readers of a batch read: the JVM reader (which pushes filters down in any
#: session), the Python source in a default session (no pushdown: it plans every
#: partition and Spark filters the rows) and the Python source with Spark's
#: Python filter pushdown on. Tests using ``every_reader`` run once with each
#: and must see the same rows (and those of :func:`snapshot_rows`)
READERS = (
    ("jvm", "python", "python-pushdown")
    if not os.environ.get("ARROWLOG_SPARK_MIN")
    else ("python", "python-pushdown")
)
#: the readers :func:`reading_through` set, innermost last
_reader: list[str] = []


@contextmanager
def reading_through(reader: str) -> Iterator[None]:
    """Batch reads through :func:`with_options` use ``reader`` (one of
    :data:`READERS`) inside, unless a test names its own."""
    _reader.append(reader)
    try:
        yield
    finally:
        _reader.pop()


@contextmanager
def python_pushdown(spark: Any) -> Iterator[None]:
    """Spark's Python filter pushdown on for the queries run inside."""
    spark.conf.set(PUSHDOWN_FLAG, "true")
    try:
        yield
    finally:
        spark.conf.unset(PUSHDOWN_FLAG)


def reader_option(reader: str) -> str:
    """The ``reader`` option of one of :data:`READERS`."""
    return "python" if reader == "python-pushdown" else reader


def with_options(builder: Any, spec: StoreSpec, options: dict[str, str]) -> Any:
    """A DataFrameReader or DataFrameWriter pointed at ``spec``'s store (its storage
    options as ``storage.*`` options) with ``options`` set (and a batch read's
    ``reader``, under :func:`every_reader`)."""
    from pyspark.sql import DataFrameReader

    if _reader and isinstance(builder, DataFrameReader) and "reader" not in options:
        options = {"reader": reader_option(_reader[-1]), **options}
    builder = builder.option("path", spec.url)
    for key, value in spark_storage_options(spec.options).items():
        builder = builder.option(key, value)
    for key, value in options.items():
        builder = builder.option(key, value)
    return builder


def snapshot_rows(
    log: arrowlog.ArrowLog,
    topics: str | Sequence[str],
    *,
    partitions: Iterable[TopicPartition] | None = None,
    starts: Mapping[TopicPartition, int] | None = None,
    ends: Mapping[TopicPartition, int] | None = None,
    isolation_level: IsolationLevel = "read_committed",
    columns: Sequence[str] | None = None,
    keep: Callable[[dict[str, Any]], bool] | None = None,
) -> list[dict[str, Any]]:
    """What the library's own :meth:`~arrowlog.Consumer.read_snapshot` reads of
    every partition of ``topics`` (or of ``partitions``: an ``assign``), each
    from ``starts`` (else its log start) to ``ends`` (else where the snapshot
    ends), filtered after by ``keep``: the rows any Spark read of the same
    options and filter returns. Each row is a dict of the topic's columns (or
    ``columns``), the metadata columns ``topic``, ``partition`` and ``offset``
    (named as Spark names them) and ``timestamp_ms``."""
    topic_names = [topics] if isinstance(topics, str) else list(topics)
    if partitions is None:
        partitions = [
            (t, p) for t in topic_names for p in range(log.topic(t, refresh=True).partitions)
        ]
    ranges = {tp: ((starts or {}).get(tp), (ends or {}).get(tp)) for tp in partitions}
    consumer = log.consumer(isolation_level=isolation_level)
    snapshot = consumer.read_snapshot(ranges, columns=columns)
    out = []
    for tp, table in snapshot.tables.items():
        names = metadata_names(table.schema)  # as Spark's: `_offset` beside a column `offset`
        # the offsets and append times of the snapshot's rows, in its order
        records = consumer.iter_records(*tp, ranges[tp][0], snapshot.ends[tp], columns=columns)
        where = [(r.offset + i, r.timestamp_ms) for r in records for i in range(r.batch.num_rows)]
        assert len(where) == table.num_rows, tp
        for row, (offset, ms) in zip(table.to_pylist(), where, strict=True):
            row.update({names["topic"]: tp[0], names["partition"]: tp[1]})
            row.update({names["offset"]: offset, "timestamp_ms": ms})
            if keep is None or keep(row):
                out.append(row)
    return out


def sorted_rows(rows: Any, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """``columns`` of ``rows`` (a DataFrame, or :func:`snapshot_rows`' dicts), sorted,
    a NaN as its text (NaN != NaN)."""
    if not isinstance(rows, list):
        rows = [r.asDict(recursive=True) for r in rows.select(*columns).collect()]

    def comparable(v: Any) -> Any:
        return repr(v) if isinstance(v, float) and v != v else v

    return sorted((tuple(comparable(r[c]) for c in columns) for r in rows), key=repr)
