"""Where a producer's batches go when the caller names no partition: by key,
the same in every process, or round-robin."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator

import crc32c

from arrowlog.txn.view import LogView


def key_partitions(values: Iterable[object], partitions: int) -> list[int]:
    """The partition of each key: CRC32C of the value's text modulo the partition
    count, the same in every process (``send_keyed`` and the Spark sink)."""
    return [crc32c.crc32c(str(v).encode()) % partitions for v in values]


class RoundRobin:
    """Each topic's partitions in turn, from a random one, so that producers
    started together do not all begin at partition 0."""

    def __init__(self, log: LogView) -> None:
        self._log = log
        #: topic -> (its partition count when the cycle was made, the cycle)
        self._cycles: dict[str, tuple[int, Iterator[int]]] = {}

    def next_partition(self, topic: str) -> int:
        count = self._log.topic(topic).partitions
        known, cycle = self._cycles.get(topic, (0, None))
        if cycle is None or known != count:  # first send, or partitions were added
            start = random.randrange(count)
            cycle = itertools.cycle([(start + i) % count for i in range(count)])
            self._cycles[topic] = (count, cycle)
        return next(cycle)
