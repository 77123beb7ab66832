"""Idempotent and transactional producers (KIP-98 on object storage).

An idempotent producer gets a producer id that no other producer anywhere ever
gets (claimed with put-if-absent), numbers its batches per partition, and resends
a batch whose outcome was unknown with the same sequence, so the partition
recognises it: every batch lands once.

A transactional producer keeps one producer id per transactional id in the
coordinator log. ``init_transactions`` bumps the epoch, which fences every older
instance, and finishes whatever the previous instance left. A transaction
registers each partition and consumer group in the coordinator log before it
writes there; ``commit_transaction`` writes PREPARE_COMMIT (the point of no
return), the COMMIT markers into every partition in parallel and the consumer
offsets, then COMPLETE_COMMIT.
"""

from arrowlog.producer._partitioning import key_partitions
from arrowlog.producer._producer import Producer
from arrowlog.producer._state import ProducerState
from arrowlog.txn.finish import fence_and_recover, finish
from arrowlog.txn.producer_ids import allocate_producer_id

__all__ = [
    "Producer",
    "ProducerState",
    "allocate_producer_id",
    "fence_and_recover",
    "finish",
    "key_partitions",
]
