"""Spark's Arrow data made the topic's: the topic's columns, cast to its types
without changing a value (Arrow's casts differ from Spark's here and there, and
some change values silently), metadata columns of a DataFrame read from
arrowlog dropped, nulls under not-null fields refused. The write path of the
Spark sink (:mod:`arrowlog.spark.sink`) runs every segment's rows through
:func:`conform`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import arrowlog
from arrowlog.scan import metadata_names
from arrowlog.topic import map_entries, not_null_violations

#: what each metadata column of a DataFrame read from arrowlog holds: a column
#: of that name and kind that the topic lacks is one, and is dropped; of another
#: kind it is the user's own, and refused like any other extra column
_METADATA_TYPES: dict[str, Callable[[pa.DataType], bool]] = {
    "topic": lambda t: pa.types.is_string(t) or pa.types.is_large_string(t),
    "partition": pa.types.is_integer,
    "offset": pa.types.is_integer,
    "timestamp": pa.types.is_timestamp,
}


def conform(batch: pa.RecordBatch, topic: arrowlog.Topic) -> pa.RecordBatch:
    """The topic's columns of ``batch``, cast to the topic's types (Spark's Arrow
    types differ in width, time zone and nullability flags; a cast that would
    change a value is refused). Metadata columns that the topic does not have
    (from a DataFrame read from arrowlog, under the names and of the types the
    read gave them) are dropped.

    Raises:
        SchemaMismatchError: a column is missing, extra, repeated, or cannot
            become the topic's type as it is; or a not-null field holds nulls.
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
        and not (n in metadata and _METADATA_TYPES[metadata[n]](batch.schema.field(n).type))
    ]
    if extra:
        raise arrowlog.SchemaMismatchError(
            f"the DataFrame has columns {extra} that topic {topic.name!r} does not"
        )
    columns = [cast_column(batch.column(f.name), f, topic) for f in schema]
    data = pa.RecordBatch.from_arrays(columns, schema=schema)
    # the same check as every append, here too for streaming writes, which stage
    # their rows and append them only in the driver's commit
    problems = not_null_violations(schema, data)
    if problems:
        raise arrowlog.SchemaMismatchError(f"topic {topic.name!r}: " + "; ".join(problems))
    return data


