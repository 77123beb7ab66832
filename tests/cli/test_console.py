"""``arrowlog produce`` and ``arrowlog consume`` on a local root."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import time
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import arrowlog
from arrowlog.partition import fetch_segment
from arrowlog.producer import key_partitions
from tests.support.cli import SCHEMA, build_mixed_log, cli, env, fails, files, rows, run


def consumed(out: str) -> list[tuple[int, int, str, dict[str, object]]]:
    """(partition, offset, timestamp, record) of each table line."""
    lines = out.splitlines()
    if not lines:
        return []
    assert lines[0].split() == ["PARTITION", "OFFSET", "TIMESTAMP", "VALUE"]
    parsed = []
    for line in lines[1:]:
        p, offset, stamp, value = line.split("\t")
        parsed.append((int(p), int(offset), stamp, json.loads(value)))
    return parsed


def test_consume_prints_the_real_offsets_after_aborted_and_control_batches(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_mixed_log(str(root))
    got = consumed(run(capsys, "consume", "t"))
    assert [(o, r["x"]) for _, o, _, r in got] == [(o, o) for o in (0, 1, 2, 6, 7, 9)]
    # read_uncommitted shows the aborted records at their offsets, never a marker
    got = consumed(run(capsys, "consume", "t", "--isolation-level", "read_uncommitted"))
    assert [o for _, o, _, _ in got] == [0, 1, 2, 3, 4, 6, 7, 9]
    # timestamps are the segments' append times
    [ref] = log.partition("t", 0).segments(6, 7)
    header, _ = fetch_segment(log.store, ref.key, ref.base, ref.end)
    stamp = consumed(run(capsys, "consume", "t", "--partition", "0", "--offset", "6"))[0][2]
    want = header.timestamp_ms
    assert round(datetime.fromisoformat(stamp).timestamp() * 1000) == want
    # JSON lines carry the same offsets
    lines = run(capsys, "consume", "t", "--output", "json", "--offset", "3", "--partition", "0")
    records = [json.loads(line) for line in lines.splitlines()]
    assert [(r["offset"], r["value"]["x"]) for r in records] == [(6, 6), (7, 7), (9, 9)]
    assert {r["topic"] for r in records} == {"t"}


def test_max_records_stops_without_reading_further(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA)
    for i in range(40):
        log.append("t", rows(2 * i, 2 * i + 1))

    code = arrowlog.cli.main(["consume", "t", "--debug", "--max-records", "3"])
    captured = capsys.readouterr()
    assert code == 0
    assert [o for _, o, _, _ in consumed(captured.out)] == [0, 1, 2]
    limited = _requests(captured.err)
    code = arrowlog.cli.main(["consume", "t", "--debug"])
    captured = capsys.readouterr()
    full = _requests(captured.err)
    assert len(consumed(captured.out)) == 80
    # a whole segment is fetched with one GET: 2 segments hold offsets 0-2; the
    # other GETs are the topic's version chain (the version and a probe past it;
    # no checkpoint: none is due yet)
    assert full["get"] - limited["get"] == 40 - 2
    assert limited["get"] <= 4


def test_consume_with_a_group_resumes_where_it_left_off_and_commits_what_it_printed(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=2)
    for i in range(4):
        log.append("t", rows(i), partition=i % 2)
    first = consumed(run(capsys, "consume", "t", "--group", "g", "--max-records", "1"))
    assert [(p, o) for p, o, _, _ in first] == [(0, 0)]
    group = log.consumer(group_id="g")
    assert (group.committed("t", 0), group.committed("t", 1)) == (1, None)
    rest = consumed(run(capsys, "consume", "t", "--group", "g"))
    assert sorted((p, o) for p, o, _, _ in rest) == [(0, 1), (1, 0), (1, 1)]
    assert (group.committed("t", 0), group.committed("t", 1)) == (2, 2)
    log.append("t", rows(9), partition=1)
    again = consumed(run(capsys, "consume", "t", "--group", "g"))
    assert [(p, o, r["x"]) for p, o, _, r in again] == [(1, 2, 9)]
    # without --group: read only, from the start
    before = files(root)
    assert len(consumed(run(capsys, "consume", "t"))) == 5
    assert files(root) == before


def _requests(err: str) -> dict[str, int]:
    match = re.search(r"store requests: (.*)", err)
    assert match, err
    return {k: int(v) for k, v in (item.split("=") for item in match.group(1).split())}


def test_produce_json_lines_keyed_and_to_a_partition(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=3)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"x": i, "s": f"k{i}"}) + "\n" for i in range(20)))
    out = json.loads(
        run(capsys, "produce", "t", "--input", str(data), "--key", "x", "--output", "json")
    )
    assert sum(r["records"] for r in out) == 20
    want = key_partitions(range(20), 3)
    for p in range(3):
        table = log.consumer().read("t", p)
        assert table.column("x").to_pylist() == [i for i in range(20) if want[i] == p]
    csv = tmp_path / "in.csv"
    csv.write_text("s,x\nb,100\nc,101\n")
    run(capsys, "produce", "t", "--input", str(csv), "--partition", "2")
    assert log.consumer().read("t", 2).column("x").to_pylist()[-2:] == [100, 101]


def test_produce_reads_stdin(
    root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    arrowlog.connect(str(root)).create_topic("t", SCHEMA)
    stdin = io.TextIOWrapper(io.BytesIO(b'{"x": 1}\n\n{"x": 2, "s": "b"}\n'))
    monkeypatch.setattr(sys, "stdin", stdin)
    run(capsys, "produce", "t", "--partition", "0")
    got = arrowlog.connect(str(root)).consumer().read("t", 0).to_pylist()
    assert got == [{"x": 1, "s": None}, {"x": 2, "s": "b"}]


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        ('{"x": 1}\n{"x": "a"}\n', [], "does not fit the topic's schema"),
        ('{"x": 1}\nnot json\n', [], "line 2: not JSON"),
        ('{"x": 1}\n[1]\n', [], "line 2: expected a JSON object"),
        ('{"x": 1, "y": 2}\n', [], r"line 1: unknown field\(s\) \['y'\]"),
        ('{"x": 1}\n{"s": "no x"}\n', [], "'x' has 1 null"),
        ("", [], "no records"),
        ('{"x": 1}\n', ["--key", "nope"], "--key 'nope' is not a column"),
        ('{"x": 1}\n', ["--partition", "7"], "has partitions 0..0, not 7"),
        ("x,s,z\n1,a,2\n", ["--format", "csv"], r"unknown column\(s\) \['z'\]"),
        ("x,s\n1,a\n", [], "line 1: not JSON: .* \\(CSV\\? say --format csv"),
    ],
)
def test_bad_input_to_produce_writes_nothing(
    root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    extra: list[str],
    message: str,
) -> None:
    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA)
    log.append("t", rows(0))
    data = tmp_path / "in.txt"
    data.write_text(content)
    before = files(root)
    code = 3 if "partitions" in message else 2
    err = fails(capsys, code, "produce", "t", "--input", str(data), *extra)
    assert re.search(message, err), err
    assert files(root) == before


def test_consume_to_parquet_from_time_and_follow(
    root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = build_mixed_log(str(root))
    out = tmp_path / "out.parquet"
    run(capsys, "consume", "t", "--to-parquet", str(out))
    table = pq.read_table(out)
    assert table.column("offset").to_pylist() == [0, 1, 2, 6, 7, 9]
    assert table.column("x").to_pylist() == [0, 1, 2, 6, 7, 9]
    assert table.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    # from a time: the first record appended at or after it
    time.sleep(0.01)
    later = int(time.time() * 1000)
    time.sleep(0.01)
    log.append("t", rows(10))
    got = consumed(run(capsys, "consume", "t", "--from-time", str(later)))
    assert [o for _, o, _, _ in got] == [10]
    # follow: returns once --max-records arrived or --timeout-ms passed quietly
    follow = ["consume", "t", "--follow", "--poll-ms", "50"]
    got = consumed(run(capsys, *follow, "--offset", "latest", "--timeout-ms", "300"))
    assert got == []
    got = consumed(run(capsys, *follow, "--max-records", "2", "--offset", "9", "--partition", "0"))
    assert [o for _, o, _, _ in got] == [9, 10]


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["consume", "nope"], 3, "unknown topic 'nope'"),
        (["consume", "t", "--partition", "4"], 3, "not 4"),
        (["consume", "t", "--offset", "5"], 2, "--offset N needs --partition"),
        (["consume", "t", "--offset", "x"], 2, "earliest, latest or an offset"),
        (["consume", "t", "--from-time", "yesterday"], 2, "neither milliseconds nor an ISO"),
        (["consume", "t", "--partition", "0", "--offset", "99"], 1, "outside the log"),
        (["consume", "t", "--timeout-ms", "5"], 2, "--timeout-ms goes with --follow"),
        (["consume", "t", "--max-records", "0"], 2, "0 is not in the range"),
        (["consume", "t", "--group", "g", "--partition", "0", "--offset", "3"], 2, "reset-offsets"),
        (["consume", "t", "--group", "g", "--from-time", "0"], 2, "with --group, reading"),
        (["consume", "t", "--group", "bad/id"], 2, "group id"),
    ],
)
def test_consume_errors_are_one_line(
    root: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    build_mixed_log(str(root))
    before = files(root)
    assert message in fails(capsys, code, *argv)
    assert files(root) == before


def test_output_csv_is_a_header_and_a_line_per_row_for_records_and_tables(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a spreadsheet or ``pandas.read_csv`` takes: records with their
    partition, offset and time, and every table command's rows."""

    log = arrowlog.connect(str(root))
    log.create_topic("t", SCHEMA, partitions=2)
    log.append("t", rows(1, 2), partition=0)
    log.append("t", rows(3), partition=1)
    log.consumer(group_id="g").commit({("t", 0): 1})

    def parsed(*argv: str) -> list[dict[str, str]]:
        return list(csv.DictReader(io.StringIO(run(capsys, *argv, "--output", "csv"))))

    records = parsed("consume", "t")
    assert [(r["partition"], r["offset"], r["x"]) for r in records] == [
        ("0", "0", "1"),
        ("0", "1", "2"),
        ("1", "0", "3"),
    ]
    assert set(records[0]) == {"partition", "offset", "timestamp", *SCHEMA.names}
    described = parsed("topics", "describe", "t")
    assert [(r["partition"], r["high_watermark"]) for r in described] == [("0", "2"), ("1", "1")]
    lag = parsed("groups", "describe", "g")
    assert [(r["partition"], r["current_offset"], r["lag"]) for r in lag] == [
        ("0", "1", "1"),
        ("1", "", ""),
    ]
    assert [r["offset"] for r in parsed("get-offsets", "t")] == ["2", "1"]


