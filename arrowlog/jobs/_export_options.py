"""The command-line options both exports take (``arrowlog export-delta``,
``arrowlog export-iceberg``), and how they report where a run ended."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import click

from arrowlog.jobs.commandline import interrupted, progress_bar

T = TypeVar("T")

from_new_incarnation = click.option(
    "--from-new-incarnation",
    is_flag=True,
    help="If TOPIC was deleted and created again since the table's last export, export "
    "the new topic from its start into the table. Without it such a run refuses "
    "(TopicRecreatedError) and writes nothing.",
)


skip_deleted = click.option(
    "--skip-deleted",
    is_flag=True,
    help="If records after the table's recorded offsets were deleted (retention, "
    "delete-records) before an export read them, skip them and export from the log start "
    "(Spark's failOnDataLoss=false). Without it such a run fails (OffsetOutOfRangeError) "
    "and writes nothing.",
)


def position(offsets: dict[str, int], incarnation: int) -> str:
    """The offsets a run ended at (``partition:offset``, in partition order),
    with the topic's incarnation after the first."""
    at = " ".join(f"{p}:{o}" for p, o in sorted(offsets.items(), key=lambda po: int(po[0])))
    text = f"offsets {at or '(no partition)'}"
    return text if incarnation == 0 else f"{text} of incarnation {incarnation}"


def run_with_progress(export: Callable[[Callable[[int, int], None]], T], *, enabled: bool) -> T:
    """``export(progress)`` under a progress bar of offsets; Ctrl-C stops it
    with one line. Nothing of an interrupted run counts unless its commit
    landed: the rerun finds out from the table itself."""
    total = [0]
    try:
        with progress_bar(None, "offsets", enabled=enabled) as bar:
            # shown once there is something to export: a run with nothing new
            # prints its one line, not an empty bar
            bar.update(bar.task_ids[0], visible=False)

            def advance(done: int, of: int) -> None:
                total[0] = of
                bar.update(bar.task_ids[0], completed=done, total=of, visible=of > 0)

            result = export(advance)
            bar.update(bar.task_ids[0], completed=total[0], total=total[0], visible=total[0] > 0)
    except KeyboardInterrupt:
        raise interrupted("the last committed export") from None
    return result


__all__ = ["from_new_incarnation", "position", "run_with_progress", "skip_deleted"]
