"""Where an appended batch landed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AppendResult:
    """Where an appended batch landed: offsets ``[base_offset, next_offset)``."""

    topic: str
    partition: int
    base_offset: int
    record_count: int

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.record_count
