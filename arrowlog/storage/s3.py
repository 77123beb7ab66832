"""S3 and S3-compatible servers (AWS, MinIO, SeaweedFS) through s3fs.

s3fs provides the session, credentials, endpoint configuration and event loop;
the requests themselves go straight to its aiobotocore client so that this module
controls exactly which conditional header is sent and how each server's error is
mapped (s3fs maps a failed ``If-None-Match`` to FileExistsError only when the
server's XML names the condition, which SeaweedFS's does not).

A put is always one single PUT: conditional multipart completion is not atomic on
every server (measured on SeaweedFS).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterator, Mapping
from typing import Any, TypeVar

import fsspec.asyn
import s3fs
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    PartialCredentialsError,
)

from arrowlog.errors import StoreError, TransientStoreError, UnsupportedStoreError
from arrowlog.storage import Blob, ObjectInfo, check_key, check_prefix, epoch_ms
from arrowlog.storage.location import StoreURL
from arrowlog.storage.options import Kind, coerce_options, one_setting

T = TypeVar("T")

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

# Codes after which the request certainly did not happen: the server refused it.
_REFUSED_RETRIABLE = {
    "SlowDown",
    "ServiceUnavailable",
    "ConditionalRequestConflict",
    "RequestLimitExceeded",
    "Throttling",
    "TooManyRequests",
}
# Codes after which a write may have happened (the server failed mid-way).
_AMBIGUOUS = {"InternalError", "RequestTimeout", "ServiceError"}
_MISSING = {"NoSuchKey", "404", "NotFound"}
_CONFIGURATION_ERRORS = (
    NoCredentialsError,
    PartialCredentialsError,
    NoRegionError,
    ParamValidationError,
)


class S3Store:
    """Objects under ``s3://bucket/prefix``. ``storage_options`` go to
    :class:`s3fs.S3FileSystem` (``key``, ``secret``, ``endpoint_url``,
    ``client_kwargs``, ...)."""

    def __init__(self, bucket: str, prefix: str, storage_options: dict[str, Any]) -> None:
        if not bucket:
            raise UnsupportedStoreError("an s3:// URL needs a bucket: s3://bucket/prefix")
        self._bucket = bucket
        self._prefix = prefix.strip("/")
        if self._prefix:
            check_key(self._prefix)
        self._options = dict(storage_options)
        # skip_instance_cache: never share a client (and its credentials) with
        # another connection that happens to pass equal arguments (s3fs #284).
        self._fs = s3fs.S3FileSystem(skip_instance_cache=True, **self._options)
        self._client: Any = None
        self._client_lock = threading.Lock()

    @classmethod
    def from_url(cls, url: StoreURL, storage_options: Mapping[str, Any] | None) -> S3Store:
        """``s3://bucket/prefix`` (or ``s3a://``) with ``client=s3fs``; the
        registry sends ``s3://`` to :class:`~arrowlog.storage.objectstore.ObjectStore`,
        which hands this client's URLs on to here.

        Raises:
            InvalidConfigError: as :func:`s3_options`.
            UnsupportedStoreError: no bucket.
        """
        return cls(url.netloc, url.path, s3_options(storage_options))

    # Picklable, so that a store can be shipped to a Spark worker or a process pool;
    # the client is rebuilt on the other side.
    def __reduce__(self) -> tuple[Any, ...]:
        return (S3Store, (self._bucket, self._prefix, self._options))

    @property
    def url(self) -> str:
        return f"s3://{self._bucket}/{self._prefix}".rstrip("/")

    @property
    def atomic_put_if_absent(self) -> bool:
        return True

    def _full(self, key: str) -> str:
        check_key(key)
        return f"{self._prefix}/{key}" if self._prefix else key

    def _run(self, make: Any) -> Any:
        if self._client is None:
            # Parallel readers may all arrive here first: make exactly one client.
            with self._client_lock:
                if self._client is None:
                    self._client = _sync(self._fs.loop, self._connect())

        async def call() -> Any:
            return await make(self._client)

        return _sync(self._fs.loop, call())

    async def _connect(self) -> Any:
        await self._fs.set_session()
        return await self._fs.get_s3(self._bucket)

    def get(self, key: str) -> Blob:
        return self._get(key, None)

    def presigned_get(self, key: str, expires_s: int) -> str:
        """A URL that GETs ``key`` without credentials for ``expires_s`` seconds
        (for readers that have none of their own, such as Spark's executors)."""
        full = self._full(key)

        async def call(client: Any) -> str:
            url: str = await client.generate_presigned_url(
                "get_object", Params={"Bucket": self._bucket, "Key": full}, ExpiresIn=expires_s
            )
            return url

        return str(self._run(call))

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get_range_tagged(key, start, end)[0]

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        if end <= start:
            return b"", self._head(key).get("ETag")
        try:
            return self._get_tagged(key, f"bytes={start}-{end - 1}")
        except StoreError as e:
            if "InvalidRange" in str(e):  # start at or beyond the end
                return b"", self._head(key).get("ETag")
            raise

    def _get(self, key: str, byte_range: str | None) -> bytes:
        return self._get_tagged(key, byte_range)[0]

    def _get_tagged(self, key: str, byte_range: str | None) -> tuple[bytes, str | None]:
        full = self._full(key)

        async def call(client: Any) -> tuple[bytes, str | None]:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Key": full}
            if byte_range is not None:
                kwargs["Range"] = byte_range
            resp = await client.get_object(**kwargs)
            async with resp["Body"] as body:
                data: bytes = await body.read()
            return data, resp.get("ETag")

        try:
            result: tuple[bytes, str | None] = self._run(call)
        except Exception as e:
            raise _map_error(e, key, write=False) from e
        return result

    def head(self, key: str) -> ObjectInfo:
        resp = self._head(key)
        return ObjectInfo(key, int(resp["ContentLength"]), epoch_ms(resp.get("LastModified")))

    def _head(self, key: str) -> dict[str, Any]:
        full = self._full(key)
        try:
            resp: dict[str, Any] = self._run(lambda c: c.head_object(Bucket=self._bucket, Key=full))
        except Exception as e:
            raise _map_error(e, key, write=False) from e
        return resp

    def put_if_absent(self, key: str, data: Blob) -> None:
        full = self._full(key)
        body = data if isinstance(data, bytes) else bytes(data)
        try:
            self._run(
                lambda c: c.put_object(Bucket=self._bucket, Key=full, Body=body, IfNoneMatch="*")
            )
        except Exception as e:
            raise _map_error(e, key, write=True) from e

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        base = f"{self._prefix}/" if self._prefix else ""
        token: str | None = None
        remaining = limit
        after = base + start_after if start_after is not None else None
        while remaining is None or remaining > 0:
            kwargs: dict[str, Any] = {"Bucket": self._bucket, "Prefix": base + prefix}
            if after is not None:
                kwargs["StartAfter"] = after
            if token is not None:
                kwargs["ContinuationToken"] = token
            if remaining is not None:
                kwargs["MaxKeys"] = min(remaining, 1000)
            try:
                resp = self._run(lambda c, kw=kwargs: c.list_objects_v2(**kw))
            except Exception as e:
                raise _map_error(e, prefix, write=False) from e
            for item in resp.get("Contents", []):
                key = item["Key"][len(base) :]
                if start_after is not None and key <= start_after:
                    continue  # some servers ignore StartAfter on continued pages
                yield ObjectInfo(key, int(item["Size"]), epoch_ms(item.get("LastModified")))
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if not resp.get("IsTruncated"):
                return
            token = resp.get("NextContinuationToken")

    def delete(self, key: str) -> None:
        full = self._full(key)
        try:
            self._run(lambda c: c.delete_object(Bucket=self._bucket, Key=full))
        except Exception as e:
            mapped = _map_error(e, key, write=True)
            if not isinstance(mapped, FileNotFoundError):
                raise mapped from e

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing is best effort
                _sync(self._fs.loop, client.close())


def s3_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """:data:`S3_OPTIONS`, coerced, with ``region_name`` moved into
    ``client_kwargs`` for botocore.

    Raises:
        InvalidConfigError: as :func:`coerce_options`, or a region given twice.
    """
    out = coerce_options("s3://", options, {**S3_OPTIONS, "client": "text"})
    out.pop("client", None)
    client_kwargs = dict(out.get("client_kwargs", {}))
    region = one_setting("region_name", out.pop("region_name", None), client_kwargs)
    if region is not None:
        out["client_kwargs"] = {**client_kwargs, "region_name": region}
    return out


def _sync(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    result: T = fsspec.asyn.sync(loop, lambda: coro)
    return result


def _map_error(e: BaseException, key: str, *, write: bool) -> Exception:
    """One place that turns every S3 server's failure into arrowlog's contract."""
    if isinstance(e, (FileNotFoundError, FileExistsError, StoreError)):
        return e
    if isinstance(e, ClientError):
        err = e.response.get("Error", {})
        code = str(err.get("Code", ""))
        status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        message = f"{key}: {code or status} {err.get('Message', '')}".strip()
        if code == "PreconditionFailed" or status == 412:
            return FileExistsError(key)
        if code in _MISSING or (status == 404 and code != "NoSuchBucket"):
            return FileNotFoundError(key)
        if code in _REFUSED_RETRIABLE or status in (429, 503):
            return TransientStoreError(message, maybe_applied=False)
        if code in _AMBIGUOUS or status >= 500:
            return TransientStoreError(message, maybe_applied=write)
        return StoreError(message)
    if isinstance(e, _CONFIGURATION_ERRORS):
        # No retry can fix missing credentials or a bad parameter.
        return StoreError(f"{key}: {type(e).__name__}: {e}")
    if isinstance(e, (BotoCoreError, OSError, asyncio.TimeoutError)):
        # Connection reset, read timeout, DNS: the request may have reached the
        # server and been applied before the reply was lost.
        return TransientStoreError(f"{key}: {type(e).__name__}: {e}", maybe_applied=write)
    return StoreError(f"{key}: {type(e).__name__}: {e}")
