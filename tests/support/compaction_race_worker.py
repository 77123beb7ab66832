"""The writer and compactor processes of
tests/maintenance/test_compaction.py's race of writers and compactors:

    python -m tests.support.compaction_race_worker write --writer W --url U --options JSON
    python -m tests.support.compaction_race_worker compact --kill-after K --url U --options JSON

A writer prints ``[offset, value]`` of every record acknowledged (an aborted
one with its value negative); a compactor compacts and vacuums, SIGKILLed
right after its K-th PUT or DELETE."""

from __future__ import annotations

import argparse
import json
import sys

import arrowlog
from arrowlog.maintenance.compaction import MIN_TARGET_BYTES
from arrowlog.storage.url import open_store
from tests.support.schedules import FAST, die_after_writes, rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["write", "compact"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--writer", type=int, default=0)
    parser.add_argument("--kill-after", type=int, default=0)
    args = parser.parse_args(argv)
    store = open_store(args.url, json.loads(args.options))
    if args.kind == "write":
        # Prints (offset, value) of every acknowledged record; aborted ones
        # get a negative value (never visible).
        log = arrowlog.connect(store, config=FAST)
        tx = log.producer(transactional_id=f"w{args.writer}")
        tx.init_transactions()
        for i in range(150):
            value = args.writer * 1000 + i
            if i % 3:
                result = log.append("t", rows(value))
                print(json.dumps([result.base_offset, value]), flush=True)
                continue
            tx.begin_transaction()
            sent = tx.send("t", rows(value))
            tx.flush()
            abort = i % 2 == 1
            (tx.abort_transaction if abort else tx.commit_transaction)()
            print(json.dumps([sent.base_offset, -value if abort else value]), flush=True)
        return
    die_after_writes(store, args.kill_after)
    log = arrowlog.connect(store, config=FAST)
    log.maintenance.compact(target_bytes=MIN_TARGET_BYTES)
    log.maintenance.vacuum()


if __name__ == "__main__":
    main(sys.argv[1:])
