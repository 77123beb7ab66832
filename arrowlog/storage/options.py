"""Storage options: checking their keys and coercing their values.

Options reach :func:`arrowlog.connect` from Python (real booleans and dicts), from
the command line (``--option anon=false``) and from Spark (``storage.anon`` =
``"false"``): the last two only ever carry strings. Every value is therefore
coerced here, once, by the kind its backend declares, and every key is checked
against the backend's known keys. Each backend declares its keys (name -> kind)
beside its class: ``LOCAL_OPTIONS`` in :mod:`arrowlog.storage.local`,
``S3_OPTIONS`` (s3fs) in :mod:`arrowlog.storage.s3`, obstore's in
:mod:`arrowlog.storage.objectstore`, any fsspec filesystem's read from its
signature in :mod:`arrowlog.storage.fsspec_store`. Passing the strings through unchanged is how
``anon=false`` used to mean *true* (a non-empty string) and how a
``client_kwargs`` given as JSON failed deep inside s3fs.

Each refusal is one :class:`~arrowlog.errors.InvalidConfigError` on one line, raised
before anything is opened or written.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any, Literal

from arrowlog.errors import InvalidConfigError

#: How a value is read. ``text`` is passed on as given (a string or None);
#: ``object`` is a JSON object (a dict) or a string holding one.
Kind = Literal["bool", "int", "float", "text", "object"]

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def one_setting(name: str, option: object, client_kwargs: Mapping[str, Any]) -> object:
    """A setting given as a storage option, in ``client_kwargs``, or both alike.

    Raises:
        InvalidConfigError: both, with different values.
    """
    other = client_kwargs.get(name)
    if option is not None and other is not None and option != other:
        raise InvalidConfigError(
            f"storage options {name} and client_kwargs.{name} disagree: {option!r} vs {other!r}"
        )
    return option if option is not None else other


def coerce_options(
    backend: str, options: Mapping[str, Any] | None, known: Mapping[str, Kind]
) -> dict[str, Any]:
    """Check ``options`` against ``known`` and coerce each value to its kind.

    A value of None means "not set" and is dropped, as if the key were absent.

    Args:
        backend: how the store is named in messages, e.g. ``"s3://"``.
        options: the user's options (any mix of strings and real values).
        known: every key the backend takes, with its kind.

    Raises:
        InvalidConfigError: an unknown key (the message lists the known ones), or a
            value that is not of its key's kind.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise InvalidConfigError(f"storage_options must be a dict, got {type(options).__name__}")
    out: dict[str, Any] = {}
    for name, value in options.items():
        kind = known.get(name) if isinstance(name, str) else None
        if kind is None:
            raise InvalidConfigError(_unknown(backend, name, known))
        if value is not None:
            out[name] = coerce_value(backend, name, value, kind)
    return out


def coerce_value(backend: str, name: str, value: object, kind: Kind) -> object:
    """One option's value as its ``kind`` (see :func:`coerce_options`).

    Raises:
        InvalidConfigError: the value is not of that kind.
    """
    where = f"storage option {name} for {backend}"
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        raise InvalidConfigError(f"{where} must be true or false, got {value!r}")
    if kind in ("int", "float"):
        number = _number(value, int if kind == "int" else float)
        if number is None:
            raise InvalidConfigError(f"{where} must be {_A[kind]}, got {value!r}")
        return number
    if kind == "object":
        parsed = _json_object(value)
        if parsed is None:
            raise InvalidConfigError(
                f"{where} must be a JSON object (a dict, or a string like "
                f'\'{{"region_name": "us-east-1"}}\'), got {value!r}'
            )
        return parsed
    if not isinstance(value, str):
        raise InvalidConfigError(f"{where} must be a string, got {value!r}")
    return value


_A = {"int": "an integer", "float": "a number"}


def _number(value: object, kind: type[int] | type[float]) -> int | float | None:
    if isinstance(value, bool):  # bool is an int, but True is no block size
        return None
    if isinstance(value, kind) or (kind is float and isinstance(value, int)):
        return kind(value)
    if isinstance(value, str):
        try:
            return kind(value.strip())
        except ValueError:
            return None
    return None


def _json_object(value: object) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _unknown(backend: str, name: object, known: Mapping[str, Kind]) -> str:
    if not known:
        return f"{backend} takes no storage options, got {name!r}"
    close = difflib.get_close_matches(str(name), list(known), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown storage option {name!r} for {backend}{hint}; known: {', '.join(sorted(known))}"
