"""Storage options: which keys each backend takes, and coercing their values.

Options reach :func:`arrowlog.connect` from Python (real booleans and dicts), from
the command line (``--option anon=false``) and from Spark (``storage.anon`` =
``"false"``): the last two only ever carry strings. Every value is therefore
coerced here, once, by the kind its backend declares, and every key is checked
against the backend's known keys. Passing the strings through unchanged is how
``anon=false`` used to mean *true* (a non-empty string) and how a
``client_kwargs`` given as JSON failed deep inside s3fs.

Each refusal is one :class:`~arrowlog.errors.InvalidConfigError` on one line, raised
before anything is opened or written.
"""

from __future__ import annotations

import difflib
import inspect
import json
from collections.abc import Mapping
from typing import Any, Literal

from arrowlog.errors import InvalidConfigError

#: How a value is read. ``text`` is passed on as given (a string or None);
#: ``object`` is a JSON object (a dict) or a string holding one.
Kind = Literal["bool", "int", "float", "text", "object"]

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})

#: A local directory (:class:`arrowlog.storage.local.LocalStore`).
LOCAL_OPTIONS: Mapping[str, Kind] = {"fsync": "bool"}

#: The in-process store takes no options.
MEMORY_OPTIONS: Mapping[str, Kind] = {}

#: ``s3://``: the arguments of ``s3fs.S3FileSystem.__init__`` (s3fs 2026.9) that
#: make sense for arrowlog, plus ``profile`` (s3fs hands unnamed arguments to the
#: botocore session, and a profile is the only one users set) and arrowlog's own
#: ``region_name`` (moved into ``client_kwargs``, where botocore wants it).
#: Left out on purpose: ``session``, ``loop`` and ``asynchronous`` (live objects
#: that cannot travel to a Spark worker; arrowlog runs its own loop) and the
#: listing-cache switches (arrowlog never uses s3fs's listings).
S3_OPTIONS: Mapping[str, Kind] = {
    "endpoint_url": "text",
    "key": "text",
    "secret": "text",
    "token": "text",
    "username": "text",
    "password": "text",
    "profile": "text",
    "region_name": "text",
    "anon": "bool",
    "use_ssl": "bool",
    "requester_pays": "bool",
    "version_aware": "bool",
    "cache_regions": "bool",
    "default_fill_cache": "bool",
    "fixed_upload_size": "bool",
    "local_expiry_check": "bool",
    "default_block_size": "int",
    "max_concurrency": "int",
    "default_cache_type": "text",
    "client_kwargs": "object",
    "config_kwargs": "object",
    "s3_additional_kwargs": "object",
}

#: ``s3://`` through obstore (the default client): the s3fs names users already
#: pass, mapped onto obstore's settings by :func:`obstore_s3_options`, plus
#: ``client`` (``obstore`` or ``s3fs``) and two settings only obstore has.
OBSTORE_S3_OPTIONS: Mapping[str, Kind] = {
    "client": "text",
    "endpoint_url": "text",
    "key": "text",
    "secret": "text",
    "token": "text",
    "region_name": "text",
    "anon": "bool",
    "use_ssl": "bool",
    "requester_pays": "bool",
    "profile": "text",
    "client_kwargs": "object",
    "allow_http": "bool",
    "virtual_hosted_style_request": "bool",
}
#: what ``client_kwargs`` may hold with obstore (botocore's names)
_OBSTORE_CLIENT_KWARGS = frozenset({"region_name", "endpoint_url", "verify"})
S3_CLIENTS = ("obstore", "s3fs")

#: ``gs://`` and ``az://`` (obstore only): obstore's own setting names
#: (``GCSConfig``, ``AzureConfig``); the rest comes from the environment.
GCS_OPTIONS: Mapping[str, Kind] = {
    "service_account": "text",
    "service_account_key": "text",
    "application_credentials": "text",
    "bearer_token": "text",
    "base_url": "text",
    "skip_signature": "bool",
    "allow_http": "bool",
}
AZURE_OPTIONS: Mapping[str, Kind] = {
    "account_name": "text",
    "account_key": "text",
    "sas_key": "text",
    "bearer_token": "text",
    "client_id": "text",
    "client_secret": "text",
    "tenant_id": "text",
    "endpoint": "text",
    "use_emulator": "bool",
    "use_azure_cli": "bool",
    "skip_signature": "bool",
    "allow_http": "bool",
}


def s3_client(options: Mapping[str, Any] | None) -> str:
    """Which client serves an ``s3://`` store: option ``client``, else obstore.

    Raises:
        InvalidConfigError: a client that is neither.
    """
    client = (options or {}).get("client") or "obstore"
    if client not in S3_CLIENTS:
        raise InvalidConfigError(
            f"storage option client for s3:// must be one of {', '.join(S3_CLIENTS)}, "
            f"got {client!r}"
        )
    return str(client)


