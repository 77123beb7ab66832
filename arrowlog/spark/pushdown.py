"""Spark's pushed filters as a read plan's bounds and predicates: comparisons
on ``offset`` and ``timestamp`` as inclusive integer bounds, filters on a data
column as the predicates that rule out segments by their statistics."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
)

from arrowlog.errors import ArrowLogError
from arrowlog.format.stats import Predicate, check_predicates

#: the comparisons that become inclusive bounds on ``offset`` and ``timestamp``
COMPARISONS = (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)

_OPS: dict[type[Filter], str] = {
    EqualTo: "==",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
    In: "in",
    IsNull: "is null",
    IsNotNull: "is not null",
}


def usable(schema: pa.Schema, where: list[Predicate]) -> list[Predicate]:
    """The predicates pyarrow can apply to the topic's columns: the others (a
    value Spark typed otherwise) only cost the plan its pruning, as Spark
    filters the rows anyway."""
    kept = []
    for predicate in where:
        try:
            check_predicates(schema, [predicate])
        except ArrowLogError:
            continue
        kept.append(predicate)
    return kept


def predicate(f: Filter, columns: list[str]) -> Predicate | None:
    """A filter on a top-level data column as an arrowlog predicate, or None."""
    path: tuple[str, ...] = getattr(f, "attribute", ())
    op = _OPS.get(type(f))
    if op is None or len(path) != 1 or path[0] not in columns:
        return None
    value: Any = getattr(f, "value", None)
    if op == "in":
        return (path[0], op, [bytes(v) if isinstance(v, bytearray) else v for v in value])
    return (path[0], op, bytes(value) if isinstance(value, bytearray) else value)


def micros(value: Any) -> int:
    """A Spark timestamp filter value (a datetime) as microseconds since the epoch."""
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        delta = value - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
        return int((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)
    return int(value)


def bounds(f: Filter, to_int: Callable[[Any], int] = int) -> tuple[int | None, int | None]:
    """Inclusive integer bounds of a comparison filter."""
    value = to_int(f.value)  # type: ignore[attr-defined]
    if isinstance(f, EqualTo):
        return value, value
    if isinstance(f, GreaterThan):
        return value + 1, None
    if isinstance(f, GreaterThanOrEqual):
        return value, None
    if isinstance(f, LessThan):
        return None, value - 1
    return None, value


__all__ = ["COMPARISONS", "bounds", "micros", "predicate", "usable"]
