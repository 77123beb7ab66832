"""Options several ``arrowlog`` subcommands share. What every command shares
(connection options, errors, exit codes) is the jobs' command-line frame,
:mod:`arrowlog.jobs.commandline`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

partitions_option = click.option(
    "--partition", "partitions", type=click.IntRange(min=0), multiple=True,
    help="A partition (repeatable). Default: every partition.",
)  # fmt: skip


def isolation_option(
    default: str, help: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    return click.option(
        "--isolation-level", type=click.Choice(["read_committed", "read_uncommitted"]),
        default=default, show_default=True, help=help,
    )  # fmt: skip
