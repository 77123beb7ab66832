"""The JVM writer in a real session: executors encode staged data objects and
upload them, the driver commits them in one transaction. Each test checks
that the JVM wrote (the batches are staged objects named by commit objects),
so that a silent fall back to the Python sink fails it; and that what is
written is what the Python sink writes: every row where ``send_keyed`` puts
it, nothing of a failed job visible and nothing it uploaded left behind.
Runs in local-cluster mode too (make test-spark-cluster)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import arrowlog
from arrowlog.producer import key_partitions
from tests.support.spark import with_options
from tests.support.spark_write import committed_ids, fresh_name
from tests.support.stores import StoreSpec

pytestmark = pytest.mark.spark


def local(tmp_path: Path) -> StoreSpec:
    return StoreSpec("local", str(tmp_path / "log"), {"fsync": False})


def two_partitions(spec: StoreSpec) -> tuple[arrowlog.ArrowLog, str]:
    """A connection to ``spec`` and a new topic of two partitions there."""
    log = spec.connect()
    topic = fresh_name()
    log.create_topic(topic, TOPIC_SCHEMA, partitions=2)
    return log, topic


def write(df: Any, spec: StoreSpec, topic: str, **options: str) -> None:
    with_options(
        df.write.format("arrowlog").mode("append"), spec, {"topic": topic, **options}
    ).save()


def staged_batches(log: arrowlog.ArrowLog, topic: str) -> tuple[int, int]:
    """Batches of ``topic`` that are staged objects, and all its data batches."""
    staged = total = 0
    for p in range(log.topic(topic).partitions):
        for s in log.partition(topic, p).summaries():
            if s.control_type is None:
                total += 1
                staged += s.at is not None
    return staged, total


def left_named(log: arrowlog.ArrowLog, topic: str) -> list[str]:
    """The staged objects of ``topic`` that a commit object names. (A task
    that finishes after its job failed may still upload: such an object is
    an orphan no commit names, which vacuum reports.)"""
    named = set()
    for p in range(log.topic(topic).partitions):
        named |= {f"{topic}/{p}/{s.at}" for s in log.partition(topic, p).summaries() if s.at}
    return [i.key for i in log.store.list(f"{topic}/") if "/staged/" in i.key and i.key in named]


def keyed_frame(spark: Any, n: int) -> Any:
    """Rows of every key kind the JVM routes: strings (some null), integers,
    booleans."""
    return spark.range(0, n, 1, 4).selectExpr(
        "id",
        "case when id % 10 = 0 then null else concat('k', id % 13) end as s",
        "cast(id % 5 as int) as i",
        "id % 2 = 0 as b",
    )


COLUMNS: list[tuple[str, pa.DataType]] = [
    ("id", pa.int64()), ("s", pa.string()), ("i", pa.int32()), ("b", pa.bool_()),
]  # fmt: skip
TOPIC_SCHEMA = pa.schema(COLUMNS)


@pytest.mark.parametrize("key", ["s", "id", "i", "b"])
def test_a_keyed_write_puts_each_row_where_send_keyed_puts_it(
    spark: Any, shared_store_spec: StoreSpec, key: str
) -> None:
    """On a local directory executors write the objects; on SeaweedFS they PUT
    them to URLs the driver signs (they have no credentials)."""
    spec = shared_store_spec
    log = spec.connect()
    topic = fresh_name()
    log.create_topic(topic, TOPIC_SCHEMA, partitions=3)
    write(keyed_frame(spark, 2000), spec, topic, keyColumn=key, rowsPerBatch="300")
    staged, total = staged_batches(log, topic)
    assert staged == total > 0, "not written by the JVM writer"
    consumer = log.consumer()
    seen: list[Any] = []
    for p in range(3):
        table = consumer.read(topic, p)
        keys = table.column(key).to_pylist()
        assert key_partitions(keys, 3) == [p] * len(keys)
        seen += table.column("id").to_pylist()
    assert sorted(seen) == list(range(2000))
    # each batch's column statistics reach the log's summaries (readers prune by them)
    for p in range(3):
        for b in log.partition(topic, p).summaries():
            if b.control_type is None:
                part = log.partition(topic, p).read(b.base, b.base + b.record_count)
                ids = [i for i in part.column("id").to_pylist() if isinstance(i, int)]
                assert b.stats is not None and b.stats["id"][:2] == [min(ids), max(ids)]


def test_the_jvm_and_the_python_writer_write_the_same_rows_to_each_partition(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    df = keyed_frame(spark, 1500)
    for topic, writer in (("by_jvm", "jvm"), ("by_python", "python")):
        log.create_topic(topic, TOPIC_SCHEMA, partitions=4)
        write(df, spec, topic, keyColumn="s", writer=writer, rowsPerBatch="200")
    assert staged_batches(log, "by_jvm")[0] > 0 and staged_batches(log, "by_python")[0] == 0
    consumer = log.consumer()
    for p in range(4):
        jvm, python = (consumer.read(t, p) for t in ("by_jvm", "by_python"))
        assert jvm.schema.equals(python.schema)
        assert jvm.sort_by("id").equals(python.sort_by("id"))


def test_a_failed_job_shows_nothing_and_its_driver_commits_no_staged_object(
    spark: Any, shared_store_spec: StoreSpec
) -> None:
    """Task 3 fails on its last rows (every attempt), after the others have
    committed their uploads: the driver aborts, and removes them; no commit
    names any staged object."""
    spec = shared_store_spec
    log, topic = two_partitions(spec)
    df = keyed_frame(spark, 2000).selectExpr(
        "case when id = 1999 then cast(raise_error('boom') as bigint) else id end as id",
        "s", "i", "b",
    )  # fmt: skip
    with pytest.raises(Exception, match="boom"):
        write(df, spec, topic, keyColumn="s", rowsPerBatch="100")
    assert committed_ids(log, topic) == []
    assert log.stable_offsets(topic) == log.end_offsets(topic)
    assert left_named(log, topic) == []


def test_a_null_in_a_not_null_column_fails_the_job_and_commits_nothing(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    topic = fresh_name()
    strict = TOPIC_SCHEMA.set(0, pa.field("id", pa.int64(), nullable=False))
    log.create_topic(topic, strict)
    df = keyed_frame(spark, 500).selectExpr("if(id = 7, null, id) as id", "s", "i", "b")
    with pytest.raises(Exception, match="SchemaMismatchError: column 'id' holds nulls"):
        write(df, spec, topic)
    assert committed_ids(log, topic) == []
    assert left_named(log, topic) == []


def test_rows_that_would_make_a_segment_too_large_are_cut_into_several(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log = spec.connect()
    topic = fresh_name()
    config = arrowlog.TopicConfig(max_batch_bytes=64 * 1024, compression=arrowlog.Compression.NONE)
    log.create_topic(topic, pa.schema(COLUMNS[:2]), config=config)
    df = spark.range(0, 400, 1, 2).selectExpr("id", "repeat('x', 700 + cast(id as int)) as s")
    write(df, spec, topic, rowsPerBatch="100000")
    sizes = [s.size for s in log.partition(topic, 0).summaries()]
    assert len(sizes) > 4 and max(sizes) <= 64 * 1024
    ids = log.consumer().read(topic, 0).column("id").to_pylist()
    assert sorted(i for i in ids if i is not None) == list(range(400))


def test_a_dataframe_the_jvm_does_not_write_goes_to_the_python_sink(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log, topic = two_partitions(spec)
    reordered = keyed_frame(spark, 300).select("s", "id", "b", "i")
    write(reordered, spec, topic, keyColumn="s")
    assert staged_batches(log, topic)[0] == 0
    assert committed_ids(log, topic) == list(range(300))


def test_a_rerun_of_a_committed_version_writes_nothing(spark: Any, tmp_path: Path) -> None:
    spec = local(tmp_path)
    log, topic = two_partitions(spec)
    df = keyed_frame(spark, 300)
    for _ in range(2):
        write(df, spec, topic, keyColumn="s", txnAppId="load", txnVersion="4")
    assert committed_ids(log, topic) == list(range(300))
    assert staged_batches(log, topic)[0] > 0


def test_a_dataframe_read_from_arrowlog_is_written_back_by_its_partition_column(
    spark: Any, tmp_path: Path
) -> None:
    """Its metadata columns drop, and each row goes to the partition it came
    from, as the Python sink writes it back."""
    spec = local(tmp_path)
    log = spec.connect()
    source, copy = fresh_name(), fresh_name()
    for topic in (source, copy):
        log.create_topic(topic, TOPIC_SCHEMA, partitions=3)
    write(keyed_frame(spark, 900), spec, source, keyColumn="s")
    read = spark.read.format("arrowlog").option("topic", source).load(spec.url)
    write(read, spec, copy)
    assert staged_batches(log, copy)[0] > 0, "not written by the JVM writer"
    consumer = log.consumer()
    for p in range(3):
        assert consumer.read(copy, p).sort_by("id").equals(consumer.read(source, p).sort_by("id"))


def test_a_partition_column_outside_the_topic_fails_the_job_and_commits_nothing(
    spark: Any, tmp_path: Path
) -> None:
    spec = local(tmp_path)
    log, topic = two_partitions(spec)
    df = keyed_frame(spark, 100).selectExpr("*", "cast(id % 3 as int) as partition")
    with pytest.raises(
        Exception, match="UnknownTopicOrPartitionError: column partition has value 2"
    ):
        write(df, spec, topic)
    assert committed_ids(log, topic) == []


def test_a_key_that_is_not_utf8_fails_the_jvm_write_as_it_fails_the_python_sink(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's cast(binary as string) makes strings that are not text: Python
    cannot print one as send_keyed hashes it, so neither writer routes it."""
    spec = local(tmp_path)
    log = spec.connect()
    topic = fresh_name()
    log.create_topic(topic, TOPIC_SCHEMA, partitions=3)
    df = keyed_frame(spark, 300).selectExpr(
        "id", "if(id = 150, cast(unhex('C3FF') as string), s) as s", "i", "b"
    )
    with pytest.raises(Exception, match="SchemaMismatchError"):
        write(df, spec, topic, keyColumn="s", writer="python")
    with pytest.raises(Exception, match="SchemaMismatchError: keyColumn 's' has a value that"):
        write(df, spec, topic, keyColumn="s")
    assert committed_ids(log, topic) == []
    assert left_named(log, topic) == []


