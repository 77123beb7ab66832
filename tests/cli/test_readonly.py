"""Read-only commands never write (not even a missing root's directory), every
command's help has examples, and storage options from the command line mean
what they say."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from arrowlog.cli import cli, main
from arrowlog.errors import InvalidConfigError
from arrowlog.jobs.command_store import coerce_option, parse_options
from arrowlog.storage.s3 import s3_options
from tests.support.cli import build_mixed_log, files, rows, run

READ_ONLY = [
    "topics list",
    "topics describe",
    "topics describe t",
    "consume t",
    "consume t --isolation-level read_uncommitted --output json",
    "consume t --partition 0 --offset 6 --max-records 1",
    "consume t --follow --timeout-ms 50 --poll-ms 10",
    "groups list",
    "groups describe g",
    "groups reset-offsets g --topic t --to-earliest",
    "transactions list",
    "transactions describe txn",
    "transactions find-hanging --all",
    "producers t",
    "metrics",
    "get-offsets t --time earliest",
    "dump --topic t --offset 0",
]
FAILING_READ_ONLY = [
    "topics describe nope",
    "consume nope",
    "consume t --partition 3",
    "groups describe nope",
    "transactions describe nope",
    "producers nope",
    "get-offsets nope",
    "dump --topic t --offset 99",
]


def test_read_only_commands_write_nothing(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = build_mixed_log(str(root))
    log.consumer(group_id="g").commit({("t", 0): 3})
    producer = log.producer(transactional_id="open")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("t", rows(42), partition=0)
    before = files(root)
    for line in READ_ONLY:
        run(capsys, *line.split())
        assert files(root) == before, line
    for line in FAILING_READ_ONLY:
        assert main(line.split()) != 0, line
        assert files(root) == before, line


@pytest.mark.parametrize("line", READ_ONLY + FAILING_READ_ONLY)
def test_a_missing_local_root_is_not_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str
) -> None:
    missing = tmp_path / "nothing" / "here"
    assert main([*line.split(), "--root", str(missing)]) == 3
    err = capsys.readouterr().err
    assert (
        err.strip()
        == f"arrowlog: RootNotFoundError: no arrowlog root at {missing}: no such directory"
    )
    assert not (tmp_path / "nothing").exists()


def test_an_empty_directory_stays_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "topics", "list", "--root", str(tmp_path)) == ""
    assert run(capsys, "groups", "list", "--root", f"file://{tmp_path}") == ""
    assert list(tmp_path.iterdir()) == []


def test_no_root_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARROWLOG_ROOT", raising=False)
    assert main(["topics", "list"]) == 2
    assert "no root: pass --root URL or set ARROWLOG_ROOT" in capsys.readouterr().err


def _leaves(group: click.Group, path: str = "") -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = [(path or "arrowlog", group)]
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            out += _leaves(command, f"{path} {name}".strip())
        else:
            out.append((f"{path} {name}".strip(), command))
    return out


@pytest.mark.parametrize(
    ("path", "command"), _leaves(cli), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_help_has_examples(
    path: str, command: click.Command, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [] if path == "arrowlog" else path.split()
    assert main([*argv, "--help"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"Examples:\n +(arrowlog|export|echo) ", out), out
    # commands that open no store (a server, the Spark jar) take no root
    if not isinstance(command, click.Group) and path not in ("s3-server", "spark-jar"):
        assert "ARROWLOG_ROOT" in out and "ARROWLOG_ENDPOINT_URL" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import arrowlog

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"arrowlog, version {arrowlog.__version__}"


def test_storage_options_are_coerced() -> None:
    assert coerce_option("anon", "false") is False
    assert coerce_option("anon", "True") is True
    assert coerce_option("max_retries", "5") == 5
    assert coerce_option("client_kwargs", '{"region_name": "us-east-1"}') == {
        "region_name": "us-east-1"
    }
    assert coerce_option("key", "abc") == "abc"
    # --option values stay text for connect to coerce by the key's kind
    options = parse_options(
        ("anon=false", 'client_kwargs={"a": 1}', "secret=12345"),
        '{"key": "k", "anon": true}',
        "http://127.0.0.1:1",
    )
    assert options == {
        "key": "k",
        "anon": "false",
        "client_kwargs": '{"a": 1}',
        "secret": "12345",
        "endpoint_url": "http://127.0.0.1:1",
    }
    coerced = s3_options(options)
    assert coerced["anon"] is False and coerced["client_kwargs"] == {"a": 1}
    assert coerced["secret"] == "12345"
    for bad in (("novalue",), ("=x",)):
        with pytest.raises(InvalidConfigError):
            parse_options(bad, None, None)
    with pytest.raises(InvalidConfigError, match="client_kwargs"):
        s3_options(parse_options(("client_kwargs={bad",), None, None))
    with pytest.raises(InvalidConfigError):
        parse_options((), "[1]", None)


def test_bad_storage_options_are_one_line(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_mixed_log(str(root))
    assert main(["topics", "list", "--option", "novalue"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["topics", "list", "--option", "colour=blue"]) == 2
    assert "unknown storage option 'colour'" in capsys.readouterr().err
    assert main(["topics", "create", "u", "--schema", "a: int8", "--option", "colour=blue"]) == 2
    assert "unknown storage option 'colour'" in capsys.readouterr().err
