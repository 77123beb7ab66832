"""``log.scan``: a topic's committed rows, every partition, one snapshot, for any
Arrow engine (pyarrow, DuckDB, Polars, pandas), with its filter exact and the
parts of it the plan can use pushed into the plan."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrowlog
from arrowlog import TopicConfig
from arrowlog.errors import (
    InvalidConfigError,
    UnknownColumnError,
    UnknownTopicOrPartitionError,
)
from arrowlog.storage import Store
from arrowlog.storage.memory import MemoryStore
from arrowlog.storage.wrappers import CountingStore

COLUMNS: list[tuple[str, pa.DataType]] = [("id", pa.int64()), ("kind", pa.string())]
SCHEMA = pa.schema(COLUMNS)
UTC = datetime.timezone.utc


def batch(ids: list[int], kind: str) -> pa.RecordBatch:
    return pa.record_batch({"id": ids, "kind": [kind] * len(ids)}, schema=SCHEMA)


def rows(table: pa.Table, *names: str) -> list[tuple[Any, ...]]:
    names = names or tuple(table.column_names)
    return sorted(zip(*(table[n].to_pylist() for n in names), strict=True))


def mixed_log(store: Any = None) -> arrowlog.ArrowLog:
    """Three partitions of plain appends (19 ids of 0..29, in segments of 1..3
    rows), a committed transaction in partitions 0 and 2 (ids 1000, 1001), an
    aborted one in partition 1 (id 2000)."""
    log = arrowlog.connect(store or MemoryStore())
    log.create_topic("t", SCHEMA, partitions=3, config=TopicConfig(checkpoint_interval=4))
    for j in range(10):
        ids = list(range(3 * j, 3 * j + 1 + j % 3))
        log.append("t", batch(ids, "ab"[j % 2]), partition=j % 3)
    committed = log.producer(transactional_id="c")
    committed.init_transactions()
    with committed.transaction():
        committed.send("t", batch([1000], "c"), partition=0)
        committed.send("t", batch([1001], "c"), partition=2)
    aborted = log.producer(transactional_id="x")
    aborted.init_transactions()
    aborted.begin_transaction()
    aborted.send("t", batch([2000], "x"), partition=1)
    aborted.abort_transaction()
    for producer in (committed, aborted):
        producer.close()  # markers and COMPLETE written now, not during a scan
    return log


def committed_rows(log: arrowlog.ArrowLog) -> list[tuple[Any, ...]]:
    """What a read_committed consumer reads of each partition."""
    consumer = log.consumer()
    out = []
    for p in range(3):
        out += rows(consumer.read("t", p))
    return sorted(out)


def test_a_scan_reads_the_committed_rows_of_every_partition(store: Store) -> None:
    log = mixed_log(store)
    table = log.scan("t").to_table()
    assert table.schema == SCHEMA
    assert rows(table) == committed_rows(log)
    ids = set(table["id"].to_pylist())
    assert {1000, 1001} <= ids and 2000 not in ids and len(ids) == 21


def test_read_uncommitted_is_asked_for_by_name_and_shows_the_aborted_rows() -> None:
    log = mixed_log()
    ids = log.scan("t", isolation_level="read_uncommitted").to_table()["id"].to_pylist()
    assert 2000 in ids
    with pytest.raises(InvalidConfigError, match="isolation_level"):
        log.scan("t", isolation_level="uncommitted")  # type: ignore[arg-type]


def test_the_metadata_columns_are_each_records_partition_offset_and_append_time() -> None:
    log = mixed_log()
    table = log.scan("t", metadata=True).to_table()
    assert table.column_names == ["id", "kind", "partition", "offset", "timestamp"]
    assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    consumer = log.consumer()
    expected = []
    for p in range(3):
        for records in consumer.iter_records("t", p):
            ts = datetime.datetime.fromtimestamp(records.timestamp_ms / 1000, UTC)
            for i, value in enumerate(records.batch["id"].to_pylist()):
                expected.append((value, p, records.offset + i, ts))
    assert rows(table, "id", "partition", "offset", "timestamp") == sorted(expected)


def test_a_metadata_name_the_topic_uses_gets_an_underscore() -> None:
    log = arrowlog.connect("memory://")
    schema = pa.schema([("offset", pa.string())])
    log.create_topic("t", schema)
    log.append("t", pa.record_batch({"offset": ["mine"]}, schema=schema))
    table = log.scan("t", metadata=True).to_table()
    assert table.column_names == ["offset", "partition", "_offset", "timestamp"]
    assert table.to_pylist()[0]["offset"] == "mine" and table.to_pylist()[0]["_offset"] == 0


def test_columns_pick_and_order_topic_and_metadata_columns() -> None:
    log = mixed_log()
    table = log.scan("t", columns=["offset", "id"]).to_table()
    assert table.column_names == ["offset", "id"]
    assert rows(table, "id") == [(i,) for (i, _) in committed_rows(log)]


def test_columns_of_metadata_only_count_every_row() -> None:
    log = mixed_log()
    expected = [
        (p, o) for (p, o) in rows(log.scan("t", metadata=True).to_table(), "partition", "offset")
    ]
    assert rows(log.scan("t", columns=["partition", "offset"]).to_table()) == expected
    assert log.scan("t", columns=[]).to_table().num_rows == len(expected)
    assert log.scan("t").to_polars().select(pl.len()).collect().item() == len(expected)


def test_a_projection_leaving_out_a_clashing_column_keeps_the_metadata_names() -> None:
    """Metadata names come from the topic's whole schema: a projection without
    the topic's own ``offset`` still calls the metadata offset ``_offset``."""
    log = arrowlog.connect("memory://")
    clashing: list[tuple[str, pa.DataType]] = [
        ("offset", pa.string()),
        ("topic", pa.string()),
        ("id", pa.int64()),
    ]
    schema = pa.schema(clashing)
    log.create_topic("t", schema, partitions=2)
    for i in range(4):
        values = {"offset": [f"o{i}"], "topic": [f"t{i}"], "id": [i]}
        log.append("t", pa.record_batch(values, schema=schema), partition=i % 2)
    whole = log.scan("t", metadata=True).to_table()
    assert whole.column_names == ["offset", "topic", "id", "partition", "_offset", "timestamp"]
    for columns in (["id", "_offset"], ["topic"], ["partition"], ["offset", "id"]):
        got = log.scan("t", columns=columns, metadata=True).to_table()
        assert rows(got) == rows(whole.select(got.column_names)), columns
    lazy = log.scan("t", metadata=True).to_polars()
    assert sorted(lazy.filter(pl.col("_offset") == 1).select("id").collect()["id"]) == [2, 3]