@pytest.mark.parametrize(
    "column",
    ["if(id = 5, cast(unhex('C3') as string), 'ok') as s",  # a character cut short
     "array('ok', if(id = 5, cast(unhex('A9') as string), null)) as s"],  # inside an array
)  # fmt: skip
def test_a_string_that_is_not_utf8_is_refused_anywhere_in_a_row(
    spark: Any, tmp_path: Path, column: str
) -> None:
    """As the Python sink refuses it: Arrow's utf8 holds text only. (The
    bytes C3 A9 are text together, é, but not cut between two values.)"""
    spec = local(tmp_path)
    log = spec.connect()
    topic = fresh_name()
    df = spark.range(0, 10, 1, 1).selectExpr("id", column)
    kind: pa.DataType = pa.list_(pa.string()) if "array" in column else pa.string()
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("s", kind)])
    log.create_topic(topic, schema)
    with pytest.raises(Exception, match="SchemaMismatchError: column 's' holds a string that"):
        write(df, spec, topic)
    assert committed_ids(log, topic) == []
    assert staged_batches(log, topic) == (0, 0)
    # the same bytes as text in one value are written
    write(spark.range(0, 3, 1, 1).selectExpr("id", column.replace("'C3'", "'C3A9'")
                                             .replace("'A9'", "'C3A9'")), spec, topic)  # fmt: skip
    assert committed_ids(log, topic) == [0, 1, 2]
    assert staged_batches(log, topic)[0] == 1, "not written by the JVM writer"
