"""The processes of tests/log/test_topic_changes.py's races and crash:

    python -m tests.support.topic_change_worker {widen|delete} --url U --options JSON
        [--total N] [--kill-after N]

Each connects, prints ``READY``, waits for a line on stdin (so that racing
processes start together), then adds partitions up to ``--total`` (``widen``)
or deletes topic t (``delete``, SIGKILLed after its N-th DELETE with
``--kill-after``), and prints its result or typed error as JSON."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any

import arrowlog
from arrowlog.storage.url import open_store


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["widen", "delete"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--options", default="{}")
    parser.add_argument("--total", type=int, default=0)
    parser.add_argument("--kill-after", type=int, default=0, help="SIGKILL after N deletes")
    args = parser.parse_args(argv)
    store = open_store(args.url, json.loads(args.options))
    if args.kill_after:
        real_delete = store.delete
        done = [0]

        def delete(key: str) -> None:
            real_delete(key)
            done[0] += 1
            if done[0] >= args.kill_after:
                os.kill(os.getpid(), signal.SIGKILL)

        store.delete = delete  # type: ignore[method-assign]
    log = arrowlog.connect(store)
    log.list_topics()  # connected and imported before the race
    print("READY", flush=True)
    sys.stdin.readline()
    result: dict[str, Any]
    try:
        if args.kind == "widen":
            topic = log.create_partitions("t", args.total)
            result = {"version": topic.version, "partitions": topic.partitions}
        else:
            deletion = log.delete_topic("t")
            result = {
                "already_deleted": deletion.already_deleted,
                "tombstone": deletion.tombstone.change_id,
            }
    except arrowlog.ArrowLogError as e:
        result = {"error": type(e).__name__, "message": str(e)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
