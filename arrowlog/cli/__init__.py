"""The ``arrowlog`` command line: what a Kafka operator expects, for a log in an
object store. One module per concept: topics, console (produce, consume),
groups, transactions (and producers, metrics), offsets (get-offsets, dump),
retention (delete-records, compact, vacuum), jobs (load/backfill, export-delta,
export-iceberg), s3-server. docs/cli.md has the tour and the exit codes."""

from __future__ import annotations

import os
import sys

import click

import arrowlog
from arrowlog.cli._common import (
    EXIT_BROKEN_PIPE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    with_examples,
)
from arrowlog.cli.console import consume, produce
from arrowlog.cli.groups import groups
from arrowlog.cli.jobs import export_delta, export_iceberg, load
from arrowlog.cli.offsets import dump, get_offsets
from arrowlog.cli.retention import compact, delete_records, vacuum
from arrowlog.cli.s3server import s3_server
from arrowlog.cli.topics import topics
from arrowlog.cli.transactions import metrics, producers, transactions

__all__ = ["cli", "main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(arrowlog.__version__, "--version", prog_name="arrowlog")
@click.option("--debug", is_flag=True, envvar="ARROWLOG_DEBUG", help="Tracebacks on errors.")
@with_examples(
    "export ARROWLOG_ROOT=/tmp/log          # or s3://bucket/prefix with ARROWLOG_ENDPOINT_URL",
    "arrowlog topics create events --schema 'id: int64, name: string' --partitions 2",
    'echo \'{"id": 1, "name": "a"}\' | arrowlog produce events',
    "arrowlog consume events --max-records 10",
    "arrowlog groups describe etl",
)
def cli(debug: bool) -> None:
    """arrowlog: a transactional, columnar log in an object store.

    Every command takes --root (or ARROWLOG_ROOT) and the storage options;
    `arrowlog COMMAND --help` shows them.
    """


for command in (topics, produce, consume, groups, transactions, producers, metrics,
                get_offsets, dump, delete_records, compact, vacuum, load, export_delta,
                export_iceberg, s3_server):  # fmt: skip
    cli.add_command(command)
cli.add_command(load, name="backfill")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (docs/cli.md)."""
    try:
        code = cli.main(args=argv, prog_name="arrowlog", standalone_mode=False)
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.ClickException as e:
        # one line, like every other error: click's own form takes four
        where = e.ctx.command_path if isinstance(e, click.UsageError) and e.ctx else "arrowlog"
        hint = f" (see {where} --help)" if isinstance(e, click.UsageError) else ""
        click.echo(f"{where}: error: {' '.join(e.format_message().split())}{hint}", err=True)
        code = EXIT_USAGE
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        code = EXIT_BROKEN_PIPE
    if code == EXIT_BROKEN_PIPE or _stdout_closed():
        # The reader went away (`| head`): silence the flush at exit, which
        # would print a BrokenPipeError of its own.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    return int(code or 0)


def _stdout_closed() -> bool:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return True
    except (OSError, ValueError):
        return False
    return False
