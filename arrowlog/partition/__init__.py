"""One partition's log: contiguous offsets claimed by put-if-absent.

The append protocol, and why it cannot leave gaps or overlaps
-------------------------------------------------------------
The object at ``segment_key(N)`` *is* the claim on offset N, and a writer only
ever writes at an offset where it knows a segment ends (or at the log start of
an empty partition). By induction the segments form one chain
``0 = b0 < b1 < ...`` with ``b[i+1] = b[i] + count[i]``: a write at the end of a
segment that is not the last finds the key taken and fails; a write at the end
of the last one extends the chain. Nothing else is ever written in
``segments/`` but markers (topic changes, log starts, compaction marks) under
names no segment has (sorted after every segment). There is no "reserve, then write" step whose
crash could leave a hole. See docs/protocol.md for the whole argument.

A lost reply is resolved by reading back what sits at the offset and comparing
its ``append_id`` with ours, never by retrying blindly, so an acknowledged batch
is in the log exactly once.

The package follows docs/protocol.md, one module per job, each layer built on
the one before: ``_base`` (what is known of the log), ``listing`` (the tail and
the listing rule), ``checkpoints`` (opening, windows, writing due ones),
``reads``, ``append``, ``retention`` and ``compaction``.
"""

from __future__ import annotations

from arrowlog.partition.append import AppendResult
from arrowlog.partition.checkpoints import PRODUCER_STATE_RETENTION_MS
from arrowlog.partition.compaction import CompactionRange, Compactions
from arrowlog.partition.fetch import fetch_compacted, fetch_segment, projected
from arrowlog.partition.reads import CompactedRef, SegmentRef
from arrowlog.partition.retention import Removal

__all__ = [
    "PRODUCER_STATE_RETENTION_MS",
    "AppendResult",
    "CompactedRef",
    "CompactionRange",
    "PartitionLog",
    "Removal",
    "SegmentRef",
    "fetch_compacted",
    "fetch_segment",
    "projected",
]


class PartitionLog(Compactions):
    """Appends to and reads from one partition. Thread-safe; one instance per
    partition per process is enough (``ArrowLog.partition`` caches them).

    ``decide`` (given by the ArrowLog) asks the coordinator log how a transaction
    ended; checkpoints use it to drop decided transactions from their open set.
    """
