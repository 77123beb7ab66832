"""The statistics the benchmarks print (bench/figures.py): percentiles
interpolated between ranks, latencies in milliseconds, and one row of the
writers table from what each writer reported."""

from __future__ import annotations

import pytest

from bench.figures import WriterRun, latency_ms, percentile, summarize_row


def test_a_percentile_interpolates_between_the_two_nearest_ranks() -> None:
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == 2.5  # unordered input, even count
    assert percentile([1.0, 2.0, 3.0], 50) == 2.0
    assert percentile([float(v) for v in range(1, 101)], 99) == pytest.approx(99.01)
    assert percentile([7.0, 3.0, 5.0], 0) == 3.0
    assert percentile([7.0, 3.0, 5.0], 100) == 7.0
    assert percentile([5.0], 99) == 5.0


def test_a_percentile_of_nothing_or_outside_0_to_100_is_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
    for q in (-1, 101):
        with pytest.raises(ValueError, match="outside"):
            percentile([1.0], q)


def test_latencies_in_seconds_are_reported_in_milliseconds() -> None:
    figures = latency_ms([0.001 * v for v in range(1, 101)])
    assert figures["p50_ms"] == pytest.approx(50.5)
    assert figures["p99_ms"] == pytest.approx(99.01)
    assert figures["count"] == 100


def test_a_row_counts_the_appends_acknowledged_within_its_seconds() -> None:
    runs = [
        WriterRun(appends=300, latencies=[0.002] * 300, conflicts=30),
        # its last append was acknowledged after the row's end: not counted, but timed
        WriterRun(appends=99, latencies=[0.010] * 99 + [1.0], conflicts=70),
        WriterRun(appends=0, latencies=[], conflicts=5, failures=2),  # starved
    ]
    row = summarize_row(runs, seconds=4.0)
    assert row["writers"] == 3
    assert row["appends"] == 399
    assert row["appends_per_s"] == 399 / 4.0
    assert row["late"] == 1
    assert (row["slowest"], row["fastest"], row["starved"]) == (0, 300, 1)
    assert row["p50_ms"] == pytest.approx(2.0)  # over every append, not per writer
    assert row["p99_ms"] == pytest.approx(10.0)
    assert row["conflicts_per_append"] == 105 / 400  # of every append made
    assert row["failures"] == 2


def test_a_row_without_writers_or_without_any_append_is_refused() -> None:
    with pytest.raises(ValueError, match="without writers"):
        summarize_row([], 4.0)
    with pytest.raises(ValueError, match="no writer"):
        summarize_row([WriterRun(0, [], 3)], 4.0)
