"""The ``arrowlog`` command line: what a Kafka operator expects, for a log in an
object store. One module per concept: topics, console (produce, consume),
groups, transactions (and producers, metrics), offsets (get-offsets, dump),
retention (delete-records, compact, vacuum), s3-server, spark-jar, doctor; and the jobs' own
commands (:mod:`arrowlog.jobs`: load/backfill, export-delta, export-iceberg),
which run in the frame every command shares (:mod:`arrowlog.jobs.commandline`).
docs/cli.md has the tour and the exit codes."""

from __future__ import annotations

import click

import arrowlog
from arrowlog.cli.console import consume, produce
from arrowlog.cli.doctor import doctor
from arrowlog.cli.groups import groups
from arrowlog.cli.offsets import dump, get_offsets
from arrowlog.cli.retention import compact, delete_records, vacuum
from arrowlog.cli.s3server import s3_server
from arrowlog.cli.sparkjar import spark_jar
from arrowlog.cli.topics import topics
from arrowlog.cli.transactions import metrics, producers, transactions
from arrowlog.jobs import backfill, export_delta, export_iceberg
from arrowlog.jobs.commandline import CONTEXT_SETTINGS, run, with_examples

__all__ = ["cli", "main"]


@click.group(context_settings=CONTEXT_SETTINGS)
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
                get_offsets, dump, delete_records, compact, vacuum, backfill.command,
                export_delta.command, export_iceberg.command, s3_server, spark_jar,
                doctor):  # fmt: skip
    cli.add_command(command)
cli.add_command(backfill.command, name="backfill")


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code (docs/cli.md)."""
    return run(cli, argv)