def test_a_filter_expression_keeps_exactly_its_rows() -> None:
    log = mixed_log()
    whole = log.scan("t", metadata=True).to_table()
    expr = ((pc.field("id") > 5) & (pc.field("kind") == "a")) | (pc.field("partition") == 2)
    got = log.scan("t", metadata=True, filter=expr).to_table()
    assert rows(got) == rows(whole.filter(expr))
    assert got.num_rows and got.num_rows < whole.num_rows


def test_filter_tuples_are_the_expression_they_spell() -> None:
    log = mixed_log()
    tuples = [("id", ">=", 4), ("kind", "in", ["a"]), ("offset", "<", 6)]
    expr = (pc.field("id") >= 4) & pc.field("kind").isin(["a"]) & (pc.field("offset") < 6)
    by_tuples = log.scan("t", filter=tuples, metadata=True).to_table()
    assert rows(by_tuples) == rows(log.scan("t", filter=expr, metadata=True).to_table())
    one = log.scan("t", filter=("id", "==", 4)).to_table()
    assert one["id"].to_pylist() == [4]


def counting_log() -> tuple[arrowlog.ArrowLog, CountingStore]:
    counting = CountingStore(MemoryStore())
    return mixed_log(counting), counting


def fetched(counting: CountingStore, make: Any) -> int:
    """Segment fetches (GETs and ranged GETs) reading the scan ``make`` makes."""
    scan = make()
    counting.reset()
    scan.to_table()
    return counting.counts.get("get", 0) + counting.counts.get("get_range", 0)


