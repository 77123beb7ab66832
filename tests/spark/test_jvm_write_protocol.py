"""The JVM writer's driver steps as its planner answers them, without a Spark
session: executors' uploads are staged here as a JVM task stages them; the
driver's commit names them in each partition and commits the job's
transaction; nothing of an aborted or unfinished job is visible under
read_committed; a committed ``txnVersion`` makes the next run a no-op; and
only a DataFrame the JVM can write exactly as the Python sink would goes to
it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

import arrowlog
from arrowlog.format.segment import WriterIdentity
from arrowlog.spark import jvm_writing
from tests.support.staged import stage_own

COLUMNS: list[tuple[str, pa.DataType]] = [("id", pa.int64()), ("s", pa.string())]
SCHEMA = pa.schema(COLUMNS)
SPARK = StructType([StructField("id", LongType()), StructField("s", StringType())])


@pytest.fixture
def root(tmp_path: Path) -> str:
    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("t", SCHEMA, partitions=2)
    return str(tmp_path / "log")


def request(root: str, **more: Any) -> dict[str, Any]:
    options = {
        "path": root,
        "topic": "t",
        **{k: str(v) for k, v in more.pop("options", {}).items()},
    }
    return {"options": options, "schema": SPARK.json(), **more}


def upload(root: str, begun: dict[str, Any], partition: int, *ids: int) -> list[Any]:
    """A staged object of ``ids`` in ``partition``, as a task uploads it; its
    row of a commit request."""
    log = arrowlog.connect(root)
    batch = pa.record_batch({"id": list(ids), "s": [str(i) for i in ids]}, schema=SCHEMA)
    who = WriterIdentity(
        producer_id=begun["producer_id"], producer_epoch=begun["epoch"], transactional=True,
        transactional_id=begun["transactional_id"],
    )  # fmt: skip
    ref = stage_own(log.store, batch, who, partition=partition)
    return [partition, ref.at, ref.record_count, ref.size, ref.timestamp_ms, ref.append_id]


def committed(root: str, partition: int) -> list[int]:
    column = arrowlog.connect(root).consumer().read("t", partition).column("id")
    return sorted(v for v in column.to_pylist() if isinstance(v, int))


def test_a_committed_job_shows_every_uploaded_object_in_its_partition(root: str) -> None:
    begun = jvm_writing.begin(request(root))
    refs = [upload(root, begun, 0, 1, 2), upload(root, begun, 1, 3), upload(root, begun, 0, 4)]
    assert committed(root, 0) == []  # uploaded, named by no commit
    answer = jvm_writing.commit(request(root, begun=begun, refs=refs))
    assert answer == {"committed": {"0": 3, "1": 1}}
    assert committed(root, 0) == [1, 2, 4]
    assert committed(root, 1) == [3]


def test_a_job_committed_in_part_is_not_visible_and_an_aborted_one_never(root: str) -> None:
    begun = jvm_writing.begin(request(root))
    refs = [upload(root, begun, 0, 1)]
    # the driver named the object in the partition, then died before the
    # transaction's commit: an open transaction shows nothing
    log = arrowlog.connect(root)
    from arrowlog.txn.distributed import join_partitions

    join_partitions(log, begun["transactional_id"], begun["epoch"], [("t", 0)])
    ref = jvm_writing._refs(refs, begun["producer_id"], begun["epoch"], begun["transactional_id"])
    log.partition("t", 0).commit_refs(ref)
    assert committed(root, 0) == []
    unnamed = upload(root, begun, 0, 2)  # uploaded by a task, never named
    answer = jvm_writing.abort(request(root, begun=begun, refs=[*refs, unnamed]))
    assert answer == {"removed": 1}  # the named object stays: the log holds it, aborted
    assert committed(root, 0) == []
    assert arrowlog.connect(root).partition("t", 0).read().column("id").to_pylist() == [1]
    assert (Path(root) / "t" / "0" / refs[0][1]).exists()
    assert not (Path(root) / "t" / "0" / unnamed[1]).exists()


def test_a_version_committed_already_makes_the_next_run_write_nothing(root: str) -> None:
    keys = {"txnAppId": "load", "txnVersion": 3}
    begun = jvm_writing.begin(request(root, options=keys))
    jvm_writing.commit(request(root, options=keys, begun=begun, refs=[upload(root, begun, 0, 1)]))
    again = jvm_writing.begin(request(root, options=keys))
    assert again["skip"] is True
    assert jvm_writing.commit(request(root, options=keys, begun=again, refs=[])) == {
        "committed": {}
    }
    assert committed(root, 0) == [1]


def test_a_rerun_fences_the_first_attempt_whose_commit_then_fails(root: str) -> None:
    keys = {"txnAppId": "load", "txnVersion": 1}
    first = jvm_writing.begin(request(root, options=keys))
    refs = [upload(root, first, 0, 1)]
    second = jvm_writing.begin(request(root, options=keys))  # the job run again
    assert second["epoch"] > first["epoch"]
    with pytest.raises(arrowlog.ArrowLogError):
        jvm_writing.commit(request(root, options=keys, begun=first, refs=refs))
    jvm_writing.commit(request(root, options=keys, begun=second, refs=[upload(root, second, 0, 2)]))
    assert committed(root, 0) == [2]


@pytest.mark.parametrize(
    ("schema", "options", "why"),
    [
        (SPARK, {"writer": "python"}, "writer=python"),
        (StructType([SPARK.fields[1], SPARK.fields[0]]), {}, "in order"),
        (
            StructType([StructField("id", StringType()), SPARK.fields[1]]),
            {},
            "the topic's is int64",
        ),
        (SPARK, {"keyColumn": "nope"}, "not a column"),
        (StructType([*SPARK.fields, StructField("extra", LongType())]), {}, "not those of a read"),
        (SPARK, {"writer": "scala"}, "expected jvm or python"),
    ],
)
def test_only_a_dataframe_of_the_topics_columns_and_types_goes_to_the_jvm(
    root: str, schema: StructType, options: dict[str, str], why: str
) -> None:
    answer = jvm_writing.check({**request(root, options=options), "schema": schema.json()})
    assert answer["jvm"] is False and why in answer["why"]
    assert jvm_writing.check(request(root, options={"keyColumn": "s"})) == {
        "jvm": True,
        "why": None,
    }


def test_a_store_executors_cannot_upload_to_goes_to_the_python_sink(tmp_path: Path) -> None:
    answer = jvm_writing.check(
        {"options": {"path": "memory://x", "topic": "t"}, "schema": json.dumps(SPARK.jsonValue())}
    )
    assert answer["jvm"] is False


def test_a_timestamp_column_of_any_zone_goes_to_the_jvm(tmp_path: Path) -> None:
    """Spark's timestamps are UTC instants, whatever zone the topic shows them in."""
    from pyspark.sql.types import TimestampNTZType, TimestampType

    log = arrowlog.connect(str(tmp_path / "log"))
    log.create_topic("z", pa.schema([pa.field("at", pa.timestamp("us", tz="Europe/Paris"))]))
    log.create_topic("n", pa.schema([pa.field("at", pa.timestamp("us"))]))
    aware = StructType([StructField("at", TimestampType())]).json()
    naive = StructType([StructField("at", TimestampNTZType())]).json()
    root = str(tmp_path / "log")

    def check(topic: str, schema: str) -> bool:
        answer = jvm_writing.check({"options": {"path": root, "topic": topic}, "schema": schema})
        return bool(answer["jvm"])

    assert check("z", aware) and check("n", naive)
    assert not check("z", naive) and not check("n", aware)


