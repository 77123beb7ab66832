"""``--output csv``: what a command prints on stdout is one CSV table (a
header, then lines of as many fields), whatever the command; sentences go to
stderr. Run as processes, as a script reading the output would."""

from __future__ import annotations

import csv
import io
import subprocess

import pytest

from tests.support.cli import build_mixed_log, cli, env, rows

TABLES = [
    ("topics list", ["topic"]),
    ("groups list", ["group"]),
    ("metrics", ["partition", "high_watermark", "last_stable_offset"]),
    ("metrics t", ["partition", "high_watermark", "last_stable_offset"]),
]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("csv") / "log")
    log = build_mixed_log(path)
    log.consumer(group_id="g").commit({("t", 0): 3})
    producer = log.producer(transactional_id="open")  # an active transactional id
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(42), partition=0)
    return path


@pytest.mark.parametrize(("line", "header"), TABLES, ids=[line for line, _ in TABLES])
def test_stdout_of_a_table_command_is_one_csv_table(
    root: str, line: str, header: list[str]
) -> None:
    """``topics list``/``groups list`` printed bare names without a header;
    ``metrics`` printed its "active transactional ids" sentence after the CSV."""
    done = subprocess.run(
        cli(*line.split(), "--output", "csv"), env=env(ARROWLOG_ROOT=root),
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    parsed = list(csv.reader(io.StringIO(done.stdout)))
    assert parsed[0][: len(header)] == header, done.stdout
    assert len(parsed) > 1 and {len(fields) for fields in parsed} == {len(parsed[0])}, done.stdout


def test_dump_refuses_csv_which_has_no_one_table_of_it(root: str) -> None:
    """A dump is a document (header lines, then sections of rows): under
    ``--output csv`` it printed them as they are, no CSV. It is refused, one
    line naming the outputs that hold it."""
    done = subprocess.run(
        cli("dump", "--topic", "t", "--offset", "0", "--output", "csv"),
        env=env(ARROWLOG_ROOT=root), capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert "--output table or json" in done.stderr and done.stderr.count("\n") == 1
