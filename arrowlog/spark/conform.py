"""Spark's Arrow data made the topic's: the topic's columns, cast to its types
without changing a value (Arrow's casts differ from Spark's here and there, and
some change values silently), metadata columns of a DataFrame read from
arrowlog dropped, nulls under not-null fields refused. The write path of the
Spark sink (:mod:`arrowlog.spark.sink`) runs every segment's rows through
:func:`conform`.

Where Spark's own CAST needs the session's time zone (an instant into a wall
clock and back, a date into an instant), the values are those Spark's CAST
gives in that zone: :func:`~arrowlog.spark.time_zones.session_time_zone` says
which it is."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import arrowlog
from arrowlog.format.topic import map_entries, not_null_violations
from arrowlog.read.scan import metadata_names
from arrowlog.spark.time_zones import (
    instants_of,
    known_zone,
    session_time_zone,
    time_zone,
    wall_clocks,
)

#: what each metadata column of a DataFrame read from arrowlog holds: a column
#: of that name and kind that the topic lacks is one, and is dropped; of another
#: kind it is the user's own, and refused like any other extra column
METADATA_TYPES: dict[str, Callable[[pa.DataType], bool]] = {
    "topic": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "partition": pa.types.is_integer,
    "offset": pa.types.is_integer,
    "timestamp": pa.types.is_timestamp,
}

#: how Arrow refuses a cast (a map into a list of other than pairs is a type error)
_REFUSALS = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError)


def conform(
    batch: pa.RecordBatch, topic: arrowlog.Topic, *, zone: str | None = None
) -> pa.RecordBatch:
    """The topic's columns of ``batch``, cast to the topic's types (Spark's Arrow
    types differ in width, time zone and nullability flags; a cast that would
    change a value is refused), as Spark's CAST gives them in the session's
    time zone ``zone`` (by default :func:`session_time_zone`'s). Metadata
    columns that the topic does not have (from a DataFrame read from arrowlog,
    under the names and of the types the read gave them) are dropped.

    Raises:
        SchemaMismatchError: a column is missing, extra, repeated, or cannot
            become the topic's type as it is; or a not-null field holds nulls,
            or a null-typed column (Spark's ``select null``) goes into one.
        InvalidConfigError: a wall clock or a date becomes an instant, and the
            session's time zone cannot be known.
    """
    schema = topic.schema
    names = batch.schema.names
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise arrowlog.SchemaMismatchError(f"the DataFrame has columns {repeated} more than once")
    missing = [n for n in schema.names if n not in names]
    if missing:
        raise arrowlog.SchemaMismatchError(
            f"the DataFrame lacks columns {missing} of topic {topic.name!r}"
        )
    metadata = {name: column for column, name in metadata_names(schema).items()}
    extra = [
        n
        for n in names
        if n not in schema.names
        and not (n in metadata and METADATA_TYPES[metadata[n]](batch.schema.field(n).type))
    ]
    if extra:
        raise arrowlog.SchemaMismatchError(
            f"the DataFrame has columns {extra} that topic {topic.name!r} does not"
        )
    given = batch.schema
    void = [f.name for f in schema if not f.nullable and pa.types.is_null(given.field(f.name).type)]
    if void:
        # Spark's `select null x` is a column of nulls and nothing else, whatever
        # its rows: refused by its type, before a row is seen
        raise arrowlog.SchemaMismatchError(
            f"columns {void} of the DataFrame hold only nulls (Spark's NullType), but topic "
            f"{topic.name!r} has them not null"
        )
    zone = zone or session_time_zone(batch.schema.types)
    columns = [cast_column(batch.column(f.name), f, topic, zone=zone) for f in schema]
    data = pa.RecordBatch.from_arrays(columns, schema=schema)
    # the same check as every append, here too for streaming writes, which stage
    # their rows and append them only in the driver's commit
    problems = not_null_violations(schema, data)
    if problems:
        raise arrowlog.SchemaMismatchError(f"topic {topic.name!r}: " + "; ".join(problems))
    return data


def cast_column(
    column: pa.Array[Any], field: pa.Field[Any], topic: arrowlog.Topic, *, zone: str | None = None
) -> pa.Array[Any]:
    """``column`` as the topic's ``field`` types it, values unchanged: as Spark's
    CAST gives them in the session's time zone ``zone`` (by default
    :func:`session_time_zone`'s).

    Raises:
        SchemaMismatchError: it cannot be, or not without changing values.
        InvalidConfigError: a wall clock or a date becomes an instant, and the
            session's time zone cannot be known.
    """
    if pa.types.is_dictionary(column.type) and not pa.types.is_dictionary(field.type):
        column = column.dictionary_decode()  # type: ignore[attr-defined]  # judged by its values
    given = column.type
    mismatch = _names_mismatch(given, field.type, field.name)
    if mismatch:
        raise arrowlog.SchemaMismatchError(f"topic {topic.name!r}: {mismatch}")
    zone = time_zone(zone) if zone else session_time_zone([given])
    try:
        # Spark names its session's zone on the instants' type as it was set
        # ('Z', 'PST', '-13:33:33'), which Arrow may not know: every cast here
        # takes the zone from ``zone``, so the name can go (the instants stay)
        column = column.cast(_nullable(_in_utc(given))) if _in_utc(given) != given else column
        # Cast to the type with every field nullable, then rebuild it as the
        # topic's: Arrow's cast (and view) refuses a null under a not-null
        # child even where a null parent hides it. not_null_violations checks
        # what is left.
        prepared = _prepared(column, field.type, zone)
        cast: pa.Array[Any] = prepared.cast(_nullable(field.type))
        if not len(column):
            # Arrow refuses some casts only when there is a value to cast (a map
            # into a list of anything but pairs): the driver's check of the
            # schema, on no rows, tries one null
            pa.nulls(1, column.type).cast(_nullable(field.type))
        if cast.type != field.type:
            cast = _retyped(cast, field.type)
    except _REFUSALS as e:
        raise arrowlog.SchemaMismatchError(
            f"column {field.name!r} ({given}) cannot become {field.type}: {e}"
        ) from e
    try:
        changed = _changed(column, cast, field.name, zone)
    except _REFUSALS as e:
        raise arrowlog.SchemaMismatchError(
            f"column {field.name!r} ({given}) cannot become {field.type}: {e}"
        ) from e
    if changed:
        raise arrowlog.SchemaMismatchError(
            f"column {field.name!r} ({given}) cannot become {field.type}: {changed}"
        )
    return cast


def _in_utc(kind: Any) -> Any:
    """``kind`` with every timestamp with a time zone, at any depth, in UTC.
    (Typed Any: pyarrow's stubs know no nested type's parts.)"""
    if pa.types.is_timestamp(kind):
        return pa.timestamp(kind.unit, tz="UTC") if kind.tz is not None else kind
    if pa.types.is_struct(kind):
        return pa.struct([kind.field(i).with_type(_in_utc(kind.field(i).type))
                          for i in range(kind.num_fields)])  # fmt: skip
    if pa.types.is_map(kind):
        key = kind.key_field.with_type(_in_utc(kind.key_type))
        return pa.map_(key, kind.item_field.with_type(_in_utc(kind.item_type)))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_field.with_type(_in_utc(kind.value_type))
        return pa.list_(item) if pa.types.is_list(kind) else pa.large_list(item)
    if pa.types.is_fixed_size_list(kind):
        return pa.list_(kind.value_field.with_type(_in_utc(kind.value_type)), kind.list_size)
    return kind


def _prepared(column: Any, kind: Any, zone: str | None) -> Any:
    """``column`` made ready for Arrow's cast to ``kind``, at any depth, where
    Arrow's own meaning differs from Spark's CAST's: a double into a decimal is
    the number it prints as (0.1 is 0.1, not its binary value
    0.1000000000000000055...); an instant into a timestamp without a time zone
    keeps its wall clock in the session's time zone ``zone``, not UTC's, and
    into a date is the date of that wall clock; a timestamp without a time
    zone, and a date, into an instant is that wall clock (the date's first)
    in ``zone``. (Typed Any: pyarrow's stubs know no
    nested type's parts.)

    Raises:
        InvalidConfigError: ``zone`` is None where it is needed.
    """
    if _is_nested(column.type):
        if _prepares(column.type, kind):
            return _rebuilt(column, kind, lambda part, to: _prepared(part, to, zone))
        return column
    if pa.types.is_floating(column.type) and pa.types.is_decimal(kind):
        return column.cast(pa.string())
    instants = pa.types.is_timestamp(column.type) and column.type.tz is not None
    if instants and (pa.types.is_date(kind) or (pa.types.is_timestamp(kind) and kind.tz is None)):
        return wall_clocks(column, zone or column.type.tz)
    if not pa.types.is_timestamp(kind) or instants:
        return column
    if kind.tz is None or column.null_count == len(column):
        return column  # a wall clock or a date into a wall clock: no zone involved
    if pa.types.is_timestamp(column.type):
        return instants_of(column, known_zone(zone), date=False)
    if pa.types.is_date(column.type):
        return instants_of(column.cast(pa.timestamp("us")), known_zone(zone), date=True)
    return column


def _prepares(source: Any, kind: Any) -> bool:
    """Whether :func:`_prepared` changes a part of a ``source`` column for ``kind``."""
    if _is_nested(source):
        return any(_prepares(a, b) for a, b in _parts(source, kind))
    if pa.types.is_floating(source) and pa.types.is_decimal(kind):
        return True
    if pa.types.is_timestamp(source) and source.tz is not None:
        return pa.types.is_date(kind) or (pa.types.is_timestamp(kind) and kind.tz is None)
    if not pa.types.is_timestamp(kind):
        return False
    return bool((pa.types.is_timestamp(source) or pa.types.is_date(source)) and kind.tz is not None)


def _nullable(kind: pa.DataType) -> pa.DataType:
    """``kind`` with every field of every depth nullable."""
    if pa.types.is_struct(kind):
        return pa.struct(
            [kind.field(i).with_type(_nullable(kind.field(i).type)).with_nullable(True)
             for i in range(kind.num_fields)]
        )  # fmt: skip
    if pa.types.is_map(kind):
        key = kind.key_field.with_type(_nullable(kind.key_type))
        value = kind.item_field.with_type(_nullable(kind.item_type)).with_nullable(True)
        mapped: pa.DataType = pa.map_(key, value)  # type: ignore[call-overload]
        return mapped
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        item = kind.value_field.with_type(_nullable(kind.value_type)).with_nullable(True)
        listed: pa.DataType = pa.list_(item) if pa.types.is_list(kind) else pa.large_list(item)
        return listed
    if pa.types.is_fixed_size_list(kind):
        item = kind.value_field.with_type(_nullable(kind.value_type)).with_nullable(True)
        fixed: pa.DataType = pa.list_(item, kind.list_size)
        return fixed
    return kind


def _retyped(array: Any, kind: Any) -> Any:
    """``array`` as ``kind``, a type that differs from its own only in which
    fields may hold nulls, at any depth; no value is checked or copied. (Typed
    Any: pyarrow's stubs know no nested type's parts.)"""
    if array.type == kind:
        return array
    return _rebuilt(array, kind, _retyped, typed=True)


def _rebuilt(array: Any, kind: Any, part: Callable[[Any, Any], Any], *, typed: bool = False) -> Any:
    """A struct, list or map ``array`` made anew of ``part(child, its type in
    kind)`` for each of its children; of type ``kind`` if ``typed`` (its
    children must be of ``kind``'s types then), else of its new children's."""
    mask = array.is_null() if array.null_count else None
    if isinstance(array, pa.StructArray):
        children = [part(array.field(i), kind.field(i).type) for i in range(kind.num_fields)]
        if typed:
            return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
        names = [kind.field(i).name for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(children, names=names, mask=mask)
    if isinstance(array, pa.FixedSizeListArray):
        size = array.type.list_size
        values = part(array.values.slice(array.offset * size, len(array) * size), kind.value_type)
        fixed: Any = pa.FixedSizeListArray
        return fixed.from_arrays(
            values, type=kind if typed else pa.list_(values.type, size), mask=mask
        )
    # lists and maps: offsets from 0 (a mask does not go with sliced offsets)
    offsets = array.offsets
    lo, hi = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, lo)
    if isinstance(array, pa.MapArray):
        keys = part(array.keys.slice(lo, hi - lo), kind.key_type)
        items = part(array.items.slice(lo, hi - lo), kind.item_type)
        if typed:
            return pa.MapArray.from_arrays(rebased, keys, items, type=kind, mask=mask)
        return pa.MapArray.from_arrays(rebased, keys, items, mask=mask)
    values = part(array.values.slice(lo, hi - lo), kind.value_type)
    lists = pa.LargeListArray if isinstance(array, pa.LargeListArray) else pa.ListArray
    if typed:
        return lists.from_arrays(rebased, values, type=kind, mask=mask)
    return lists.from_arrays(rebased, values, mask=mask)


def _is_nested(kind: pa.DataType) -> bool:
    return bool(pa.types.is_struct(kind) or pa.types.is_map(kind) or _is_list(kind))


def _parts(source: Any, kind: Any) -> list[tuple[Any, Any]]:
    """The child types of nested type ``source`` beside those of ``kind``
    where both are of one shape (a struct's by position), else none."""
    if pa.types.is_struct(source) and pa.types.is_struct(kind):
        if source.num_fields != kind.num_fields:
            return []
        return [(source.field(i).type, kind.field(i).type) for i in range(kind.num_fields)]
    if pa.types.is_map(source) and pa.types.is_map(kind):
        return [(source.key_type, kind.key_type), (source.item_type, kind.item_type)]
    if _is_list(source) and _is_list(kind) and not pa.types.is_map(kind):
        return [(source.value_type, kind.value_type)]
    return []


def _changed(source: pa.Array[Any], cast: pa.Array[Any], path: str, zone: str | None) -> str | None:
    """What Arrow's safe cast of ``source`` to ``cast`` changed, at any depth,
    or None (instants are read in the session's time zone ``zone``). It lets
    a timestamp lose its time of day into a date and its date into a time, a
    number too large for a float become infinite, an integer other than 0 or
    1 become a boolean, a double round into a decimal."""
    if source.type == cast.type:
        return None
    if isinstance(source, pa.StructArray) and isinstance(cast, pa.StructArray):
        pairs = list(zip(source.flatten(), cast.flatten(), strict=True))
        names = [cast.type.field(i).name for i in range(cast.type.num_fields)]
        found = (
            _changed(a, b, f"{path}.{n}", zone) for (a, b), n in zip(pairs, names, strict=True)
        )
        return next((f for f in found if f), None)
    # a map is a list of key-value structs (and a subclass of ListArray)
    if isinstance(source, pa.MapArray) or isinstance(cast, pa.MapArray):
        before, after = _entries(source), _entries(cast)
        if before is None or after is None:
            return None
        return _changed(before[0], after[0], f"{path}.key", zone) or _changed(
            before[1], after[1], f"{path}.value", zone
        )
    lists = (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)
    if isinstance(source, lists) and isinstance(cast, lists):
        return _changed(source.flatten(), cast.flatten(), f"{path}.item", zone)
    return _value_change(source, cast, path, zone)


def _value_change(
    source: pa.Array[Any], cast: pa.Array[Any], path: str, zone: str | None
) -> str | None:
    """:func:`_changed` for the values of one column (no children)."""
    kind, to = source.type, cast.type
    if pa.types.is_timestamp(kind) and pa.types.is_time(to):
        return f"{path} would lose its date"
    if pa.types.is_timestamp(kind) and pa.types.is_date(to):
        # the date of each instant where the session's zone has it, as Spark's
        # CAST takes it: a midnight there (even one that occurs twice) is its
        # date, any other time of day a value the cast would change
        walls = wall_clocks(source, zone or kind.tz) if kind.tz is not None else source
        same = pc.equal(pc.floor_temporal(walls, 1, "day"), walls)
        return f"{path} has a time of day" if _some_false(same) else None
    if pa.types.is_timestamp(kind) and (pa.types.is_string(to) or pa.types.is_large_string(to)):
        return (
            f"{path} would be Arrow's text of a timestamp ('2024-01-02 03:04:05.000000+0530'), "
            "not Spark's CAST's ('2024-01-02 03:04:05' in the session's time zone): cast it "
            "in the query"
        )
    temporal = (pa.types.is_timestamp, pa.types.is_date, pa.types.is_time, pa.types.is_duration)
    if pa.types.is_integer(to) and any(is_kind(kind) for is_kind in temporal):
        return f"{path} would become a bare count of its units"
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)
    if numeric and any(is_kind(to) for is_kind in temporal):
        # Spark's CAST reads a number as seconds since the epoch (and has no
        # number into a date); Arrow's as a count of the column's units
        return (
            f"{path} is a number, which would become a count of {to}'s units (Spark's CAST "
            "reads seconds): cast it in the query"
        )
    if pa.types.is_floating(to):
        was = _infinities(source) if pa.types.is_floating(kind) else 0
        if _infinities(cast) > was:
            return f"{path} has a value out of range"
        if pa.types.is_floating(kind):
            zero = pa.scalar(0.0, kind)
            lost = pc.and_(pc.not_equal(source, zero), pc.equal(cast, pa.scalar(0.0, to)))
            if pc.any(lost).as_py():
                return f"{path} has a value too small for {to}"
        return None
    if pa.types.is_boolean(to) and (pa.types.is_integer(kind) or pa.types.is_floating(kind)):
        no, yes = pa.scalar(0, kind), pa.scalar(1, kind)
        bits = pc.or_(pc.equal(source, no), pc.equal(source, yes))  # nulls stay null
        return f"{path} has a value other than 0 or 1" if _some_false(bits) else None
    if pa.types.is_decimal(to) and pa.types.is_floating(kind):
        exact = pc.equal(cast.cast(kind), source)
        return f"{path} has a value the decimal cannot hold exactly" if _some_false(exact) else None
    return None


def _some_false(checks: pa.Array[Any]) -> bool:
    """Whether a check is false for some row (nulls are not)."""
    return pc.all(checks).as_py() is False


def _entries(array: pa.Array[Any]) -> tuple[pa.Array[Any], pa.Array[Any]] | None:
    """The keys and the values of a map, or of a list of two-field structs, or
    None."""
    if isinstance(array, pa.MapArray):
        return map_entries(array)
    if isinstance(array, pa.ListArray | pa.LargeListArray | pa.FixedSizeListArray):
        structs = array.flatten()
        if isinstance(structs, pa.StructArray) and structs.type.num_fields == 2:
            keys, values = structs.flatten()
            return keys, values
    return None


def _infinities(column: pa.Array[Any]) -> int:
    return int(pc.is_inf(column).true_count)


def _names_mismatch(source: pa.DataType, target: pa.DataType, path: str) -> str | None:
    """How the struct fields of ``source`` differ by name from ``target``'s, at
    any depth, or None. Arrow casts a struct by name: a field named otherwise
    (even in case only) would become nulls, an extra one would vanish."""
    if pa.types.is_struct(source) and pa.types.is_struct(target):
        have = [source.field(i).name for i in range(source.num_fields)]
        want = [target.field(i).name for i in range(target.num_fields)]
        if have != want:
            return f"struct {path!r} has fields {have} where the topic has {want}"
        pairs = [
            (source.field(i).type, target.field(i).type, f"{path}.{want[i]}")
            for i in range(len(want))
        ]
    elif pa.types.is_map(source) and pa.types.is_map(target):
        pairs = [
            (source.key_type, target.key_type, f"{path}.key"),
            (source.item_type, target.item_type, f"{path}.value"),
        ]
    elif _is_list(source) and _is_list(target):
        pairs = [(source.value_type, target.value_type, f"{path}.item")]  # type: ignore[attr-defined]
    else:
        return None
    for inner, outer, where in pairs:
        found = _names_mismatch(inner, outer, where)
        if found:
            return found
    return None


def _is_list(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    )


__all__ = ["cast_column", "conform"]
