"""A Delta exporter as a child process, for the race tests:
``python -m tests.support.export_delta_worker --root URL --delta PATH --rounds N ...``.

Each round is one export with a new connection to the log, as one run of
``arrowlog export-delta`` is; each prints one JSON line: rows, offsets,
incarnation, table version, attempts.
"""

from __future__ import annotations

import argparse
import json

import arrowlog
from arrowlog.jobs.export_delta import run_export


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--delta", required=True)
    parser.add_argument("--delta-options", default="{}")
    parser.add_argument("--topic", default="t")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    for _ in range(args.rounds):
        log = arrowlog.connect(args.root, json.loads(args.options))
        try:
            done = run_export(log, args.topic, args.delta,
                              delta_storage=json.loads(args.delta_options))  # fmt: skip
        finally:
            log.close()
        print(json.dumps({"rows": done.rows, "offsets": done.offsets,
                          "incarnation": done.incarnation, "version": done.table_version,
                          "attempts": done.attempts}),
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
