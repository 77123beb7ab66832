"""Spark's session time zone, as Spark's CAST uses it: which zone a session
means (:func:`time_zone`, java.time's reading of ``spark.sql.session.timeZone``),
where a Python writer can see it (:func:`session_time_zone`), and wall clocks
and instants converted in it as java.time converts them (:func:`instants_of`,
:func:`wall_clocks`)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from arrowlog.errors import InvalidConfigError

#: Spark's setting of a session's time zone; a task sees it as a local property
#: when the session set it (Spark hands its tasks every setting made)
SESSION_TIME_ZONE = "spark.sql.session.timeZone"


#: java.time's ZoneId.SHORT_IDS, the aliases Spark's session time zone takes
#: (Spark's DateTimeUtils.getZoneId is ZoneId.of with them)
SHORT_IDS = {
    "ACT": "Australia/Darwin",
    "AET": "Australia/Sydney",
    "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo",
    "AST": "America/Anchorage",
    "BET": "America/Sao_Paulo",
    "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare",
    "CNT": "America/St_Johns",
    "CST": "America/Chicago",
    "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa",
    "ECT": "Europe/Paris",
    "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata",
    "JST": "Asia/Tokyo",
    "MIT": "Pacific/Apia",
    "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland",
    "PLT": "Asia/Karachi",
    "PNT": "America/Phoenix",
    "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles",
    "SST": "Pacific/Guadalcanal",
    "VST": "Asia/Ho_Chi_Minh",
    "EST": "-05:00",
    "MST": "-07:00",
    "HST": "-10:00",
}

#: a fixed offset as :func:`time_zone` writes it
_FIXED = re.compile(r"([+-])(\d\d):(\d\d)(?::(\d\d))?")


def time_zone(spark_zone: str) -> str:
    """The zone Spark means by session time zone ``spark_zone``, as Arrow and
    zoneinfo name it: a region id (``PST`` is America/Los_Angeles), or a fixed
    offset as ``+hh:mm``, or ``+hh:mm:ss`` where it has seconds (``UTC``,
    ``Z``, ``GMT+0`` are ``+00:00``; ``-8`` and ``GMT-08`` are ``-08:00``).

    Spark reads it with DateTimeUtils.getZoneId: ``(+|-)h:mm`` and ``(+|-)hh:m``
    made two digits, then java.time's ``ZoneId.of`` with its SHORT_IDS: ``Z``;
    offsets ``+h``, ``+hh``, ``+hhmm``, ``+hh:mm``, ``+hhmmss``, ``+hh:mm:ss``
    up to 18 hours; ``UTC``, ``GMT``, ``UT`` alone or followed by such an
    offset; else a region id, which is left to the time zone database.

    Raises:
        InvalidConfigError: an offset, or a prefix followed by one, that
            java.time does not take.
    """
    zone = re.sub(r"([+-])(\d):", r"\g<1>0\2:", spark_zone, count=1)
    zone = re.sub(r"([+-])(\d\d):(\d)$", r"\1\2:0\3", zone, count=1)
    zone = SHORT_IDS.get(zone, zone)
    if len(zone) <= 1 or zone[0] in "+-":
        return _offset(zone, spark_zone)
    prefix = next((p for p in ("UTC", "GMT", "UT") if zone.startswith(p)), None)
    if prefix is None:
        return zone
    if zone == prefix:
        return "+00:00"
    rest = zone[len(prefix) :]
    if rest[0] not in "+-":
        return zone  # a region such as GMT0 or UCT
    return _offset(rest, spark_zone)


def _offset(text: str, spark_zone: str) -> str:
    """java.time's ``ZoneOffset.of(text)`` as :func:`time_zone` writes it."""
    forms = {
        2: r"([+-])(\d)()()",
        3: r"([+-])(\d\d)()()",
        5: r"([+-])(\d\d)(\d\d)()",
        6: r"([+-])(\d\d):(\d\d)()",
        7: r"([+-])(\d\d)(\d\d)(\d\d)",
        9: r"([+-])(\d\d):(\d\d):(\d\d)",
    }
    if text == "Z":
        return "+00:00"
    found = re.fullmatch(forms.get(len(text), "(?!)"), text)
    if found is not None:
        sign, hours, minutes, seconds = found.groups()
        h, m, s = int(hours), int(minutes or 0), int(seconds or 0)
        if h <= 18 and m <= 59 and s <= 59 and h * 3600 + m * 60 + s <= 18 * 3600:
            if h == m == s == 0:
                sign = "+"
            return f"{sign}{h:02}:{m:02}" + (f":{s:02}" if s else "")
    raise InvalidConfigError(
        f"session time zone {spark_zone!r} is not one Spark takes: a region id (such as "
        "'America/Los_Angeles'), 'Z', an offset '(+|-)hh:mm[:ss]', or 'UTC', 'GMT', 'UT' "
        "followed by one"
    )