def test_conjuncts_on_the_metadata_columns_bound_what_is_read() -> None:
    log, counting = counting_log()
    every = fetched(counting, lambda: log.scan("t"))
    one = fetched(counting, lambda: log.scan("t", filter=pc.field("partition") == 1))
    late = fetched(counting, lambda: log.scan("t", filter=pc.field("offset") >= 3))
    assert 0 < one < every // 2
    assert 0 < late < every
    # an OR cannot bound the read: every segment is read, the rows still filtered
    either = (pc.field("partition") == 1) | (pc.field("id") == 0)
    assert fetched(counting, lambda: log.scan("t", filter=either)) == every


def test_conjuncts_on_the_topics_columns_skip_segments_by_their_statistics() -> None:
    log, counting = counting_log()
    every = fetched(counting, lambda: log.scan("t"))
    high = fetched(counting, lambda: log.scan("t", filter=pc.field("id") >= 1000))
    assert high < every // 3
    assert log.scan("t", filter=pc.field("id") >= 1000).to_table()["id"].to_pylist() in (
        [1000, 1001],
        [1001, 1000],
    )


def _compare(column: str, op: str, value: int, literal_first: bool) -> pc.Expression:
    field, literal = pc.field(column), pc.scalar(value)
    ops: dict[str, Callable[[pc.Expression, pc.Expression], pc.Expression]] = {
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    }  # fmt: skip
    mirror = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
    if literal_first:  # 5 > x, the same as x < 5
        return ops[mirror[op]](literal, field)
    return ops[op](field, literal)


# every kind of node the expression reader meets: comparisons either way round,
# is_in, null tests, AND, OR, NOT, on topic and metadata columns
_LEAVES = st.one_of(
    st.builds(
        _compare,
        st.sampled_from(["id", "offset", "partition"]),
        st.sampled_from(["==", "!=", "<", "<=", ">", ">="]),
        st.integers(-1, 1002),
        st.booleans(),
    ),
    st.builds(lambda k: pc.field("kind") == k, st.sampled_from(["a", "b", "c", "x"])),
    st.builds(lambda ks: pc.field("kind").isin(ks), st.lists(st.sampled_from("abcx"), min_size=1)),
    st.builds(lambda ps: pc.field("partition").isin(ps), st.lists(st.integers(0, 3), min_size=1)),
    st.just(pc.field("kind").is_valid()),
    st.just(pc.field("id").is_null()),
)
_EXPRESSIONS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(lambda a, b: a & b, inner, inner),
        st.builds(lambda a, b: a | b, inner, inner),
        st.builds(lambda a: ~a, inner),
    ),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=_EXPRESSIONS)
def test_whatever_the_plan_uses_of_a_filter_the_rows_are_the_filtered_scans(
    expr: pc.Expression,
) -> None:
    """Pushing a conjunct read wrongly would drop rows: every expression must
    keep the rows pyarrow's own filter keeps of the whole scan."""
    log = _SHARED_LOG
    whole = _SHARED_WHOLE
    got = log.scan("t", metadata=True, filter=expr).to_table()
    assert rows(got) == rows(whole.filter(expr))


@pytest.mark.parametrize("column", ["offset", "id", "partition"])
@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
@pytest.mark.parametrize("literal_first", [False, True])
def test_each_comparison_either_way_round_keeps_the_filtered_scans_rows(
    column: str, op: str, literal_first: bool
) -> None:
    expr = _compare(column, op, 1, literal_first)
    got = _SHARED_LOG.scan("t", metadata=True, filter=expr).to_table()
    assert rows(got) == rows(_SHARED_WHOLE.filter(expr))


