"""A compactor (and vacuum) process for tests/maintenance/test_compaction_schedules.py,
SIGKILLed right after its k-th PUT or DELETE.

    python -m tests.support.compaction_worker --url U --options JSON
        --target BYTES --kill-after K [--vacuum]
"""

from __future__ import annotations

import argparse
import json

import arrowlog
from arrowlog.storage.url import open_store
from tests.support.schedules import FAST, die_after_writes


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--target", type=int, required=True)
    parser.add_argument("--kill-after", type=int, required=True)
    parser.add_argument("--vacuum", action="store_true")
    args = parser.parse_args()
    store = open_store(args.url, json.loads(args.options))
    die_after_writes(store, args.kill_after)
    log = arrowlog.connect(store, config=FAST)
    log.maintenance.compact(target_bytes=args.target)
    if args.vacuum:
        log.maintenance.vacuum()


if __name__ == "__main__":
    main()
