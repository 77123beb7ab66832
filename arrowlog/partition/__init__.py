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

A commit object (``staged``) is such a segment that claims the offsets of the
staged batches it names: the chain and the argument are the same; why no
staged batch is committed twice is in docs/protocol.md, "Staged appends".

Parts, fields and the lock
--------------------------
A :class:`PartitionLog` (module ``log``) is composed of parts, as pyiceberg composes
a ``Table`` and its ``MaintenanceTable``: each part is a class of its own
module, owns its fields, and is handed the parts it calls (the listing is
handed the checkpoints part after both are made: a sync may have to reopen).
The other parts read the state part's fields and change them only through
its methods.

=====================  ================  ==============================================
part (module)          fields            guarded by ``Shared.lock``
=====================  ================  ==============================================
Shared (_base)         store, config,    no: set once
                       partition,
                       decide,
                       refresh_topic
Shared (_base)         topic, interval   yes: replaced by Listing (a later version) and
                                         by Checkpoints (the topic created anew)
KnownLog (known)       log_start,        yes; read-ahead threads read them without it
                       compacted         and raise them through Listing.learn_marks,
                                         which takes it
KnownLog (known)       window_start,     yes
                       base_state,
                       last_checkpoint,
                       tail, summaries,
                       end, last_base,
                       end_known_at,
                       stored
Checkpoints            opened, opening,  yes
(checkpoints)          cache
Appends (append)       own, in_doubt,    yes
                       stats
Staged (staged)        lost_at           yes
KnownLog (known)       committed         yes
=====================  ================  ==============================================

Listing (listing), Claims (claims), CompactedIndexes (indexes), Fetcher
(units), Reads (reads), BatchAppends (batches), Retention (retention) and
Compactions (compaction) own no fields.

``Shared.lock`` is one ``threading.RLock`` per partition, taken at the
entries: the public methods of Reads (not while segments are fetched),
Appends (``append``, ``append_control``, and each append of a stream),
Retention, Compactions (``write_compacted`` and ``keep_unreadable_copies``
only around what they read or raise of the state) and
``Checkpoints.opened_topic`` hold it; Listing, Checkpoints and the helpers of
Appends run with it held by their caller. Without it, read-ahead threads
(Fetcher) may learn a later version of the topic, ``compacted_through``
reads the mark, and a stream of appends reads ``end`` to encode the next
batch ahead (a guess, checked under the lock when the batch is put). The
process's cache of segment frames (``heads.HEADS``) has a lock of its own.
"""

from __future__ import annotations

from arrowlog.partition.append_result import AppendResult
from arrowlog.partition.checkpoints import PRODUCER_STATE_RETENTION_MS
from arrowlog.partition.compaction import CompactionRange
from arrowlog.partition.fetch import fetch_compacted, fetch_segment, projected
from arrowlog.partition.log import PartitionLog
from arrowlog.partition.retention import Orphan, Removal, VacuumPlan
from arrowlog.partition.units import CompactedRef, SegmentRef

__all__ = [
    "PRODUCER_STATE_RETENTION_MS",
    "AppendResult",
    "CompactedRef",
    "CompactionRange",
    "Orphan",
    "PartitionLog",
    "Removal",
    "SegmentRef",
    "VacuumPlan",
    "fetch_compacted",
    "fetch_segment",
    "projected",
]
