"""An Iceberg exporter as a child process, for the crash and race tests:
``python -m tests.support.export_iceberg_worker --root URL --warehouse DIR ...``.

``--kill-at`` makes the process SIGKILL itself at one point of the table commit
(a real kill: no ``finally``, no cleanup, files left as they are):

- ``before-commit``: the data files and manifests are written, the catalog has
  not been asked to commit;
- ``metadata-written``: the new table metadata file is written too, the
  catalog's pointer has not moved;
- ``after-commit``: the catalog has committed, the exporter has not returned.

``--barrier DIR --parties N``: every process waits at its commit until N have
reached theirs, so that they all commit on top of the same snapshot.
Each finished export prints one JSON line: rows, offsets, snapshot, attempts.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from pyiceberg.catalog.sql import SqlCatalog

import arrowlog
from arrowlog.jobs.export_iceberg import CatalogConfig, export


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _wait_for(barrier: Path, parties: int) -> None:
    barrier.mkdir(parents=True, exist_ok=True)
    (barrier / str(os.getpid())).touch()
    give_up = time.monotonic() + 60
    while len(list(barrier.iterdir())) < parties:
        if time.monotonic() > give_up:
            raise TimeoutError(
                f"only {len(list(barrier.iterdir()))} of {parties} reached {barrier}"
            )
        time.sleep(0.01)


def _schedule(kill_at: str, barrier: Path | None, parties: int) -> None:
    original = SqlCatalog.commit_table
    first = [True]

    def commit_table(self: SqlCatalog, *args: Any, **kwargs: Any) -> Any:
        if barrier is not None and first[0]:
            first[0] = False
            _wait_for(barrier, parties)
        if kill_at == "before-commit":
            _die()
        if kill_at == "metadata-written":
            write = self._write_metadata

            def write_then_die(*a: Any, **k: Any) -> None:
                write(*a, **k)
                _die()

            self._write_metadata = write_then_die  # type: ignore[method-assign]
        response = original(self, *args, **kwargs)
        if kill_at == "after-commit":
            _die()
        return response

    SqlCatalog.commit_table = commit_table  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--warehouse", required=True)
    parser.add_argument("--topic", default="t")
    parser.add_argument("--table", default="ns.events")
    parser.add_argument(
        "--kill-at",
        choices=["none", "before-commit", "metadata-written", "after-commit"],
        default="none",
    )
    parser.add_argument("--barrier")
    parser.add_argument("--parties", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    _schedule(args.kill_at, Path(args.barrier) if args.barrier else None, args.parties)
    log = arrowlog.connect(args.root, json.loads(args.options))
    catalog = CatalogConfig.sqlite(args.warehouse).open()
    for _ in range(args.rounds):
        done = export(log, args.topic, args.table, catalog=catalog)
        print(json.dumps({"rows": done.rows, "offsets": done.offsets,
                          "snapshot": done.snapshot_id, "attempts": done.attempts}),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