@pytest.mark.s3
def test_executors_of_an_s3_write_get_no_credentials_and_urls_only_for_staged_objects(
    s3_server: Any,
) -> None:
    """What the driver hands the tasks holds no secret; the signer signs a
    PUT only for a transaction's staged object under a partition of the
    topic, so a URL can overwrite nothing of the log."""
    from arrowlog.spark.options import spark_storage_options
    from arrowlog.testing import seaweedfs

    server: seaweedfs.S3Server = s3_server
    root = server.url("t-jvm-sign")
    storage = spark_storage_options(server.storage_options)
    arrowlog.connect(root, server.storage_options).create_topic("t", SCHEMA, partitions=2)
    base = {"options": {"path": root, "topic": "t", **storage}, "schema": SPARK.json()}
    begun = jvm_writing.begin(base)
    assert begun["upload"] == "presigned" and "directories" not in begun
    text = json.dumps(begun)
    for name, secret in server.storage_options.items():
        if "secret" in name or "key" in name:
            assert str(secret) not in text
    good = upload_key(begun)
    [url] = jvm_writing.sign({**base, "begun": begun, "keys": [[1, good]]})["urls"]
    assert url.startswith("http") and "t/1/staged/" in url
    for p, at in (
        (0, "segments/00000000000000000000.arrow"),  # the log itself
        (2, good),  # no partition 2
        (0, good.replace("-t.arrow", ".arrow")),  # a plain append's name
        (0, "staged/x/../../segments/0.arrow"),
    ):
        with pytest.raises(arrowlog.InvalidConfigError):
            jvm_writing.sign({**base, "begun": begun, "keys": [[p, at]]})