def test_consume_csv_keeps_topic_columns_named_like_the_log_positions(tmp_path: Path) -> None:
    """A topic column called ``offset`` (or ``partition``, ``timestamp``) is a
    column of its own beside the log's, which takes an ``arrowlog_`` prefix as
    in ``--to-parquet``: one ``offset`` field overwrote the other."""
    root = str(tmp_path / "log")
    log = arrowlog.connect(root)
    names = {"offset": pa.int64(), "partition": pa.string(), "s": pa.string()}
    schema = pa.schema([pa.field(n, t) for n, t in names.items()])
    log.create_topic("t", schema)
    values = {"offset": [70, None], "partition": ["p", "q"], "s": ["a", "b"]}
    log.append("t", pa.record_batch(values, schema=schema))
    done = subprocess.run(
        cli("consume", "t", "--output", "csv"), env=env(ARROWLOG_ROOT=root),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = list(csv.reader(io.StringIO(done.stdout)))
    assert lines[0] == [
        "arrowlog_partition", "arrowlog_offset", "timestamp", "offset", "partition", "s",
    ]  # fmt: skip
    assert [line[:2] + line[3:] for line in lines[1:]] == [
        ["0", "0", "70", "p", "a"],
        ["0", "1", "", "q", "b"],
    ]


def test_consume_csv_of_no_records_is_the_header_alone(tmp_path: Path) -> None:
    """A reader of the CSV learns the columns even when nothing was read."""
    root = str(tmp_path / "log")
    arrowlog.connect(root).create_topic("t", SCHEMA, partitions=2)
    done = subprocess.run(
        cli("consume", "t", "--output", "csv"), env=env(ARROWLOG_ROOT=root),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == "partition,offset,timestamp,x,s\n"


def test_consume_csv_and_json_read_back_to_the_values_binary_nested_null_and_empty(
    tmp_path: Path,
) -> None:
    """Python's csv module reads back each value: binary as base64 (alone or
    nested; its Python repr ``b'...'`` was printed), nested values as JSON,
    commas, quotes and newlines quoted; a null is an empty field and an empty
    string a quoted one (``""``), as PostgreSQL's COPY and Python 3.12's
    ``csv.QUOTE_NOTNULL`` tell them apart. JSON lines carry binary as base64 too."""
    import base64

    raw = b'\x00,"\n\xff'
    inner = pa.struct([pa.field("k", pa.string()), pa.field("v", pa.binary())])
    fields = {"b": pa.binary(), "n": pa.list_(inner), "q": pa.string(), "s": pa.string()}
    schema = pa.schema([pa.field(n, t) for n, t in fields.items()])
    root = str(tmp_path / "log")
    log = arrowlog.connect(root)
    log.create_topic("t", schema)
    values = {
        "b": [raw, None],
        "n": [[{"k": 'a,"b"\nc', "v": b"\x01"}], None],
        "q": ['say "hi",\r\nbye', None],
        "s": ["", None],
    }
    log.append("t", pa.record_batch(values, schema=schema))

    def output(kind: str) -> str:
        done = subprocess.run(
            cli("consume", "t", "--output", kind), env=env(ARROWLOG_ROOT=root),
            capture_output=True, check=True,
        )  # fmt: skip
        return done.stdout.decode()  # as printed: a \r\n in a value stays one

    text = output("csv")
    lines = list(csv.DictReader(io.StringIO(text, newline="")))
    first, second = lines
    assert base64.b64decode(first["b"]) == raw
    assert json.loads(first["n"]) == [{"k": 'a,"b"\nc', "v": base64.b64encode(b"\x01").decode()}]
    assert first["q"] == 'say "hi",\r\nbye'
    assert (second["b"], second["n"], second["q"]) == ("", "", "")
    assert text.endswith(',""\n0,1,' + second["timestamp"] + ",,,,\n")

    records = [json.loads(line) for line in output("json").splitlines()]
    assert base64.b64decode(records[0]["value"]["b"]) == raw
    assert records[0]["value"]["n"][0]["v"] == "AQ=="
