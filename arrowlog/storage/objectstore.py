"""S3 and S3-compatible servers, Google Cloud Storage and Azure Blob Storage
through obstore (Rust's ``object_store``): the default client for ``s3://``,
``gs://`` and ``az://``.

Signing, retries and connection handling run in Rust without the GIL: for the
small objects a log writes, it took half the time of the s3fs client per request
(README, "Performance"). Put-if-absent is ``put(mode="create")``, one single PUT
(never multipart), on each store with its own atomic condition:

- S3: ``If-None-Match: *`` (AWS since 2024-08, MinIO, SeaweedFS);
- GCS: ``x-goog-if-generation-match: 0`` (the object must have no live generation);
- Azure: ``If-None-Match: *`` on Put Blob.

``object_store`` retries a request whose reply failed. A put-if-absent that landed
before its reply was lost then comes back as "already exists", which arrowlog's
writers already handle for any lost race: they read the winner and recognise
their own write (docs/protocol.md). Its retries are kept short here; arrowlog's
own retry policy decides beyond them.

obstore's runtime does not survive ``fork`` in a process that has used it
(measured: a forked child hung on its first request). arrowlog starts no process
by forking; a program that does must use the spawn start method.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

import obstore
from obstore import exceptions as obx

from arrowlog._extras import require_extra
from arrowlog.errors import (
    InvalidConfigError,
    StoreError,
    TransientStoreError,
    UnsupportedStoreError,
)
from arrowlog.storage import Blob, ObjectInfo, Store, check_key, check_prefix, epoch_ms
from arrowlog.storage.location import StoreURL
from arrowlog.storage.options import Kind, coerce_options, coerce_value, one_setting

#: Retries inside object_store: a few quick ones for a lost connection or a 5xx;
#: longer waits are arrowlog's retry policy's to decide (its deadline, its errors).
_RETRY: dict[str, Any] = {
    "max_retries": 3,
    "retry_timeout": datetime.timedelta(seconds=20),
    "backoff": {
        "init_backoff": datetime.timedelta(milliseconds=50),
        "max_backoff": datetime.timedelta(seconds=2),
        "base": 2,
    },
}
#: Above every character a key may hold (``check_key``'s alphabet): see _listing
_ABOVE_KEYS = "~"

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


class ObjectStore:
    """Objects under ``<scheme>://bucket/prefix`` through obstore.

    ``config`` are obstore's own settings for the scheme (``S3Config``,
    ``GCSConfig``, ``AzureConfig``) and ``client`` its ``ClientConfig``; both are
    built from the user's storage options by :mod:`arrowlog.storage.options`.
    Settings not given come from the environment (``AWS_*``, ``GOOGLE_*``,
    ``AZURE_*``), as with the cloud's own tools.
    """

    def __init__(
        self,
        scheme: str,
        bucket: str,
        prefix: str,
        config: Mapping[str, Any],
        client: Mapping[str, Any],
    ) -> None:
        self._scheme = scheme
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        if self._prefix:
            check_key(self._prefix)
        self._config = dict(config)
        self._client = dict(client)
        self._bucket_seen = False  # see _check_bucket
        try:
            self._store = _open(scheme, bucket, self._prefix, self._config, self._client)
        except obx.BaseError as e:  # settings object_store cannot use
            raise InvalidConfigError(f"storage options for {self.url}: {_first_line(e)}") from None

    @classmethod
    def from_url(cls, url: StoreURL, storage_options: Mapping[str, Any] | None) -> Store:
        """``s3://``, ``s3a://``, ``gs://`` or ``az://`` ``bucket/prefix``; with
        ``client=s3fs``, an ``s3://`` URL opens :class:`~arrowlog.storage.s3.S3Store`.

        Raises:
            InvalidConfigError: an unknown client, as :func:`obstore_s3_options`
                or :func:`obstore_cloud_options`, or settings obstore refuses.
            UnsupportedStoreError: no bucket.
        """
        kind = "s3" if url.scheme == "s3a" else url.scheme
        if kind == "s3" and s3_client(storage_options) == "s3fs":
            require_extra("s3fs")
            from arrowlog.storage.s3 import S3Store

            return S3Store.from_url(url, storage_options)
        if not url.netloc:
            raise UnsupportedStoreError(
                f"a {url.scheme}:// URL needs a bucket: {url.scheme}://bucket/prefix, "
                f"got {url.url!r}"
            )
        if kind == "s3":
            config, client = obstore_s3_options(storage_options, os.environ)
        else:
            config, client = obstore_cloud_options(kind, storage_options)
        return cls(kind, url.netloc, url.path, config, client)

    # Picklable, so that a store can travel to a Spark worker: rebuilt there.
    def __reduce__(self) -> tuple[Any, ...]:
        return (
            ObjectStore,
            (self._scheme, self._bucket, self._prefix, self._config, self._client),
        )

    @property
    def url(self) -> str:
        return f"{self._scheme}://{self._bucket}/{self._prefix}".rstrip("/")

    @property
    def atomic_put_if_absent(self) -> bool:
        return True

    def get(self, key: str) -> Blob:
        check_key(key)
        try:
            # obstore's Bytes is Rust-owned memory: a view of it, not a copy
            return memoryview(obstore.get(self._store, key).bytes())
        except Exception as e:
            raise _map_error(e, key, write=False) from e

    def presigned_get(self, key: str, expires_s: int) -> str:
        """A URL that GETs ``key`` without credentials for ``expires_s`` seconds
        (for readers that have none of their own, such as Spark's executors)."""
        import datetime

        check_key(key)
        try:
            url: str = obstore.sign(self._store, "GET", key, datetime.timedelta(seconds=expires_s))
        except Exception as e:
            raise _map_error(e, key, write=False) from e
        return url

    def presigned_put(self, key: str, expires_s: int) -> str:
        """A URL that PUTs ``key`` without credentials for ``expires_s`` seconds
        (for Spark's executors, which upload staged objects under keys of
        their own: a plain PUT, no condition)."""
        import datetime

        check_key(key)
        try:
            url: str = obstore.sign(self._store, "PUT", key, datetime.timedelta(seconds=expires_s))
        except Exception as e:
            raise _map_error(e, key, write=True) from e
        return url

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get_range_tagged(key, start, end)[0]

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        data, meta = self._ranged(key, start, end)
        return data, meta["e_tag"]

    def read_start(self, key: str, length: int) -> tuple[bytes, ObjectInfo, str | None]:
        """See :func:`arrowlog.storage.read_start`: one ranged GET, whose
        answer carries the object's size and time."""
        data, meta = self._ranged(key, 0, length)
        return data, _info(key, meta), meta["e_tag"]

    def _ranged(self, key: str, start: int, end: int) -> tuple[bytes, Any]:
        """Bytes ``[start, end)`` and the object's metadata (obstore's), by
        one ranged GET; by a HEAD for an empty range or one past the end."""
        check_key(key)
        if end <= start:
            return b"", self._head(key)
        try:
            # object_store takes u64 offsets: past any object's end is past it
            found = obstore.get(self._store, key, options={"range": (start, min(end, 2**63))})
            return bytes(found.bytes()), found.meta
        except Exception as e:
            if _past_the_end(_first_line(e)):
                return b"", self._head(key)
            raise _map_error(e, key, write=False) from e

    def head(self, key: str) -> ObjectInfo:
        check_key(key)
        return _info(key, self._head(key))

    def _head(self, key: str) -> Any:
        """The object's metadata (obstore's), errors mapped."""
        try:
            return obstore.head(self._store, key)
        except Exception as e:
            mapped = _map_error(e, key, write=False)
            if isinstance(mapped, FileNotFoundError):
                self._check_bucket()
            raise mapped from e

    def _check_bucket(self) -> None:
        """A HEAD's 404 has no body to say whether the object or the whole bucket
        is missing: the first one a store sees is followed by a one-key listing,
        which says (once per store object; a missing bucket is a wrong URL)."""
        if self._bucket_seen:
            return
        try:
            next(iter(obstore.list(self._store, chunk_size=1)), None)
        except Exception as e:
            mapped = _map_error(e, "", write=False)
            if isinstance(mapped, StoreError) and "NoSuchBucket" in str(mapped):
                raise mapped from e
            return  # anything else: the HEAD's own answer stands
        self._bucket_seen = True

    def put_if_absent(self, key: str, data: Blob) -> None:
        check_key(key)
        try:
            obstore.put(self._store, key, data, mode="create", use_multipart=False)
        except Exception as e:
            raise _map_error(e, key, write=True) from e

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        if limit is not None and limit <= 0:
            return
        directory, offset = _listing(prefix)
        if start_after is not None and (offset is None or start_after > offset):
            # object_store drops a trailing "/" ("d/" would become "d", and
            # SeaweedFS skips all of "d/" after it): "*" sorts below every key
            # character, so "d/*" keeps every key under "d/"
            offset = start_after + "*" if start_after.endswith("/") else start_after
        count = 0
        try:
            stream = obstore.list(self._store, prefix=directory or None, offset=offset)
            for chunk in stream:
                for meta in chunk:
                    key = str(meta["path"])
                    if start_after is not None and key <= start_after:
                        continue  # SeaweedFS answers some keys below a start-after
                    if not key.startswith(prefix):
                        if key > prefix:
                            return  # sorted: nothing after this one matches
                        continue
                    yield _info(key, meta)
                    count += 1
                    if limit is not None and count >= limit:
                        return
        except Exception as e:
            raise _map_error(e, prefix, write=False) from e

    def delete(self, key: str) -> None:
        check_key(key)
        try:
            obstore.delete(self._store, key)
        except Exception as e:
            mapped = _map_error(e, key, write=True)
            if not isinstance(mapped, FileNotFoundError):
                raise mapped from e

    def close(self) -> None:
        """Nothing to release: connections close with the store object."""


def obstore_s3_options(
    options: Mapping[str, Any] | None, environ: Mapping[str, str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Storage options of ``s3://`` as obstore's ``(S3Config, ClientConfig)``.

    Raises:
        InvalidConfigError: an unknown key (an s3fs-only one says so), a value of
            the wrong kind, a region given twice.
    """
    given = dict(options or {})
    s3fs_only: list[str] = []
    if any(k not in OBSTORE_S3_OPTIONS for k in given):
        # s3fs's names: the s3 extra that brought obstore brought s3fs too
        from arrowlog.storage.s3 import S3_OPTIONS

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
        chosen = one_setting(name, out.pop(name, None), extra)
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
        client["allow_invalid_certificates"] = not coerce_value(
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


def _open(
    scheme: str, bucket: str, prefix: str, config: dict[str, Any], client: dict[str, Any]
) -> Any:
    from obstore.store import AzureStore, GCSStore, S3Store

    kinds: dict[str, Any] = {"s3": S3Store, "gs": GCSStore, "az": AzureStore}
    extra: dict[str, Any] = {}
    settings = dict(config)
    profile = settings.pop("profile", None)
    if scheme == "s3" and "access_key_id" not in settings and not settings.get("skip_signature"):
        credentials = BotocoreCredentials(profile)
        extra["credential_provider"] = credentials
        region = credentials.region()
        if region and "region" not in settings and not _environ_region():
            settings["region"] = region  # from a profile, as the AWS CLI reads it
    return kinds[scheme](
        bucket,
        prefix=prefix or None,
        config=settings,
        client_options=client,
        retry_config=_RETRY,
        **extra,
    )


def _environ_region() -> bool:
    return any(os.environ.get(v) for v in ("AWS_REGION", "AWS_DEFAULT_REGION"))


class NoCredentialsError(Exception):
    """No AWS credentials anywhere botocore looks."""


class BotocoreCredentials:
    """AWS credentials found as the AWS CLI, boto3 and s3fs find them: the
    environment, ``~/.aws`` files and profiles, SSO, container and instance
    roles (object_store alone reads only the environment and instance roles).
    botocore refreshes expiring ones; object_store asks again at expiry."""

    def __init__(self, profile: str | None) -> None:
        import botocore.exceptions
        import botocore.session

        self._session = botocore.session.Session(profile=profile)
        try:
            region = self._session.get_config_variable("region")
        except botocore.exceptions.ProfileNotFound:
            raise InvalidConfigError(
                f"storage option profile (or AWS_PROFILE): no AWS profile named "
                f"{self._session.profile!r} in the AWS config and credentials files"
            ) from None
        self._region = str(region) if region else None

    def region(self) -> str | None:
        """The region of the profile (``~/.aws/config``), if it names one."""
        return self._region

    def __call__(self) -> dict[str, Any]:
        found = self._session.get_credentials()
        if found is None:
            raise NoCredentialsError(
                "no AWS credentials: give storage options key and secret, set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or a profile, or anon=true "
                "for a public bucket"
            )
        frozen = found.get_frozen_credentials()
        expiry = getattr(found, "_expiry_time", None)  # refreshable credentials only
        return {
            "access_key_id": frozen.access_key,
            "secret_access_key": frozen.secret_key,
            "token": frozen.token,
            "expires_at": expiry,
        }


def _listing(prefix: str) -> tuple[str, str | None]:
    """Where to list for the keys starting with ``prefix``: object_store lists
    whole directories (``a/b`` means ``a/b/...``), so list the directory that holds
    them, starting strictly after an ``offset`` below all of them and above as
    many as possible of the others.

    The offset is ``prefix`` with its last character lowered by one and ``~``
    appended: every allowed key below ``prefix`` sorts at or below it (``~`` is
    above the whole key alphabet), every key starting with ``prefix`` above it.
    """
    directory, _, partial = prefix.rpartition("/")
    if not partial:  # "a/b/" or "": the whole directory
        return directory, None
    lowered = chr(ord(partial[-1]) - 1)
    if lowered == "/":  # "a/x0": keys under "a/x/" sort below it
        return directory, (f"{directory}/{partial[:-1]}/~" if partial[:-1] else None)
    return directory, f"{directory}/{partial[:-1]}{lowered}{_ABOVE_KEYS}".lstrip("/")


# S3 error codes of a request the server refused without doing it: retrying is
# safe, and a write certainly did not land.
_REFUSED_CODES = (
    "<Code>SlowDown</Code>",
    "<Code>RequestLimitExceeded</Code>",
    # another conditional PUT of the same key is in flight
    "<Code>ConditionalRequestConflict</Code>",
)


def _info(key: str, meta: Any) -> ObjectInfo:
    """An object's info from obstore's metadata of it."""
    return ObjectInfo(key, int(meta["size"]), epoch_ms(meta["last_modified"]))


def _map_error(e: BaseException, key: str, *, write: bool) -> Exception:
    """One place that turns each obstore failure into arrowlog's storage contract."""
    text = str(e)
    first = _first_line(e)
    message = f"{key}: {first}"
    status = _status(first)
    # before "already exists": object_store reports S3's 409 for a conditional
    # PUT racing another one in flight as AlreadyExists, yet no object is there
    # to read yet; it is a refusal to retry, as s3fs's client reports it
    if "<Code>NoSuchBucket</Code>" in text:  # not a missing object: a wrong URL
        return StoreError(f"{key}: NoSuchBucket: the store's bucket does not exist")
    if status in (429, 503) or any(code in text for code in _REFUSED_CODES):
        # refused, but object_store retries: an earlier attempt of a write may
        # have landed before its reply was lost
        return TransientStoreError(message, maybe_applied=write and _retried(text))
    if isinstance(e, (obx.AlreadyExistsError, obx.PreconditionError)):
        return FileExistsError(key)
    if isinstance(e, FileNotFoundError) or status == 404:  # obstore's NotFoundError is one
        # (a 404 to a listing, from a server that is no S3 endpoint, too: the
        # command line then says to check the endpoint URL)
        return FileNotFoundError(key)
    if isinstance(e, (obx.PermissionDeniedError, obx.UnauthenticatedError)):
        return StoreError(message)
    if isinstance(e, (obx.InvalidPathError, obx.NotSupportedError)):
        return StoreError(message)
    if isinstance(e, obx.UnknownConfigurationKeyError):
        return StoreError(message)
    if status is not None and 400 <= status < 500 and status != 408:
        return StoreError(message)  # the request itself was wrong: no retry helps
    if isinstance(e, (obx.GenericError, obx.JoinError, OSError, TimeoutError)):
        # A 5xx, a reset connection, a timeout: the request may have reached the
        # server and been applied before the reply was lost.
        return TransientStoreError(message, maybe_applied=write)
    return StoreError(f"{key}: {type(e).__name__}: {first}")


def _first_line(e: BaseException) -> str:
    """obstore's errors go on with a multi-line debug dump: the first line says it."""
    return str(e).split("\n", 1)[0]


def _retried(text: str) -> bool:
    """Whether object_store sent the request more than once (its error says
    ``retries: N``); without that figure, assume it did."""
    match = re.search(r"\bretries: (\d+)", text)
    return match is None or int(match.group(1)) > 0


def _past_the_end(first_line: str) -> bool:
    """Whether a ranged GET failed for starting at or past the object's end:
    the server's 416 (S3, GCS), or object_store's own error saying so (its
    Azure client, against Azurite)."""
    return _status(first_line) == 416 or "Wanted range starting at" in first_line


def _status(first_line: str) -> int | None:
    """The HTTP status in the first line of an object_store error, if any."""
    marker = "status code: "
    at = first_line.find(marker)
    digits = first_line[at + len(marker) : at + len(marker) + 3] if at >= 0 else ""
    return int(digits) if digits.isdigit() else None