def obstore_s3_options(
    options: Mapping[str, Any] | None, environ: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Storage options of ``s3://`` as obstore's ``(S3Config, ClientConfig)``.

    Raises:
        InvalidConfigError: an unknown key (an s3fs-only one says so), a value of
            the wrong kind, a region given twice.
    """
    given = dict(options or {})
    s3fs_only = sorted(k for k in given if k in S3_OPTIONS and k not in OBSTORE_S3_OPTIONS)
    if s3fs_only:
        raise InvalidConfigError(
            f"storage option {s3fs_only[0]!r} is a setting of the s3fs client: add "
            "client=s3fs to use it (the default client, obstore, has no such setting)"
        )
    out = coerce_options("s3://", given, OBSTORE_S3_OPTIONS)
    out.pop("client", None)
    extra = dict(out.pop("client_kwargs", {}))
    unknown = sorted(set(extra) - _OBSTORE_CLIENT_KWARGS)
    if unknown:
        raise InvalidConfigError(
            f"storage option client_kwargs.{unknown[0]} is not known to the obstore client "
            f"(known: {', '.join(sorted(_OBSTORE_CLIENT_KWARGS))}); add client=s3fs to pass "
            "botocore's client arguments"
        )
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    for name, theirs in (("region_name", "region"), ("endpoint_url", "endpoint")):
        chosen = _one_of(name, out.pop(name, None), extra)
        if chosen is not None:
            config[theirs] = str(chosen)
    for ours, theirs in (("key", "access_key_id"), ("secret", "secret_access_key"),
                         ("token", "session_token")):  # fmt: skip
        if ours in out:
            config[theirs] = out.pop(ours)
    if out.pop("anon", False):
        config["skip_signature"] = True
    if "profile" in out:  # a botocore profile: arrowlog.storage.objectstore reads it
        config["profile"] = out.pop("profile")
    if out.pop("requester_pays", False):
        config["request_payer"] = True
    if "virtual_hosted_style_request" in out:
        config["virtual_hosted_style_request"] = out.pop("virtual_hosted_style_request")
    if "verify" in extra:
        client["allow_invalid_certificates"] = not _coerce(
            "s3://", "verify", extra["verify"], "bool"
        )
    endpoint = (
        config.get("endpoint") or environ.get("AWS_ENDPOINT_URL") or environ.get("AWS_ENDPOINT")
    )
    # s3fs speaks plain HTTP to an http:// endpoint; object_store must be told
    plain = bool(endpoint) and str(endpoint).lower().startswith("http://")
    allow_http = out.pop("allow_http", None)
    use_ssl = out.pop("use_ssl", True)
    if allow_http or plain or not use_ssl:
        client["allow_http"] = True
    return config, client


def _one_of(name: str, option: object, client_kwargs: Mapping[str, Any]) -> object:
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


def obstore_cloud_options(
    scheme: str, options: Mapping[str, Any] | None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Storage options of ``gs://`` or ``az://`` as obstore's (config, ClientConfig).

    Raises:
        InvalidConfigError: as :func:`coerce_options`.
    """
    known = GCS_OPTIONS if scheme == "gs" else AZURE_OPTIONS
    config = coerce_options(f"{scheme}://", options, known)
    client: dict[str, Any] = {}
    if config.pop("allow_http", False):
        client["allow_http"] = True
    return config, client


# Arguments of an fsspec filesystem that arrowlog sets itself or that cannot be
# given as an option.
_FSSPEC_RESERVED = frozenset({"self", "skip_instance_cache", "asynchronous", "loop"})


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
            out[name] = _coerce(backend, name, value, kind)
    return out


def s3_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`S3_OPTIONS`, coerced, with ``region_name`` moved into
    ``client_kwargs`` for botocore.

    Raises:
        InvalidConfigError: as :func:`coerce_options`, or a region given twice.
    """
    out = coerce_options("s3://", options, {**S3_OPTIONS, "client": "text"})
    out.pop("client", None)
    client_kwargs = dict(out.get("client_kwargs", {}))
    region = _one_of("region_name", out.pop("region_name", None), client_kwargs)
    if region is not None:
        out["client_kwargs"] = {**client_kwargs, "region_name": region}
    return out


def fsspec_options(filesystem: type[Any]) -> dict[str, Kind]:
    """The keys an fsspec filesystem class takes: the named arguments of every
    ``__init__`` along its MRO, each of the kind its default value has."""
    known: dict[str, Kind] = {}
    for cls in filesystem.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        for param in inspect.signature(init).parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.name not in _FSSPEC_RESERVED:
                known.setdefault(param.name, _kind_of_default(param.name, param.default))
    return known


def _kind_of_default(name: str, default: object) -> Kind:
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, int):
        return "int"
    if isinstance(default, float):
        return "float"
    if isinstance(default, dict) or name.endswith("_kwargs"):
        return "object"
    return "text"


def _coerce(backend: str, name: str, value: object, kind: Kind) -> object:
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
