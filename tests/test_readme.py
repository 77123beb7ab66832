"""README.md's snippets work as written.

Each ```python block runs unchanged, in order, in one fresh interpreter started
in an empty directory outside the repository, with arrowlog as ``make setup``
installs it (no PYTHONPATH: a user who copies the snippets has none). The S3
snippet is pointed at the suite's SeaweedFS through the standard AWS variables
it reads, exactly as the README tells users; the Spark snippet builds its own
session, as the README tells users to (arrowlog.spark.configure). A
snippet that raises fails the test, naming its block.

Every ``arrowlog ...`` line of the shell blocks of the README and docs/cli.md
is parsed by the real command line (options, arguments and their types), without running it.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from arrowlog.cli import cli
from arrowlog.testing.seaweedfs import S3Server

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"

_PYTHON = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_SHELL = re.compile(r"^```(?:bash|sh)\n(.*?)^```$", re.DOTALL | re.MULTILINE)
_USES_SPARK = re.compile(r"\bspark\.")


def python_blocks() -> list[str]:
    return _PYTHON.findall(README.read_text())


def run_blocks(
    blocks: list[str], cwd: Path, env: dict[str, str], *, prelude: str = "", epilogue: str = ""
) -> str:
    """``prelude``, ``blocks`` and ``epilogue`` one after another in one fresh
    interpreter; on failure, the README block that raised is named."""
    program = ["import sys, traceback", "namespace = {'__name__': '__main__'}"]
    program.append(f"exec({prelude!r}, namespace)")
    for i, block in enumerate(blocks, 1):
        program.append(
            f"try:\n    exec(compile({block!r}, 'README.md python block {i}', 'exec'), namespace)\n"
            "except BaseException:\n    traceback.print_exc()\n    sys.exit(1)"
        )
        program.append(f"print('block {i} ran', flush=True)")
    program.append(f"exec({epilogue!r}, namespace)")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(program)],
        cwd=cwd,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return done.stdout


def s3_env(server: S3Server) -> dict[str, str]:
    """The variables the README's S3 snippet reads."""
    assert server.bucket == "arrowlog", "the README's snippet names the bucket arrowlog"
    return {
        "AWS_ENDPOINT_URL": server.endpoint,
        "AWS_ACCESS_KEY_ID": server.access_key,
        "AWS_SECRET_ACCESS_KEY": server.secret_key,
    }


def test_the_readme_has_the_snippets_these_tests_run() -> None:
    blocks = python_blocks()
    assert len(blocks) == 5
    assert sum("s3://" in b and "storage_options" in b for b in blocks) == 1
    assert sum(bool(_USES_SPARK.search(b)) for b in blocks) == 1


@pytest.mark.s3
def test_the_readme_python_snippets_run_as_written(s3_server: S3Server, tmp_path: Path) -> None:
    blocks = [b for b in python_blocks() if not _USES_SPARK.search(b)]
    check = (
        "assert c.committed('events', 0) == 4\n"
        "assert s3.end_offsets('events')[0] >= 2\n"
        "print('events', sum(log.end_offsets('events').values()))"
    )
    out = run_blocks(blocks, tmp_path, s3_env(s3_server), epilogue=check)
    assert f"block {len(blocks)} ran" in out
    # two batches of two in partition 0, one in partition 1, a stream of three in partition 2
    assert "events 12" in out
    # the first snippet's log is where a user running it would look for it
    assert (tmp_path / "quickstart-log" / "_arrowlog").is_dir()


@pytest.mark.s3
@pytest.mark.spark
@pytest.mark.slow
def test_the_readme_snippets_run_with_spark_in_a_default_session(
    s3_server: S3Server, tmp_path: Path
) -> None:
    env = {
        **s3_env(s3_server),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        # the snippet builds its own session: this machine's needs reach it as
        # spark-submit's (servers bind loopback only; no web UI)
        "PYSPARK_SUBMIT_ARGS": "--conf spark.ui.enabled=false "
        "--conf spark.driver.bindAddress=127.0.0.1 pyspark-shell",
    }
    check = (
        "rows = spark.read.format('arrowlog').option('topic', 'out').load(path).count()\n"
        "print('read', df.count(), 'out', rows)\n"
        "print('jvm', 'JVM reader' in df._jdf.queryExecution().executedPlan().toString())\n"
        "spark.stop()"
    )
    blocks = python_blocks()
    out = run_blocks(blocks, tmp_path, env, epilogue=check)
    assert f"block {len(blocks)} ran" in out
    assert "\njvm True" in out  # arrowlog.spark.configure gave the session the JVM reader
    # the Spark snippet read partition 0 of events from offset 2 (2 records) and
    # the other partitions from their starts (2 in partition 1, 6 in partition 2),
    # and appended them to out, which held the transaction's 2 records
    [(read, written)] = re.findall(r"^read (\d+) out (\d+)$", out, re.MULTILINE)
    assert (int(read), int(written)) == (10, 12)


def cli_lines(doc: Path) -> list[str]:
    """Every ``arrowlog ...`` command of ``doc``'s shell blocks."""
    lines = []
    for block in _SHELL.findall(doc.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            for command in re.split(r";|&&|\|", line.split("#", 1)[0]):
                command = re.sub(r"\s[<>]\s*\S+", "", command)  # redirections: the shell's
                if command.strip().startswith("arrowlog "):
                    lines.append(command.strip())
    return lines


def parse(argv: list[str]) -> click.Command:
    """Parse ``argv`` down the command tree as ``arrowlog`` would, without
    running the command: an unknown command or option, a missing argument or
    a bad value raises click's usage error. (The README puts no option before
    a subcommand.)"""
    command: click.Command = cli
    args = list(argv)
    while isinstance(command, click.Group):
        name = args.pop(0)
        sub = command.get_command(click.Context(command), name)
        if sub is None:
            raise click.UsageError(f"no such command {name!r}")
        command = sub
    command.make_context(command.name or "", args)
    return command


@pytest.mark.parametrize("doc", [README, ROOT / "docs" / "cli.md"], ids=lambda p: p.name)
def test_every_command_line_in_the_docs_parses(doc: Path) -> None:
    lines = cli_lines(doc)
    assert len(lines) >= 10
    for line in lines:
        parse(shlex.split(line)[1:])


def test_a_broken_command_line_would_be_caught() -> None:
    with pytest.raises(click.UsageError):
        parse(["consume", "events", "--max-record", "10"])
    with pytest.raises(click.UsageError):
        parse(["topics", "crate", "events"])
