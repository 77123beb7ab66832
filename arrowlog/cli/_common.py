"""Options several ``arrowlog`` subcommands share. What every command shares
(connection options, errors, exit codes) is the jobs' command-line frame,
:mod:`arrowlog.jobs.commandline`."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import click

from arrowlog.config import DAY_MS

#: units of a size in bytes, and of a duration in milliseconds
BYTE_UNITS = {"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "b": 1}
DURATION_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": DAY_MS}
SIZE_EXAMPLE = "a size (like 67108864 or 64MiB)"
DURATION_EXAMPLE = "a duration (like 604800000 or 7d)"


def with_units(value: str, units: dict[str, int], example: str) -> int:
    """An int, or an int with one of ``units`` (case and spaces ignored), as
    that many times the unit's factor.

    Raises:
        ValueError: neither; the message says ``example``.
    """
    text = value.strip().lower().replace(" ", "")
    for unit, factor in units.items():
        if text.endswith(unit) and re.fullmatch(r"\d+", text[: -len(unit)]):
            return int(text[: -len(unit)]) * factor
    if re.fullmatch(r"\d+", text):
        return int(text)
    raise ValueError(f"{value!r} is not {example}")


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
