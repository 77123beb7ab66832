"""The statistics the benchmarks print: percentiles of latencies and the
summary of one row of writers. Pure functions, no store and no clock."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, interpolated linearly
    between the two nearest ranks (numpy's default), so that p50 of an even
    count is the mean of the middle two.

    Raises:
        ValueError: ``values`` is empty or ``q`` is outside [0, 100].
    """
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside [0, 100]")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_ms(seconds: Sequence[float]) -> dict[str, float]:
    """p50 and p99 in milliseconds of latencies given in seconds, and how many."""
    return {
        "p50_ms": percentile(seconds, 50) * 1000,
        "p99_ms": percentile(seconds, 99) * 1000,
        "count": float(len(seconds)),
    }


@dataclass(frozen=True)
class WriterRun:
    """What one writer did in one row of ``seconds``: the appends acknowledged
    within them, each append's wall time (those acknowledged after the end
    too: the append a writer had started when time ran out), the lost races
    (conflicts) and retriable failures its client counted, and whether its
    last append was cut: given up on, still unacknowledged, its wait so far
    counted as its latency (a lower bound)."""

    appends: int
    latencies: Sequence[float]
    conflicts: int
    failures: int = 0
    cut: int = 0


def summarize_row(runs: Sequence[WriterRun], seconds: float) -> dict[str, float]:
    """One row of the writers table: appends acknowledged within the row's
    ``seconds`` per second, the slowest and the fastest writer's appends among
    them, how many writers got none (starved), p50/p99 of every append's
    acknowledgement (a cut one's wait so far: with any cut, p99 is a lower
    bound), conflicts per append (of every append made), the appends
    acknowledged after the end, and those cut.

    Raises:
        ValueError: no writers, or no writer got an append acknowledged.
    """
    if not runs:
        raise ValueError("a row without writers")
    latencies = [t for r in runs for t in r.latencies]
    if not latencies:
        raise ValueError("no writer got an append acknowledged")
    total = sum(r.appends for r in runs)
    cut = sum(r.cut for r in runs)
    counts = [r.appends for r in runs]
    return {
        "writers": float(len(runs)),
        "appends": float(total),
        "appends_per_s": total / seconds,
        "slowest": float(min(counts)),
        "fastest": float(max(counts)),
        "starved": float(counts.count(0)),
        **latency_ms(latencies),
        "conflicts_per_append": sum(r.conflicts for r in runs) / len(latencies),
        "late": float(len(latencies) - total - cut),
        "cut": float(cut),
        "failures": float(sum(r.failures for r in runs)),
    }