def cast_column(
    column: pa.Array[Any], field: pa.Field[Any], topic: arrowlog.Topic
) -> pa.Array[Any]:
    """``column`` as the topic's ``field`` types it, values unchanged.

    Raises:
        SchemaMismatchError: it cannot be, or not without changing values.
    """
    if pa.types.is_dictionary(column.type) and not pa.types.is_dictionary(field.type):
        column = column.dictionary_decode()  # type: ignore[attr-defined]  # judged by its values
    mismatch = _names_mismatch(column.type, field.type, field.name)
    if mismatch:
        raise arrowlog.SchemaMismatchError(f"topic {topic.name!r}: {mismatch}")
    try:
        # Cast to the type with every field nullable, then rebuild it as the
        # topic's: Arrow's cast (and view) refuses a null under a not-null
        # child even where a null parent hides it. not_null_violations checks
        # what is left.
        cast = _prepared(column, field.type).cast(_nullable(field.type))
        if cast.type != field.type:
            cast = _retyped(cast, field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise arrowlog.SchemaMismatchError(
            f"column {field.name!r} ({column.type}) cannot become {field.type}: {e}"
        ) from e
    try:
        changed = _changed(column, cast, field.name)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        # a timestamp on a day without a midnight where it is, for one
        raise arrowlog.SchemaMismatchError(
            f"column {field.name!r} ({column.type}) cannot become {field.type}: {e}"
        ) from e
    if changed:
        raise arrowlog.SchemaMismatchError(
            f"column {field.name!r} ({column.type}) cannot become {field.type}: {changed}"
        )
    return cast


def _prepared(column: pa.Array[Any], kind: pa.DataType) -> pa.Array[Any]:
    """``column`` made ready for Arrow's cast to ``kind`` where Arrow's own
    meaning differs from Spark's: a double into a decimal is the number it
    prints as (0.1 is 0.1, not its binary value 0.1000000000000000055...), and
    an instant into a timestamp without a time zone keeps its wall clock in its
    own time zone (Spark's session's), not UTC's."""
    if pa.types.is_floating(column.type) and pa.types.is_decimal(kind):
        return column.cast(pa.string())
    zoned = pa.types.is_timestamp(column.type) and column.type.tz is not None
    if zoned and pa.types.is_timestamp(kind) and kind.tz is None:
        local: pa.Array[Any] = pc.local_timestamp(column)  # type: ignore[call-overload]
        return local
    return column


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
    mask = array.is_null() if array.null_count else None
    if isinstance(array, pa.StructArray):
        children = [_retyped(array.field(i), kind.field(i).type) for i in range(kind.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(kind), mask=mask)
    if isinstance(array, pa.FixedSizeListArray):
        size = kind.list_size
        values = array.values.slice(array.offset * size, len(array) * size)
        return pa.FixedSizeListArray.from_arrays(
            _retyped(values, kind.value_type), type=kind, mask=mask
        )
    # lists and maps: offsets from 0 (a mask does not go with sliced offsets)
    offsets = array.offsets
    lo, hi = offsets[0].as_py(), offsets[-1].as_py()
    rebased = pc.subtract(offsets, lo)
    if isinstance(array, pa.MapArray):
        keys = _retyped(array.keys.slice(lo, hi - lo), kind.key_type)
        items = _retyped(array.items.slice(lo, hi - lo), kind.item_type)
        return pa.MapArray.from_arrays(rebased, keys, items, type=kind, mask=mask)
    values = _retyped(array.values.slice(lo, hi - lo), kind.value_type)
    lists = pa.LargeListArray if isinstance(array, pa.LargeListArray) else pa.ListArray
    return lists.from_arrays(rebased, values, type=kind, mask=mask)


def _changed(source: pa.Array[Any], cast: pa.Array[Any], path: str) -> str | None:
    """What Arrow's safe cast of ``source`` to ``cast`` changed, at any depth,
    or None. It lets a timestamp lose its time of day into a date and its date
    into a time, a number too large for a float become infinite, an integer
    other than 0 or 1 become a boolean, a double round into a decimal."""
    if source.type == cast.type:
        return None
    if isinstance(source, pa.StructArray) and isinstance(cast, pa.StructArray):
        pairs = list(zip(source.flatten(), cast.flatten(), strict=True))
        names = [cast.type.field(i).name for i in range(cast.type.num_fields)]
        found = (_changed(a, b, f"{path}.{n}") for (a, b), n in zip(pairs, names, strict=True))
        return next((f for f in found if f), None)
    # a map is a list of key-value structs (and a subclass of ListArray)
    if isinstance(source, pa.MapArray) or isinstance(cast, pa.MapArray):
        before, after = _entries(source), _entries(cast)
        if before is None or after is None:
            return None
        return _changed(before[0], after[0], f"{path}.key") or _changed(
            before[1], after[1], f"{path}.value"
        )
    lists = (pa.ListArray, pa.LargeListArray, pa.FixedSizeListArray)
    if isinstance(source, lists) and isinstance(cast, lists):
        return _changed(source.flatten(), cast.flatten(), f"{path}.item")
    return _value_change(source, cast, path)


def _value_change(source: pa.Array[Any], cast: pa.Array[Any], path: str) -> str | None:
    """:func:`_changed` for the values of one column (no children)."""
    kind, to = source.type, cast.type
    if pa.types.is_timestamp(kind) and pa.types.is_time(to):
        return f"{path} would lose its date"
    if pa.types.is_timestamp(kind) and pa.types.is_date(to):
        # the date of each instant where the timestamp's time zone has it (as
        # Arrow takes it, and Spark in its session's time zone)
        same = pc.equal(pc.floor_temporal(source, 1, "day"), source)
        return f"{path} has a time of day" if _some_false(same) else None
    temporal = (pa.types.is_timestamp, pa.types.is_date, pa.types.is_time, pa.types.is_duration)
    if pa.types.is_integer(to) and any(is_kind(kind) for is_kind in temporal):
        return f"{path} would become a bare count of its units"
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
    numeric = pa.types.is_integer(kind) or pa.types.is_floating(kind)
    if pa.types.is_boolean(to) and numeric:
        zero, one = pa.scalar(0, kind), pa.scalar(1, kind)
        bits = pc.or_(pc.equal(source, zero), pc.equal(source, one))  # nulls stay null
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