def test_a_nanosecond_literal_is_not_rounded_into_leaving_out_rows() -> None:
    """``x < v`` with ``v`` half a microsecond above a row's value keeps the
    row: the literal is not pushed as its microsecond (Python's datetime)."""
    ns = pa.timestamp("ns", tz="UTC")
    nanos: list[tuple[str, pa.DataType]] = [("ts", ns), ("tm", pa.time64("ns"))]
    schema = pa.schema(nanos)
    log = arrowlog.connect("memory://")
    log.create_topic("t", schema)
    for value in (1000, 2000):
        arrays = [pa.array([value], ns), pa.array([value], pa.time64("ns"))]
        log.append("t", pa.record_batch(arrays, schema=schema))
    whole = log.scan("t", metadata=True).to_table()
    appended = whole["timestamp"][0].cast(pa.int64()).as_py() * 1000
    exprs = [
        pc.field("ts") < pa.scalar(1500, ns),
        pc.field("ts") != pa.scalar(1500, ns),
        pc.field("tm") < pa.scalar(1500, pa.time64("ns")),
        pc.field("timestamp") < pa.scalar(appended + 500, ns),
    ]
    for expr in exprs:
        got = log.scan("t", metadata=True, filter=expr).to_table()
        assert got.num_rows and rows(got) == rows(whole.filter(expr)), expr


def test_an_unsigned_literal_past_the_signed_range_filters_the_rows() -> None:
    schema = pa.schema([pa.field("u", pa.uint64())])
    log = arrowlog.connect("memory://")
    log.create_topic("t", schema)
    log.append("t", pa.record_batch([pa.array([1, 2**63 + 5], pa.uint64())], schema=schema))
    for expr in (
        pc.field("u") > pa.scalar(2**63, pa.uint64()),
        pc.field("u").isin(pa.array([2**63 + 5], pa.uint64())),
    ):
        assert log.scan("t", filter=expr).to_table()["u"].to_pylist() == [2**63 + 5]
    with pytest.raises(InvalidConfigError):
        log.scan("t", filter=[("u", ">", 2**63)])  # no pyarrow literal spells it


_SHARED_LOG = mixed_log()
_SHARED_WHOLE = _SHARED_LOG.scan("t", metadata=True).to_table()


def test_ranges_by_partition_offset_and_time() -> None:
    log = mixed_log()
    assert rows(log.scan("t", partitions=[1]).to_table()) == rows(log.consumer().read("t", 1))
    both = log.scan("t", partitions=[0, 2], start=1, end={0: 2, 2: 3}, metadata=True)
    assert both.ranges == {0: (1, 2), 2: (1, 3)}
    assert rows(both.to_table(), "partition", "offset") == [(0, 1), (2, 1), (2, 2)]
    future = datetime.datetime.now(UTC) + datetime.timedelta(days=1)
    assert log.scan("t", start_time=future).to_table().num_rows == 0
    assert log.scan("t", start_time=0).to_table().num_rows == len(committed_rows(log))


def test_a_scan_is_one_snapshot_read_the_same_each_time() -> None:
    log = mixed_log()
    scan = log.scan("t")
    first = rows(scan.to_table())
    log.append("t", batch([555], "a"), partition=0)
    assert rows(scan.to_table()) == first == rows(pa.table(scan))
    assert 555 in log.scan("t").to_table()["id"].to_pylist()
    assert log.scan("t").ends[0] == scan.ends[0] + 1


def test_a_transaction_is_in_a_scan_everywhere_or_nowhere() -> None:
    log = arrowlog.connect("memory://")
    log.create_topic("t", SCHEMA, partitions=2)
    p = log.producer(transactional_id="p")
    p.init_transactions()
    p.begin_transaction()
    p.send("t", batch([1], "a"), partition=0)
    p.send("t", batch([2], "a"), partition=1)
    p.flush()
    assert log.scan("t").to_table().num_rows == 0  # open: in no partition
    p.commit_transaction()
    assert log.scan("t").to_table()["id"].to_pylist() == [1, 2]


