"""Option parsing of the Spark source and sink (no Spark needed): every Kafka
source option arrowlog takes, and one clear message for each name or value it
refuses."""

from __future__ import annotations

import re
from typing import Any

import pytest

from arrowlog.errors import InvalidConfigError
from arrowlog.spark.options import (
    KAFKA_ONLY_OPTIONS,
    ReadOptions,
    WriteOptions,
    app_transactional_id,
    spark_storage_options,
    storage_options,
)

BASE = {"path": "memory://", "topic": "t"}


def parse(options: dict[str, str] | None = None, streaming: bool | None = False) -> ReadOptions:
    # Spark hands options over lower-cased
    given = {**BASE, **(options or {})}
    return ReadOptions.parse({k.lower(): v for k, v in given.items()}, streaming=streaming)


def refused(message: str, options: dict[str, str], streaming: bool | None = False) -> str:
    with pytest.raises(InvalidConfigError, match=message) as info:
        parse(options, streaming)
    return str(info.value)


def test_kafka_source_options_parse() -> None:
    o = parse(
        {
            "kafka.isolation.level": "read_uncommitted",
            "startingOffsetsByTimestamp": '{"t": {"0": 5, "1": 7}}',
            "endingOffsetsByTimestamp": '{"t": {"0": 9}}',
            "startingOffsetsByTimestampStrategy": "latest",
            "minPartitions": "8",
            "failOnDataLoss": "false",
        }
    )
    assert o.isolation_level == "read_uncommitted"
    assert o.starting_by_timestamp == {("t", 0): 5, ("t", 1): 7}
    assert o.ending_by_timestamp == {("t", 0): 9}
    assert o.timestamp_strategy == "latest"
    assert o.min_partitions == 8 and not o.fail_on_data_loss
    assert parse().timestamp_strategy == "error"
    s = parse(
        {"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "20", "maxTriggerDelay": "30s"},
        streaming=True,
    )
    assert (s.min_offsets_per_trigger, s.max_offsets_per_trigger) == (10, 20)
    assert s.max_trigger_delay_ms == 30_000
    assert parse(streaming=True).max_trigger_delay_ms == 15 * 60 * 1000  # Kafka's default, 15m
    assert parse({"maxTriggerDelay": "250"}, True).max_trigger_delay_ms == 250
    assert parse({"maxTriggerDelay": "2h"}, True).max_trigger_delay_ms == 7_200_000
    assert parse({"maxTriggerDelay": "1d"}, True).max_trigger_delay_ms == 86_400_000
    assert parse({"maxTriggerDelay": "2500us"}, True).max_trigger_delay_ms == 2  # as Spark


def test_subscription_is_exactly_one_of_four() -> None:
    def sub(**options: str) -> ReadOptions:
        return ReadOptions.parse(
            {"path": "memory://", **{k.lower(): v for k, v in options.items()}}
        )

    assert sub(topic="a, b").topics == ("a", "b")
    assert sub(subscribe="a").topics == ("a",)
    assigned = sub(assign='{"a": [0, 2], "b": [1]}')
    assert assigned.topics == ("a", "b")
    assert assigned.assigned == frozenset({("a", 0), ("a", 2), ("b", 1)})
    pattern = sub(subscribePattern="ev.*")
    assert (pattern.topics, pattern.topic_pattern) == ((), "ev.*")
    for options in ({}, {"topic": "a", "subscribe": "b"}, {"assign": '{"a": [0]}', "topic": "a"}):
        with pytest.raises(InvalidConfigError, match="exactly one of the options topic, subscribe"):
            sub(**options)
    for bad in ('{"a": 0}', "[0]", '{"a": [-1]}', '{"a": [true]}', "{}", "a:0", '{"a": []}'):
        with pytest.raises(InvalidConfigError, match="option assign: expected JSON"):
            sub(assign=bad)
    with pytest.raises(InvalidConfigError, match="subscribePattern: '\\(' is not a regular"):
        sub(subscribePattern="(")


def test_a_typo_is_refused_with_the_closest_name() -> None:
    message = refused("unknown option 'startingoffset'", {"startingOffset": "earliest"})
    assert "did you mean 'startingOffsets'?" in message
    assert "Known options: path, topic," in message and "storage.<name>" in message
    assert "did you mean 'isolationLevel'" in refused("isolationlevl", {"isolationLevl": "x"})
    # several bad names: one message naming each
    both = refused("unknown option", {"startingOffset": "earliest", "endingOfsets": "latest"})
    assert "'startingOffsets'" in both and "'endingOffsets'" in both
    assert "did you mean" not in refused("unknown option 'zzz'", {"zzz": "1"})


@pytest.mark.parametrize(
    "name,reason",
    [
        ("kafka.bootstrap.servers", "no brokers"),
        ("kafka.security.protocol", "no brokers"),
        ("kafka.group.id", "checkpoint, not in a consumer group"),
        ("groupIdPrefix", "checkpoint, not in a consumer group"),
        ("includeHeaders", "no headers"),
        ("kafkaConsumer.pollTimeoutMs", "no broker to poll"),
        ("fetchOffset.numRetries", "no broker to poll"),
        ("fetchOffset.retryIntervalMs", "no broker to poll"),
        ("maxRecordsPerPartition", "minPartitions"),
    ],
)
def test_kafka_only_options_are_refused_with_a_reason(name: str, reason: str) -> None:
    message = refused("is a Kafka option that arrowlog does not take", {name: "x"})
    assert reason in message and repr(name.lower()) in message
    assert name in KAFKA_ONLY_OPTIONS or name.startswith("kafka.")


def test_options_of_another_kind_of_query_are_refused() -> None:
    assert "applies to streaming reads only" in refused(
        "maxOffsetsPerTrigger", {"maxOffsetsPerTrigger": "5"}
    )
    assert "a stream has no end" in refused("endingOffsets", {"endingOffsets": "latest"}, True)
    assert "'keyColumn' applies to writes only" in refused("keyColumn", {"keyColumn": "k"})
    parse({"maxOffsetsPerTrigger": "5", "endingOffsets": "latest"}, None)  # schema(): either kind
    with pytest.raises(InvalidConfigError, match="'startingOffsets' applies to reads only"):
        WriteOptions.parse({**BASE, "startingoffsets": "earliest"})
    with pytest.raises(InvalidConfigError, match="did you mean 'txnVersion'"):
        WriteOptions.parse({**BASE, "txnversoin": "1", "txnappid": "a"})
    with pytest.raises(InvalidConfigError, match="'checkpointLocation' applies to"):
        WriteOptions.parse({**BASE, "checkpointlocation": "/x"})
    WriteOptions.parse({**BASE, "checkpointlocation": "/x", "txnappid": "a"}, streaming=True)
    with pytest.raises(InvalidConfigError, match="txnVersion: expected an integer >= 0"):
        WriteOptions.parse({**BASE, "txnappid": "a", "txnversion": "-1"})
    session_key = re.escape("spark.arrowlog.write.txnVersion: expected an integer >= 0")
    with pytest.raises(InvalidConfigError, match=session_key):
        WriteOptions.parse({**BASE, "spark.arrowlog.write.txnappid": "a",
                            "spark.arrowlog.write.txnversion": "-3"})  # fmt: skip


@pytest.mark.parametrize(
    "app_id,message",
    [
        ("", "expected 1 to 23[01] characters"),
        (" ", "got ' '"),
        (".hidden", "starting with a letter or digit"),
        ("nightly job", "of \\[A-Za-z0-9._-\\] .* for topic 't', got 'nightly job'"),
        ("a/../b", "got 'a/../b'"),
        ("x" * 234, "expected 1 to 23[01] characters"),
    ],
)
def test_a_txn_app_id_that_cannot_name_a_job_is_refused(app_id: str, message: str) -> None:
    for streaming in (False, True):
        with pytest.raises(InvalidConfigError, match=f"option txnAppId.*{message}"):
            WriteOptions.parse(
                {**BASE, "txnappid": app_id, "checkpointlocation": "/x"}
                if streaming
                else {**BASE, "txnappid": app_id, "txnversion": "1"},
                streaming=streaming,
            )


def test_each_topic_has_its_own_transactional_id_for_the_same_app() -> None:
    ids = {
        app_transactional_id(topic, app, streaming=streaming)
        for topic, app in [("a", "b.c"), ("a.b", "c"), ("b", "b.c")]
        for streaming in (False, True)
    }
    assert len(ids) == 6
    assert app_transactional_id("events", "nightly") == "spark.write.6.events.0.nightly"
    assert app_transactional_id("events", "nightly", incarnation=2) != app_transactional_id(
        "events", "nightly"
    )


@pytest.mark.parametrize(
    "options,message",
    [
        ({"minPartitions": "0"}, "option minPartitions: expected an integer >= 1, got '0'"),
        ({"minPartitions": "many"}, "option minPartitions: expected an integer, got 'many'"),
        ({"targetSplitBytes": "-1"}, "targetSplitBytes: expected an integer >= 1"),
        ({"startingTimestamp": "-5"}, "startingTimestamp: expected an integer >= 0"),
        ({"startingOffsetsByTimestamp": "{"}, "startingOffsetsByTimestamp: expected JSON like"),
        ({"startingOffsetsByTimestamp": '{"t": {"x": 1}}'}, "startingOffsetsByTimestamp: exp"),
        ({"endingOffsetsByTimestamp": '{"t": [1]}'}, "endingOffsetsByTimestamp: expected JSON"),
        ({"startingOffsetsByTimestamp": '{"t": {"0": -1}}'}, "startingOffsetsByTimestamp: exp"),
        ({"startingOffsetsByTimestampStrategy": "earliest"}, "expected error or latest"),
        ({"kafka.isolation.level": "dirty"}, "option kafka.isolation.level: expected read_comm"),
        (
            {"kafka.isolation.level": "read_uncommitted", "isolationLevel": "read_committed"},
            "isolationLevel and kafka.isolation.level disagree",
        ),
        ({"failOnDataLoss": "perhaps"}, "failOnDataLoss: expected true or false"),
        ({"reader": "scala"}, "option reader: expected jvm or python, got 'scala'"),
    ],
)
def test_bad_values_get_one_message_each(options: dict[str, str], message: str) -> None:
    refused(message, options)


@pytest.mark.parametrize(
    "options,message",
    [
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay: expected a duration like 500ms"),
        ({"minOffsetsPerTrigger": "0"}, "minOffsetsPerTrigger: expected an integer >= 1"),
        (
            {"minOffsetsPerTrigger": "50", "maxOffsetsPerTrigger": "10"},
            "minOffsetsPerTrigger \\(50\\) is above maxOffsetsPerTrigger \\(10\\)",
        ),
    ],
)
def test_bad_streaming_values(options: dict[str, str], message: str) -> None:
    refused(message, options, True)


@pytest.mark.parametrize(
    "options",
    [
        {"endingOffsets": "earliest"},
        {"endingOffsets": '{"t": {"0": -2}}'},
        {"startingOffsets": "latest"},
        {"startingOffsets": '{"t": {"0": 5, "1": -1}}'},
    ],
)
def test_a_batch_read_that_would_read_nothing_is_refused_as_kafka_refuses_it(
    options: dict[str, str],
) -> None:
    name = next(iter(options))
    refused(f"option {name}: .* is not allowed in a batch read", options)
    # a stream may start at latest; its ends are its own
    if name == "startingOffsets":
        parse(options, streaming=True)


def test_structured_storage_options_are_json() -> None:
    options = {
        "storage.client_kwargs": '{"region_name": "eu-west-1", "verify": false}',
        "storage.key": "k",
        "storage.anon": "false",
    }
    assert storage_options(options) == {
        "client_kwargs": {"region_name": "eu-west-1", "verify": False},
        "key": "k",
        "anon": "false",  # connect coerces scalars
    }
    assert storage_options({"storage.region_name": "x"}) == {"client_kwargs": {"region_name": "x"}}
    with pytest.raises(InvalidConfigError, match=r"option storage\.client_kwargs: expected a JSON"):
        storage_options({"storage.client_kwargs": "{'region_name': 'x'}"})
    storage = {"client_kwargs": {"region_name": "r"}, "fsync": False, "key": "k"}
    assert storage_options(spark_storage_options(storage)) == {**storage, "fsync": "false"}


def test_columns_option_takes_names_and_refuses_empty_ones() -> None:
    assert parse({"columns": "kind, f"}).columns == ("kind", "f")
    assert parse().columns is None
    assert parse({"columns": "f"}, streaming=True).columns == ("f",)
    for bad in ("", "a,,b", " , "):
        refused("option columns: expected comma-separated column names", {"columns": bad})


def test_data_filters_pyarrow_cannot_apply_only_lose_their_pruning() -> None:
    import pyarrow as pa

    from arrowlog.spark.pushdown import usable

    fields: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("s", pa.string())]
    schema = pa.schema(fields)
    where: list[tuple[str, str, Any]] = [
        ("v", ">", 3),
        ("v", "==", "x"),
        ("s", "in", [1]),
        ("s", "is null", None),
    ]
    assert usable(schema, where) == [("v", ">", 3), ("s", "is null", None)]


