"""Benchmarks: ``python -m bench`` (or ``make bench``)."""