def upload_key(begun: dict[str, Any]) -> str:
    from arrowlog.format.topic import StagedName, staged_at

    return staged_at(StagedName(1795823827325, "ab" * 16, 3, transactional=True))


def test_a_topic_created_again_during_the_write_gets_none_of_it(root: str) -> None:
    """The objects are under the deleted topic's prefix: a commit in the new
    topic would name objects that are not there."""
    begun = jvm_writing.begin(request(root))
    refs = [upload(root, begun, 0, 1)]
    log = arrowlog.connect(root)
    log.delete_topic("t")
    log.create_topic("t", SCHEMA, partitions=2)
    with pytest.raises(arrowlog.UnknownTopicOrPartitionError, match="during the write"):
        jvm_writing.commit(request(root, begun=begun, refs=refs))
    assert arrowlog.connect(root).partition("t", 0).end_offset() == 0


class _Died(Exception):
    """The planner process dies here (the JVM sends the request again)."""


@pytest.mark.parametrize("dies", ["between partitions", "after the transaction committed"])
def test_a_commit_sent_again_after_its_planner_died_commits_every_row_once(
    root: str, monkeypatch: pytest.MonkeyPatch, dies: str
) -> None:
    from arrowlog.partition.log import PartitionLog
    from arrowlog.spark.sink import JobTransaction

    begun = jvm_writing.begin(request(root))
    refs = [upload(root, begun, 0, 1, 2), upload(root, begun, 1, 3), upload(root, begun, 0, 4)]
    if dies == "between partitions":
        real = PartitionLog.commit_refs

        def dying(self: PartitionLog, chunk: Any) -> Any:
            if self.partition == 1:
                raise _Died
            return real(self, chunk)

        monkeypatch.setattr(PartitionLog, "commit_refs", dying)
    else:
        real_commit = JobTransaction.commit

        def commit_then_die(self: JobTransaction, members: list[int]) -> None:
            real_commit(self, members)
            raise _Died

        monkeypatch.setattr(JobTransaction, "commit", commit_then_die)
    with pytest.raises(_Died):
        jvm_writing.commit(request(root, begun=begun, refs=refs))
    monkeypatch.undo()
    answer = jvm_writing.commit(request(root, begun=begun, refs=refs))  # sent again
    assert answer == {"committed": {"0": 3, "1": 1}}
    assert committed(root, 0) == [1, 2, 4]
    assert committed(root, 1) == [3]
    assert arrowlog.connect(root).partition("t", 0).read().num_rows == 3  # named once


def test_write_commit_sent_again_to_a_new_planner_commits_each_object_once(root: str) -> None:
    """Schedule: the planner answering write_commit put partition 0's commit
    object, then died; the JVM sends the same write_commit to the planner it
    starts next (a process with no memory of the first)."""
    begun = jvm_writing.begin(request(root))
    refs = [upload(root, begun, 0, 1, 2), upload(root, begun, 0, 3), upload(root, begun, 1, 4)]
    log = arrowlog.connect(root)
    from arrowlog.txn.distributed import join_partitions

    join_partitions(log, begun["transactional_id"], begun["epoch"], [("t", 0), ("t", 1)])
    first = jvm_writing._refs(
        refs[:2], begun["producer_id"], begun["epoch"], begun["transactional_id"]
    )
    log.partition("t", 0).commit_refs(first)  # the first planner, killed after this
    jvm_writing.commit(request(root, begun=begun, refs=refs))  # the next planner
    assert committed(root, 0) == [1, 2, 3]
    assert committed(root, 1) == [4]


def test_write_commit_sent_again_after_the_transaction_committed_answers_the_commit(
    root: str,
) -> None:
    begun = jvm_writing.begin(request(root))
    refs = [upload(root, begun, 0, 1), upload(root, begun, 1, 2)]
    jvm_writing.commit(request(root, begun=begun, refs=refs))  # its planner died then
    again = jvm_writing.commit(request(root, begun=begun, refs=refs))  # the next planner
    assert again == {"committed": {"0": 1, "1": 1}}
    assert committed(root, 0) == [1] and committed(root, 1) == [2]
