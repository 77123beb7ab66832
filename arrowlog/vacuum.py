"""Removing what no reader needs any more: for now, the segments of deleted
records (below the log start) once their topic's ``delete_delay_ms`` has
passed. See docs/protocol.md, "Deleting records"."""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from arrowlog.partition import Removal
from arrowlog.storage import Store

if TYPE_CHECKING:
    from arrowlog.log import ArrowLog

#: where the store's clock is read (an object written, read back and removed)
CLOCK_PREFIX = "_arrowlog/clock/"


def vacuum(
    log: ArrowLog, topics: Iterable[str] | None = None, *, dry_run: bool = False
) -> list[Removal]:
    """Remove what :meth:`PartitionLog.removable` names in every partition of
    ``topics`` (default: all), segments in offset order; return it. Idempotent:
    killed anywhere, a rerun finishes. With ``dry_run``, nothing is written or
    removed, and the delay is measured on this machine's clock instead of the
    store's (reading the store's clock writes an object).
    """
    names = log.list_topics() if topics is None else list(topics)
    now_ms = int(time.time() * 1000) if dry_run else store_now_ms(log.store, log)
    removed: list[Removal] = []
    for name in names:
        for part in log.iter_partitions(name):
            found = part.removable(now_ms)
            if not dry_run:
                for removal in found:
                    _delete(log, removal.key)
            removed += found
    return removed


def store_now_ms(store: Store, log: ArrowLog) -> int:
    """The store's clock, now: the modification time of an object written for
    it (then removed). Ages are measured on it, never on a client's clock."""
    key = f"{CLOCK_PREFIX}{uuid.uuid4().hex}.json"
    retry = log.config.retry
    retry.call(lambda: store.put_if_absent(key, json.dumps({"clock": True}).encode()))
    info = retry.call(lambda: store.head(key))
    _delete(log, key)
    if info.modified_ms is None:
        raise RuntimeError(f"the store reports no modification time for {key}")
    return info.modified_ms


def _delete(log: ArrowLog, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        log.config.retry.call(lambda: log.store.delete(key))