def test_bad_input_is_refused_before_anything_is_read() -> None:
    log, counting = counting_log()
    cases: list[tuple[type[Exception], str, dict[str, Any]]] = [
        (UnknownColumnError, "no column 'nope'", {"columns": ["id", "nope"]}),
        (InvalidConfigError, "not the string", {"columns": "id"}),
        (InvalidConfigError, "filter", {"filter": pc.field("nope") == 1}),
        (InvalidConfigError, "filter", {"filter": "id > 3"}),
        (UnknownColumnError, "nope", {"filter": [("nope", "==", 1)]}),
        (InvalidConfigError, "time zone", {"start_time": datetime.datetime(2026, 1, 1)}),
        (InvalidConfigError, "partitions", {"partitions": [-1]}),
        (InvalidConfigError, "offsets >= 0", {"start": {0: -5}}),
    ]
    for error, message, kwargs in cases:
        counting.reset()
        with pytest.raises(error, match=message):
            log.scan("t", **kwargs)
        assert not counting.counts.get("put_if_absent"), kwargs
    with pytest.raises(UnknownTopicOrPartitionError):
        log.scan("missing")
    with pytest.raises(UnknownTopicOrPartitionError, match="not 7"):
        log.scan("t", partitions=[7])
    with pytest.raises(UnknownTopicOrPartitionError, match="not 5"):
        log.scan("t", start={5: 0})
    with pytest.raises(InvalidConfigError, match="does not read"):
        log.scan("t", partitions=[0], end={1: 2})


def test_duckdb_queries_a_scan_as_a_table() -> None:
    log = mixed_log()
    scan = log.scan("t", metadata=True)  # noqa: F841 - DuckDB finds it by its name
    query = "select partition, count(*), sum(id) from scan group by partition order by partition"
    relation = duckdb.sql(query)
    assert relation is not None
    counted = relation.fetchall()
    whole = log.scan("t", metadata=True).to_table()
    expected = [
        (p, len(ids), sum(ids))
        for p in range(3)
        for ids in [[i.as_py() for i in whole.filter(pc.field("partition") == p)["id"]]]
    ]
    assert counted == expected


def test_polars_pushes_its_projection_and_predicate_into_the_scan() -> None:
    log, counting = counting_log()
    lazy = log.scan("t", metadata=True).to_polars()
    assert lazy.collect_schema().names() == ["id", "kind", "partition", "offset", "timestamp"]
    query = lazy.filter((pl.col("partition") == 1) & (pl.col("id") > 5)).select("id", "offset")
    counting.reset()
    got = query.collect()
    narrow = counting.counts.get("get", 0) + counting.counts.get("get_range", 0)
    whole = log.scan("t", metadata=True).to_table()
    expected = whole.filter((pc.field("partition") == 1) & (pc.field("id") > 5))
    assert sorted(zip(got["id"], got["offset"], strict=True)) == rows(expected, "id", "offset")
    assert narrow < fetched(counting, lambda: log.scan("t")) // 2  # one partition of three
    # a predicate no tuple can spell is still applied, exactly
    odd = lazy.filter((pl.col("id") % 2) == 1).select(pl.len()).collect().item()
    assert odd == len([i for i in whole["id"] if i.as_py() % 2 == 1])
    assert lazy.head(2).collect().height == 2


@pytest.mark.parametrize("column", ["offset", "id", "partition"])
@pytest.mark.parametrize("op", ["==", "!=", "<", "<=", ">", ">="])
@pytest.mark.parametrize("literal_first", [False, True])
def test_each_polars_comparison_either_way_round_keeps_the_filtered_rows(
    column: str, op: str, literal_first: bool
) -> None:
    ops = {
        "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
    }  # fmt: skip
    mirror = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
    if literal_first:
        predicate = ops[mirror[op]](pl.lit(1), pl.col(column))
    else:
        predicate = ops[op](pl.col(column), 1)
    lazy = _SHARED_LOG.scan("t", metadata=True).to_polars()
    got = lazy.filter(predicate).select("id", "partition", "offset").collect()
    expected = _SHARED_WHOLE.filter(_compare(column, op, 1, literal_first))
    assert sorted(got.iter_rows()) == rows(expected, "id", "partition", "offset")