def fixed_seconds(zone: str) -> int | None:
    """The seconds east of UTC of a fixed offset as :func:`time_zone` writes
    it, or None for a region."""
    found = _FIXED.fullmatch(zone)
    if found is None:
        return None
    sign, hours, minutes, seconds = found.groups()
    total = int(hours) * 3600 + int(minutes) * 60 + int(seconds or 0)
    return -total if sign == "-" else total


def session_time_zone(types: Iterable[pa.DataType]) -> str | None:
    """The time zone of the Spark session whose rows have ``types``, as Spark's
    CAST uses it (named as :func:`time_zone` names it), or None where it
    cannot be known.

    It is the session's ``spark.sql.session.timeZone`` as the running task sees
    it, else the zone Spark put on the rows' timestamps with a time zone (a
    ``TimestampType`` reaches a writer as ``timestamp[us, tz=<session time
    zone>]``, at any depth). Neither exists in a session that left the setting
    at its default (the JVM's zone, which a Python worker cannot see) and
    writes no such timestamp; nor outside Spark without one.

    Raises:
        InvalidConfigError: the zone is an offset Spark does not take.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    zone = context.getLocalProperty(SESSION_TIME_ZONE) if context is not None else None
    if not zone:
        zone = next((z for z in map(_stamped_zone, types) if z is not None), None)
    return None if zone is None else time_zone(zone)


def _stamped_zone(kind: pa.DataType) -> str | None:
    """The time zone of the first timestamp with one in ``kind``, or None."""
    if pa.types.is_timestamp(kind):
        zone: str | None = kind.tz
        return zone
    if pa.types.is_struct(kind):
        parts = [kind.field(i).type for i in range(kind.num_fields)]
    elif pa.types.is_map(kind):
        parts = [kind.key_type, kind.item_type]
    elif _is_list(kind):
        parts = [kind.value_type]  # type: ignore[attr-defined]
    elif pa.types.is_dictionary(kind):
        parts = [kind.value_type]
    else:
        return None
    return next((z for z in map(_stamped_zone, parts) if z is not None), None)


def _is_list(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind)
    )


def known_zone(zone: str | None) -> str:
    """``zone``, where a conversion needs the session's time zone.

    Raises:
        InvalidConfigError: it is None: the session's time zone cannot be known.
    """
    if zone is None:
        raise InvalidConfigError(
            "a timestamp without a time zone, or a date, becomes a timestamp with one in the "
            "session's time zone (as Spark's CAST does), and this session's is unknown: a "
            "Python writer sees spark.sql.session.timeZone only when the session sets it. Set "
            "it (spark.conf.set('spark.sql.session.timeZone', ...)), or cast in the query"
        )
    return zone


def instants_of(wall: Any, zone: str, *, date: bool) -> Any:
    """The instants of wall clocks ``wall`` in ``zone`` as Spark's CAST (java.time)
    takes them: a wall clock that occurs twice is the earlier instant; one in a
    gap is moved on by the gap's length (it is read with the offset before the
    gap: 02:30 on a day that skips 02:00-03:00 is 03:30); and a date is its day's
    first instant (the end of a gap at midnight). (Typed Any: pyarrow's stubs
    take only microseconds here.)"""
    unit = wall.type.unit
    fixed = fixed_seconds(zone)
    if fixed is not None:
        # Arrow takes no offset with seconds (Kolkata's +05:21:10 of 1900 as a
        # session zone): a fixed offset is plain arithmetic
        utc = pc.subtract_checked(wall.view(pa.int64()), fixed * _PER_SECOND[unit])
        return utc.view(pa.timestamp(unit, tz="UTC"))
    later = pc.assume_timezone(wall, zone, ambiguous="earliest", nonexistent="latest")
    if date:
        return later
    # where the wall clock fell into a gap, ``later`` is the gap's end: the
    # offset just before it is the one the wall clock is read with
    before = pc.subtract(later, pa.scalar(1, pa.duration(unit)))
    offset = pc.subtract(pc.local_timestamp(before), before.cast(pa.timestamp(unit)))
    moved = pc.subtract(wall, offset).cast(pa.timestamp(unit, tz="UTC")).cast(later.type)
    in_gap = pc.not_equal(pc.local_timestamp(later), wall)
    return pc.if_else(in_gap, moved, later)


_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def wall_clocks(instants: Any, zone: str) -> Any:
    """The wall clocks of ``instants`` in ``zone`` (named as :func:`time_zone`
    names it), as timestamps without a time zone. (Typed Any: pyarrow's
    stubs take only microseconds here.)"""
    unit = instants.type.unit
    fixed = fixed_seconds(zone)
    if fixed is not None:
        local = pc.add_checked(instants.view(pa.int64()), fixed * _PER_SECOND[unit])
        return local.view(pa.timestamp(unit))
    return pc.local_timestamp(instants.cast(pa.timestamp(unit, tz=zone)))


__all__ = [
    "SESSION_TIME_ZONE",
    "SHORT_IDS",
    "fixed_seconds",
    "instants_of",
    "known_zone",
    "session_time_zone",
    "time_zone",
    "wall_clocks",
]
