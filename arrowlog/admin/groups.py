"""A consumer group's position and lag, as kafka-consumer-groups --describe
shows it."""

from __future__ import annotations

from dataclasses import dataclass

from arrowlog.errors import UnknownTopicOrPartitionError
from arrowlog.read.visibility import last_stable_offset
from arrowlog.txn.groups import GroupOffsets
from arrowlog.txn.view import LogView, incarnation_of


@dataclass(frozen=True)
class PartitionLag:
    """One partition of a consumer group's position (kafka-consumer-groups
    --describe). ``lag`` counts offsets up to the high watermark, as Kafka does;
    ``unstable``: an undecided transaction may still move the position."""

    topic: str
    partition: int
    current_offset: int | None
    log_start_offset: int
    log_end_offset: int
    last_stable_offset: int
    lag: int | None
    unstable: bool


def describe_group(log: LogView, group_id: str) -> list[PartitionLag]:
    """The group's position in every partition of the topics it has offsets
    for, with the lag behind each partition's end.

    Raises:
        UnknownTopicOrPartitionError: no such group.
    """
    groups = GroupOffsets(log.store, group_id, log.config.retry, resolver=log.resolver)
    if not groups.exists():
        raise UnknownTopicOrPartitionError(f"unknown consumer group {group_id!r}")
    offsets, unstable = groups.position(log.resolver, incarnation_of(log))
    decide = log.resolver.snapshot()
    rows = []
    for topic in sorted({t for t, _ in offsets} | {t for t, _ in unstable}):
        for p in range(log.topic(topic).partitions):
            part = log.partition(topic, p)
            hw, state = part.state()
            current = offsets.get((topic, p))
            rows.append(
                PartitionLag(
                    topic, p, current, part.start_offset(), hw,
                    last_stable_offset(hw, state, decide, log_start=part.start_offset()),
                    None if current is None else max(0, hw - current),
                    (topic, p) in unstable,
                )
            )  # fmt: skip
    return rows