def test_tasks_of_a_columns_read_hold_more_segments(tmp_path: Any) -> None:
    """targetSplitBytes counts the bytes a task moves: reading one column of two,
    a task takes twice the segments."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    import arrowlog
    from arrowlog.read.scan import output_schema
    from arrowlog.spark.reader import ArrowLogReader

    log = arrowlog.connect(str(tmp_path))
    fields: list[pa.Field[Any]] = [pa.field("v", pa.int64()), pa.field("f", pa.float64())]
    log.create_topic("t", pa.schema(fields))
    for _ in range(8):
        log.append(
            "t", pa.record_batch([list(range(1000)), [0.5] * 1000], schema=pa.schema(fields))
        )
    size = max(ref.size for ref in log.partition("t", 0).segments())
    base = {"path": str(tmp_path), "topic": "t", "targetsplitbytes": str(2 * size)}

    def tasks(options: dict[str, str], columns: list[str] | None) -> int:
        kept = pa.schema([f for f in fields if columns is None or f.name in columns])
        schema = output_schema(kept)
        reader = ArrowLogReader(ReadOptions.parse(options), from_arrow_schema(schema))
        return len(reader.partitions())

    assert tasks(base, None) == 4
    assert tasks({**base, "columns": "v"}, ["v"]) == 2


def test_a_streaming_write_refuses_a_txn_version_it_would_ignore() -> None:
    with pytest.raises(InvalidConfigError, match="a streaming write takes txnAppId alone"):
        WriteOptions.parse({**BASE, "txnappid": "a", "txnversion": "3"}, streaming=True)
    assert WriteOptions.parse({**BASE, "txnappid": "a"}, streaming=True).app_version is None
