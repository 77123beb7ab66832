"""Opening the store a command works on: storage options from the command line,
a read-only guard, and request counting (shown with ``--debug``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from arrowlog.errors import ArrowLogError, InvalidConfigError
from arrowlog.storage import Blob, Store
from arrowlog.storage.local import LOCAL_OPTIONS, LocalStore
from arrowlog.storage.options import coerce_options
from arrowlog.storage.url import open_store
from arrowlog.storage.wrappers import CountingStore


class ReadOnlyCommandError(ArrowLogError):
    """A read-only command tried to write: a bug, refused before any byte lands."""


class RootNotFoundError(ArrowLogError):
    """The root named on the command line does not exist."""


def coerce_option(key: str, text: str) -> object:
    """A storage option's value from its command-line text: true/false, an int,
    JSON for objects and lists (``client_kwargs={"region_name": "us-east-1"}``),
    else the text itself. ``anon=false`` must mean False, not a true-ish string."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if re.fullmatch(r"-?[0-9]+", lowered):  # not isdigit: "²" is a digit to it
        return int(lowered)
    if text.lstrip().startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError as e:
            raise InvalidConfigError(f"--option {key}: not valid JSON: {e}") from None
    return text


def parse_options(
    items: tuple[str, ...], storage_json: str | None, endpoint_url: str | None
) -> dict[str, Any]:
    """Merge ``--storage-options JSON``, ``--option key=value`` (later wins) and
    ``--endpoint-url``."""
    options: dict[str, Any] = {}
    if storage_json:
        try:
            loaded = json.loads(storage_json)
        except ValueError as e:
            raise InvalidConfigError(f"--storage-options: not valid JSON: {e}") from None
        if not isinstance(loaded, dict):
            raise InvalidConfigError("--storage-options must be a JSON object")
        options.update(loaded)
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigError(f"--option takes key=value, got {item!r}")
        # Text as given: connect coerces each key to its kind (anon=false is
        # False; a numeric secret stays a string).
        options[key.strip()] = value
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    return options


def is_local(url: str) -> bool:
    scheme = urlsplit(url).scheme.lower()
    return scheme in ("", "file") or (len(scheme) == 1 and url[1:3] in (":\\", ":/"))


def local_path(url: str) -> Path:
    parts = urlsplit(url)
    return Path(parts.path if parts.scheme.lower() == "file" else url)


class _ExistingLocalStore(LocalStore):
    """A local root opened without creating anything: ``LocalStore`` makes its
    directory (and its temp directory) on open, which a read-only command must
    never do. Writes are refused by :class:`ReadOnlyStore` around it."""

    def __init__(self, root: Path) -> None:  # no super().__init__: it would mkdir
        self._root = root.resolve()
        self._fsync = False


class ReadOnlyStore(CountingStore):
    """Counts requests like its base, and refuses every write."""

    def put_if_absent(self, key: str, data: Blob) -> None:
        raise ReadOnlyCommandError(f"a read-only command tried to write {key}")

    def delete(self, key: str) -> None:
        raise ReadOnlyCommandError(f"a read-only command tried to delete {key}")


def open_cli_store(
    url: str, options: dict[str, Any], *, read_only: bool, creates_root: bool = False
) -> CountingStore:
    """The store at ``url``, counted; guarded against writes if ``read_only``.

    Raises:
        RootNotFoundError: a local directory that does not exist, for any
            command but one that creates (opening it would create it: a
            mistyped root must not be left behind by a command that fails).
    """
    inner: Store
    if is_local(url) and not (creates_root and not read_only):
        path = local_path(url)
        if not path.is_dir():
            raise RootNotFoundError(f"no arrowlog root at {path}: no such directory")
    if read_only and is_local(url):
        coerce_options("a local directory", options, LOCAL_OPTIONS)  # checks the keys
        inner = _ExistingLocalStore(path)
    else:
        inner = open_store(url, options)
    return ReadOnlyStore(inner) if read_only else CountingStore(inner)
