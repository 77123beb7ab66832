"""Checkpoints: the segment index of a partition, in windows.

A checkpoint covers a *window* of exactly ``checkpoint_interval`` consecutive
segments, starting where the previous window ended (the first starts at the log
start). Windows are therefore a pure function of the log, so any two writers
that write the same checkpoint write the same facts, and put-if-absent lets one
of them win harmlessly.

Each checkpoint lists its segments' base offsets and sizes; the count of each
segment follows from the next base (the last one's from ``end``). Opening a
partition reads the newest checkpoint and lists the segments after it: a cost
independent of the log's history.
"""

from __future__ import annotations

from dataclasses import dataclass

from arrowlog import _checked_json
from arrowlog.errors import CorruptCheckpointError

CHECKPOINT_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    """Segments with bases ``bases`` covering offsets ``[start, end)``."""

    log_start: int
    start: int
    end: int
    bases: tuple[int, ...]
    sizes: tuple[int, ...]

    def to_json(self) -> bytes:
        return _checked_json.dump(
            {
                "v": CHECKPOINT_VERSION,
                "log_start": self.log_start,
                "start": self.start,
                "end": self.end,
                "bases": list(self.bases),
                "sizes": list(self.sizes),
            }
        )

    @classmethod
    def from_json(cls, raw: bytes | memoryview, *, key: str, start: int) -> Checkpoint:
        """Parse and check a checkpoint read from ``key``, whose name says it
        starts at ``start``.

        Raises:
            CorruptCheckpointError: unreadable or inconsistent.
        """
        fields = _checked_json.load(raw, key=key, error=CorruptCheckpointError)
        try:
            if fields.get("v") != CHECKPOINT_VERSION:
                raise ValueError(f"unsupported checkpoint version {fields.get('v')}")
            cp = cls(
                log_start=int(fields["log_start"]),
                start=int(fields["start"]),
                end=int(fields["end"]),
                bases=tuple(int(b) for b in fields["bases"]),
                sizes=tuple(int(s) for s in fields["sizes"]),
            )
        except (ValueError, TypeError, KeyError) as e:
            raise CorruptCheckpointError(f"unreadable checkpoint: {e}", key=key) from e
        ordered = all(a < b for a, b in zip(cp.bases, cp.bases[1:], strict=False))
        if (
            cp.start != start
            or not cp.bases
            or cp.bases[0] != cp.start
            or len(cp.bases) != len(cp.sizes)
            or not ordered
            or cp.end <= cp.bases[-1]
        ):
            raise CorruptCheckpointError("checkpoint contradicts its own key or offsets", key=key)
        return cp
