"""Producer ids: each claimed once, anywhere, with put-if-absent."""

from __future__ import annotations

import random
import time

from arrowlog import _checked_json
from arrowlog.txn.coordinator import PRODUCER_IDS_PREFIX
from arrowlog.txn.view import LogView

MAX_PRODUCER_ID = 2**62


def allocate_producer_id(log: LogView, transactional_id: str | None) -> int:
    """A producer id no other producer has, anywhere: a random id claimed with
    put-if-absent (a collision, vanishingly rare, just draws again)."""
    rng = random.SystemRandom()
    while True:
        pid = rng.randrange(1, MAX_PRODUCER_ID)
        body = _checked_json.dump(
            {"transactional_id": transactional_id, "created_ms": int(time.time() * 1000)}
        )
        try:
            log.store.put_if_absent(f"{PRODUCER_IDS_PREFIX}{pid:020d}", body)
            return pid
        except FileExistsError:
            continue
