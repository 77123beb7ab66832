"""The command-line options both exports take (``arrowlog export-delta``,
``arrowlog export-iceberg``), and how they report where a run ended."""

from __future__ import annotations

import click

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
    """The offsets a run ended at, with the topic's incarnation after the first."""
    return str(offsets) if incarnation == 0 else f"{offsets} of incarnation {incarnation}"


__all__ = ["from_new_incarnation", "position", "skip_deleted"]