def test_polars_keeps_the_rows_its_own_comparisons_keep() -> None:
    """Polars compares otherwise than pyarrow: NaN above every number, a float
    literal taken as a float32 column's type, an integer literal as a uint64
    column's. Its predicate's tuples only plan the read, so its rows are
    those Polars keeps of the whole scan."""
    nan = float("nan")
    columns: list[tuple[str, pa.DataType]] = [
        ("x", pa.float64()),
        ("f", pa.float32()),
        ("u", pa.uint64()),
    ]
    schema = pa.schema(columns)
    log = arrowlog.connect("memory://")
    log.create_topic("t", schema)
    for x, f, u in [([1.0, nan], [0.1, 2.0], [1, 2**63 + 5]), ([nan], [0.1], [3])]:
        arrays = [pa.array(x, pa.float64()), pa.array(f, pa.float32()), pa.array(u, pa.uint64())]
        log.append("t", pa.record_batch(arrays, schema=schema))  # a segment each
    lazy = log.scan("t").to_polars()
    whole = pl.DataFrame(pl.from_arrow(log.scan("t").to_table()))
    for predicate in (
        pl.col("x") > 5,
        pl.col("x") >= 1,
        pl.col("f") <= 0.1,
        pl.col("f") == 0.1,
        pl.col("u") > 1,
        pl.col("u") > 2**63,
    ):
        got = lazy.filter(predicate).collect()
        expected = whole.filter(predicate)
        assert expected.height and got.sort(pl.all()).equals(expected.sort(pl.all())), predicate


def test_polars_predicates_become_filter_tuples_only_where_they_are_one() -> None:
    from arrowlog.read.polars import conjuncts

    utc = datetime.datetime(2026, 1, 1, tzinfo=UTC)
    assert conjuncts((pl.col("partition") == 1) & (pl.lit(5) < pl.col("offset"))) == [
        ("partition", "==", 1),
        ("offset", ">", 5),
    ]
    assert conjuncts(pl.col("kind").is_null() & pl.col("id").is_not_null()) == [
        ("kind", "is null", None),
        ("id", "is not null", None),
    ]
    assert conjuncts(pl.col("timestamp") >= pl.lit(utc)) == [("timestamp", ">=", utc)]
    # no tuple spells these: the rows are filtered all the same
    assert conjuncts((pl.col("partition") == 1) | (pl.col("id") == 0)) == []
    assert conjuncts(~(pl.col("id") < 3)) == []
    assert conjuncts(pl.col("id") == pl.col("offset")) == []
    assert conjuncts(pl.col("timestamp") >= datetime.datetime(2026, 1, 1)) == []  # naive


def test_pandas_gets_the_rows_with_the_append_time_in_utc() -> None:
    log = mixed_log()
    frame = log.scan("t", metadata=True).to_pandas()
    assert len(frame) == len(committed_rows(log))
    assert str(frame["timestamp"].dt.tz) == "UTC"


def test_a_scan_whose_records_were_vacuumed_since_says_to_make_it_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records deleted and vacuumed between making a scan and reading it: a
    typed error that says what happened and what to do (not Spark's option)."""
    from arrowlog.errors import OffsetOutOfRangeError, SegmentNotFoundError
    from tests.support.clocks import Clocks, ClockStore

    clock = ClockStore(MemoryStore())
    clocks = Clocks(clock, monkeypatch)
    log = arrowlog.connect(clock)
    log.create_topic("t", SCHEMA, config=TopicConfig(checkpoint_interval=2, delete_delay_ms=100))
    for i in range(6):
        log.append("t", batch([i], "a"))
    scan = log.scan("t")
    log.delete_records("t", 0, 4)
    clocks.advance(5_000)
    assert log.maintenance.vacuum()
    with pytest.raises(SegmentNotFoundError, match="make the scan again"):
        scan.to_table()
    with pytest.raises(OffsetOutOfRangeError, match="start at the log start to skip them"):
        log.scan("t", start=0)
    assert log.scan("t").to_table()["id"].to_pylist() == [4, 5]
