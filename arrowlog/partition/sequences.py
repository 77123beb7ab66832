"""Staged objects as batches of a producer's sequence: which refs a commit of
their own writer may carry, and which staged batches a helper may (the next
of their producer's sequence in the chain it knows). See docs/protocol.md,
"Staged appends"."""

from __future__ import annotations

from collections.abc import Sequence

from arrowlog.errors import InvalidBatchError
from arrowlog.format.checkpoint import ProducerEntry
from arrowlog.format.segment import Ref, WriterIdentity
from arrowlog.format.topic import StagedName, parse_staged_name, staged_at
from arrowlog.partition.known import KnownLog

#: a commit names at most this many staged objects (its header then fits the
#: first bytes a listing reads)
MAX_REFS = 48


def check_own_refs(refs: Sequence[Ref]) -> None:
    """Refuse refs that one commit of their own writer cannot carry: none,
    more than :data:`MAX_REFS`, a key that is not a staged object's or whose
    name gives another record count, or batches that are not one producer's
    in sequence from the first.

    Raises:
        InvalidBatchError: they are not such refs.
    """
    if not 1 <= len(refs) <= MAX_REFS:
        raise InvalidBatchError(f"a commit names 1 to {MAX_REFS} staged objects, not {len(refs)}")
    first = refs[0].identity
    if first.producer_id < 0:
        raise InvalidBatchError("staged objects committed by their writer need a producer id")
    sequence = first.base_sequence
    for ref in refs:
        name = parse_staged_name(ref.at)
        if name is None or name.record_count != ref.record_count or staged_at(name) != ref.at:
            raise InvalidBatchError(
                f"{ref.at!r} is not a staged object of {ref.record_count} records"
            )
        who = ref.identity
        same = (who.producer_id, who.producer_epoch, who.transactional, who.transactional_id)
        if same != (first.producer_id, first.producer_epoch, first.transactional,
                    first.transactional_id) or who.control:  # fmt: skip
            raise InvalidBatchError("staged objects of one commit must be one producer's batches")
        if who.base_sequence != sequence:
            raise InvalidBatchError(
                f"staged object {ref.at!r} has sequence {who.base_sequence}, not {sequence}"
            )
        sequence += ref.record_count


class Sequences:
    """The producers' sequences as the chain known leaves them, and as the
    batches a commit plans to carry advance them."""

    def __init__(self, known: KnownLog) -> None:
        self._known = known
        self._latest: dict[int, ProducerEntry] | None = None

    def next_of(self, name: StagedName, mine: Ref | None) -> bool:
        """Whether ``name``'s batch follows its producer's latest; if so, it
        is planned."""
        if self._latest is None:
            state = self._known.tail_state()
            self._latest = dict(state.producers)
            if mine is not None and mine.identity.producer_id >= 0:
                self._plan(mine.identity.producer_id, mine.identity, mine.record_count)
        latest = self._latest.get(name.producer_id)
        if (
            latest is None
            or latest.producer_epoch != name.producer_epoch
            or name.base_sequence != latest.last_sequence + 1
        ):
            return False
        who = WriterIdentity(
            producer_id=name.producer_id, producer_epoch=name.producer_epoch,
            base_sequence=name.base_sequence,
        )  # fmt: skip
        self._plan(name.producer_id, who, name.record_count)
        return True

    def _plan(self, pid: int, who: WriterIdentity, count: int) -> None:
        assert self._latest is not None
        self._latest[pid] = ProducerEntry(pid, who.producer_epoch, who.base_sequence, count, -1, 0)
