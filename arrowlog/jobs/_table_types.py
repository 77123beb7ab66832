"""The column types an export writes into a table format (Delta, Iceberg): each
Arrow type of a topic mapped onto one the format holds without loss, or
refused before anything is written. The formats differ in a few places,
named by :class:`TableTypes`; the rest of the mapping is shared."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from arrowlog.errors import UnsupportedTypeError
from arrowlog.read.scan import output_schema


@dataclass(frozen=True)
class TableTypes:
    """Where a table format's types differ."""

    #: the format's name, in messages
    name: str
    #: what uint8, uint16 and uint32 become (uint64 is decimal(20, 0) everywhere,
    #: as Spark reads Parquet's UINT_64)
    unsigned: tuple[pa.DataType, pa.DataType, pa.DataType]
    #: int8 and int16 widened to int (the format has no narrower integers)
    widen_small_ints: bool = False
    #: times of day, as microseconds
    times: bool = False
    #: nanosecond timestamps, written as microseconds (a value that is not a
    #: whole microsecond is refused by the cast)
    nanoseconds: bool = False
    #: the null type
    nulls: bool = False

    def schema(self, topic_schema: pa.Schema) -> pa.Schema:
        """The schema an export writes: the topic's columns and the metadata
        columns (:func:`arrowlog.read.scan.output_schema`), each type mapped.

        Raises:
            UnsupportedTypeError: a column has no type of the format that
                holds it without loss. Nothing was written.
        """
        return pa.schema([self._field(f, f.name) for f in output_schema(topic_schema)])

    def _field(self, f: pa.Field[Any], path: str) -> pa.Field[Any]:
        return pa.field(f.name, self._type(f.type, path), nullable=f.nullable)

    def _type(self, t: pa.DataType, path: str) -> pa.DataType:
        if pa.types.is_dictionary(t):
            return self._type(t.value_type, path)
        if pa.types.is_unsigned_integer(t):
            widths = dict(zip((8, 16, 32), self.unsigned, strict=True))
            return widths.get(t.bit_width, pa.decimal128(20, 0))
        if self.widen_small_ints and (pa.types.is_int8(t) or pa.types.is_int16(t)):
            return pa.int32()
        if pa.types.is_string_view(t):
            return pa.string()
        if pa.types.is_binary_view(t):
            return pa.binary()
        if pa.types.is_date64(t):
            return pa.date32()  # a safe cast: a value that is not a whole day raises
        if pa.types.is_float16(t):
            return pa.float32()
        if self.times and pa.types.is_time32(t):
            return pa.time64("us")
        if pa.types.is_timestamp(t) and (t.unit != "ns" or self.nanoseconds):
            return pa.timestamp("us", tz="UTC" if t.tz is not None else None)
        if pa.types.is_decimal256(t) and t.precision <= 38:
            return pa.decimal128(t.precision, t.scale)
        if pa.types.is_struct(t):
            if t.num_fields == 0:
                raise UnsupportedTypeError(
                    f"column {path!r} is a struct without fields: Parquet, hence {self.name}, "
                    "cannot hold one; nothing was written"
                )
            fields = [t.field(i) for i in range(t.num_fields)]
            return pa.struct([self._field(f, f"{path}.{f.name}") for f in fields])
        if pa.types.is_map(t):
            key = self._field(t.key_field, f"{path}.key")
            item = self._field(t.item_field, f"{path}.value")
            # fields keep the value's nullability; pyarrow-stubs accept only types here
            return pa.map_(key, item)  # type: ignore[call-overload,no-any-return]
        if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
            return pa.list_(self._field(t.value_field, f"{path}.element"))
        if (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_boolean(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_binary(t)
            or pa.types.is_large_binary(t)
            or pa.types.is_fixed_size_binary(t)
            or pa.types.is_date32(t)
            or pa.types.is_decimal128(t)
            or (self.times and t == pa.time64("us"))
            or (self.nulls and pa.types.is_null(t))
        ):
            return t
        raise UnsupportedTypeError(
            f"column {path!r} is {t}: {self.name} has no type that holds it without loss"
            + (" (its times and timestamps are microseconds)" if "[ns" in str(t) else "")
            + "; nothing was written"
        )
