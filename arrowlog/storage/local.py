"""A local directory as an object store.

Put-if-absent writes the whole object to a temporary file and then ``os.link``-s
it to its final name: ``link`` fails atomically if the name exists, and readers
can never see a partial object. (``open(path, "xb")`` would let readers see an
empty or half-written file, and fsspec's local ``mode="create"`` is
check-then-write; both were measured to lose races.)
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa

from arrowlog.errors import StoreError, UnsupportedStoreError
from arrowlog.storage import Blob, ObjectInfo, check_key, check_prefix
from arrowlog.storage.location import StoreURL
from arrowlog.storage.options import Kind, coerce_options

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

# Temporary files live here, inside the root (so ``link`` stays on one
# filesystem) but outside the key space: keys never start with a dot.
_TMP_DIR = ".arrowlog-tmp"

#: ``file://`` and plain paths: the arguments of :class:`LocalStore`.
LOCAL_OPTIONS: Mapping[str, Kind] = {"fsync": "bool"}


class LocalStore:
    """Objects as files under ``root``; ``fsync`` makes acknowledged writes
    survive a machine crash, not just a process crash."""

    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self._root = Path(root).resolve()
        self._fsync = fsync
        # made by the first write: reading a mistyped root must create nothing
        self._tmp_ready = False

    @classmethod
    def from_url(cls, url: StoreURL, storage_options: Mapping[str, Any] | None) -> LocalStore:
        """The directory of a plain path or a ``file://`` URL (percent-encoded, as
        :attr:`url` writes it; a path is taken as written).

        Raises:
            UnsupportedStoreError: a ``file://`` URL that names another host.
            InvalidConfigError: as :func:`~arrowlog.storage.options.coerce_options`.
        """
        if not url.is_path and url.netloc not in ("", "localhost"):
            raise UnsupportedStoreError(f"file:// URLs must name a local path, got {url.url!r}")
        local = coerce_options("a local directory", storage_options, LOCAL_OPTIONS)
        return cls(Path(url.path if url.is_path else unquote(url.path)), **local)

    def temporary_directory(self) -> Path:
        """Where a writer puts an object's bytes before linking it into place
        (a hidden directory: listings skip it)."""
        return self._tmp_dir()

    def _tmp_dir(self) -> Path:
        tmp = self._root / _TMP_DIR
        if not self._tmp_ready:
            try:
                tmp.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise StoreError(f"cannot use {self._root} as a store: {e}") from e
            self._tmp_ready = True
        return tmp

    @property
    def url(self) -> str:
        return self._root.as_uri()

    @property
    def root(self) -> Path:
        return self._root

    @property
    def fsync(self) -> bool:
        """Whether writes are synced to disk before they are acknowledged."""
        return self._fsync

    @property
    def atomic_put_if_absent(self) -> bool:
        return True

    def _path(self, key: str) -> Path:
        check_key(key)
        return self._root.joinpath(*key.split("/"))

    def get(self, key: str) -> Blob:
        path = self._path(key)
        try:
            with pa.OSFile(str(path), "rb") as f:
                # Arrow exports signed chars; cast to bytes' unsigned view.
                return memoryview(f.read_buffer()).cast("B")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(key) from None
        except OSError:
            if path.is_dir():  # pyarrow reports a directory as a plain OSError
                raise FileNotFoundError(key) from None
            raise

    def get_range(self, key: str, start: int, end: int) -> bytes:
        return self.get_range_tagged(key, start, end)[0]

    def get_range_tagged(self, key: str, start: int, end: int) -> tuple[bytes, str | None]:
        data, _, tag = self._read(key, start, end)
        return data, tag

    def read_start(self, key: str, length: int) -> tuple[bytes, ObjectInfo, str | None]:
        """See :func:`arrowlog.storage.read_start`: one open, its stat and a read."""
        data, st, tag = self._read(key, 0, length)
        return data, ObjectInfo(key, st.st_size, st.st_mtime_ns // 1_000_000), tag

    def _read(self, key: str, start: int, end: int) -> tuple[bytes, os.stat_result, str]:
        """Bytes ``[start, end)``, the file's stat and its tag, through one descriptor."""
        path = self._path(key)
        try:
            with path.open("rb") as f:
                # the file's identity, from the descriptor the bytes are read
                # through: objects are written once, so a file at the key
                # later differs in inode, its generation, change time or size
                st = os.fstat(f.fileno())
                generation = _generation(f.fileno())
                f.seek(start)
                data = f.read(max(0, end - start))
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(key) from None
        who = f"{st.st_ino:x}" if generation is None else f"{st.st_ino:x}.{generation:x}"
        return data, st, f"{st.st_dev:x}-{who}-{st.st_ctime_ns:x}-{st.st_size:x}"

    def head(self, key: str) -> ObjectInfo:
        path = self._path(key)
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            raise FileNotFoundError(key) from None
        if not path.is_file():
            raise FileNotFoundError(key)
        return ObjectInfo(key, st.st_size, st.st_mtime_ns // 1_000_000)

    def put_if_absent(self, key: str, data: Blob) -> None:
        path = self._path(key)
        tmp_dir = self._tmp_dir()
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=tmp_dir)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                if self._fsync:
                    f.flush()
                    os.fsync(f.fileno())
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise FileExistsError(key) from None
        finally:
            os.unlink(tmp)
        if self._fsync:
            _fsync_dir(path.parent)

    def list(
        self, prefix: str, *, start_after: str | None = None, limit: int | None = None
    ) -> Iterator[ObjectInfo]:
        check_prefix(prefix)
        # Walk only the deepest directory that can hold keys with this prefix.
        base = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        top = self._root.joinpath(*base.split("/")) if base else self._root
        keys: list[ObjectInfo] = []
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = Path(dirpath).relative_to(self._root).as_posix()
            stem = "" if rel == "." else rel + "/"
            for name in filenames:
                key = stem + name
                if name.startswith(".") or not key.startswith(prefix):
                    continue
                if start_after is not None and key <= start_after:
                    continue
                try:
                    st = os.stat(os.path.join(dirpath, name))
                except FileNotFoundError:  # deleted while we walked
                    continue
                keys.append(ObjectInfo(key, st.st_size, st.st_mtime_ns // 1_000_000))
        keys.sort(key=lambda info: info.key)
        if limit is not None:
            keys = keys[:limit]
        return iter(keys)

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(key).unlink()

    def close(self) -> None:
        pass


def _fsync_dir(path: Path) -> None:
    # The new directory entry is what makes the object exist: sync it too.
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: Linux's FS_IOC_GETVERSION (_IOR('v', 1, long))
_FS_IOC_GETVERSION = 0x80087601


def _generation(fd: int) -> int | None:
    """The inode's generation: ext4 (at random), XFS and btrfs give an inode a
    new one for each file created on it. A file on a freed inode then differs
    from the one before even when both got the same change time (whole seconds
    on some filesystems, a 4 ms tick on ext4 before Linux 6.13). None where
    the filesystem or the system has none."""
    if fcntl is None:
        return None
    try:
        # the kernel writes an int at the start of the buffer
        raw = fcntl.ioctl(fd, _FS_IOC_GETVERSION, bytes(8))
    except OSError:
        return None
    return int.from_bytes(raw[:4], sys.byteorder)
