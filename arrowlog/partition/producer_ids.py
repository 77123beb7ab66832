"""Producer ids: each claimed once, anywhere, with put-if-absent. Idempotent
and transactional producers claim one each (:mod:`arrowlog.txn.producer_ids`);
a client staging plain appends claims one for them (:mod:`.staged`)."""

from __future__ import annotations

import random
import time

from arrowlog import _checked_json
from arrowlog.config import RetryPolicy
from arrowlog.storage import Store

PRODUCER_IDS_PREFIX = "_arrowlog/producer-ids/"
MAX_PRODUCER_ID = 2**62


def claim_producer_id(store: Store, transactional_id: str | None, retry: RetryPolicy) -> int:
    """A producer id no other producer has, anywhere: a random id claimed with
    put-if-absent (a collision, vanishingly rare, just draws again).

    A claim whose reply is lost is retried, until ``retry``'s deadline, with a
    new id: the old one may have been claimed, and then it is only never used.
    """
    return retry.call(lambda: _claim(store, transactional_id))


def _claim(store: Store, transactional_id: str | None) -> int:
    rng = random.SystemRandom()
    while True:
        pid = rng.randrange(1, MAX_PRODUCER_ID)
        body = _checked_json.dump(
            {"transactional_id": transactional_id, "created_ms": int(time.time() * 1000)}
        )
        try:
            store.put_if_absent(f"{PRODUCER_IDS_PREFIX}{pid:020d}", body)
            return pid
        except FileExistsError:
            continue
