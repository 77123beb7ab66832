"""Backfill: bulk-load a Parquet, CSV or Arrow file into one partition of a topic
with expected offsets. Kill it at any moment and run it again: it resumes where
the log really ends, and the partition holds the input exactly once, in order.

The job is ``arrowlog backfill`` (the same command as ``arrowlog load``); this
module keeps its older calling convention, with the root first::

    python -m arrowlog.jobs.backfill ROOT TOPIC FILE [--partition 0] [--start-offset 0]
        [--rows-per-batch 65536] [--create] [--storage-options JSON] [--no-progress]
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    from arrowlog.cli import main as cli_main

    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        return cli_main(["backfill", *args])  # --help, or a usage error from click
    return cli_main(["backfill", "--root", args[0], *args[1:]])


if __name__ == "__main__":
    sys.exit(main())
