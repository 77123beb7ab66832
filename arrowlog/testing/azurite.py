"""Start a throwaway Azurite (Azure Blob Storage emulator) on 127.0.0.1.

Azurite comes from the npm registry: it is installed once, with the ``npm`` on
the PATH, into the user's cache (``$ARROWLOG_CACHE_DIR``, else
``$XDG_CACHE_HOME/arrowlog``, else ``~/.cache/arrowlog``), and started on a free
loopback port with a throwaway data directory. The container is created with one
request signed with Azurite's well-known development key (public: Microsoft
documents it), so ``az://<container>/<prefix>`` stores need no Azure SDK.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import hashlib
import hmac
import os
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arrowlog._cache import cache_dir
from arrowlog.testing.loopback import dies_with_this_process, free_port, stop_group, wait_for

#: the Azurite release the suite is tested against
VERSION = "3.37.0"
ACCOUNT = "devstoreaccount1"
#: Azurite's development account key (public, documented by Microsoft)
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
#: how long ``npm install`` may take before Azurite counts as not installable
INSTALL_TIMEOUT_S = 600.0
#: Azure container names are 3 to 63 lowercase letters, digits and dashes
CONTAINER = "arrowlog"


class AzuriteMissingError(RuntimeError):
    """Azurite cannot be installed here (no npm, or the registry unreachable)."""


@dataclass
class AzuriteServer:
    endpoint: str  # http://127.0.0.1:<port>/devstoreaccount1
    container: str = CONTAINER
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    workdir: Path | None = None

    @property
    def storage_options(self) -> dict[str, Any]:
        return {
            "account_name": ACCOUNT,
            "account_key": KEY,
            "endpoint": self.endpoint,
            "allow_http": True,
        }

    def url(self, prefix: str) -> str:
        return f"az://{self.container}/{prefix}"

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is None:
            return
        # Azurite waits for clients' keep-alive connections before it exits on
        # SIGTERM: give it a moment, then kill it
        stop_group(proc, grace_s=3)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def azurite_binary() -> Path:
    """``azurite-blob`` of :data:`VERSION`, installed into the cache on first use.

    Raises:
        AzuriteMissingError: no npm, or the install failed.
    """
    home = cache_dir() / f"azurite-{VERSION}"
    binary = home / "node_modules" / ".bin" / "azurite-blob"
    if binary.exists():
        return binary
    npm = shutil.which("npm")
    if npm is None:
        raise AzuriteMissingError("Azurite needs npm (Node.js 18 or newer) on the PATH")
    home.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=".azurite-", dir=home.parent))
    try:
        try:
            returncode, stderr = _run_in_group(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(partial),
                 f"azurite@{VERSION}"],
                INSTALL_TIMEOUT_S,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise AzuriteMissingError(
                f"npm install azurite@{VERSION} did not finish in {INSTALL_TIMEOUT_S:g} s: "
                "is the npm registry reachable (npm config get registry)?"
            ) from None
        if returncode != 0:
            raise AzuriteMissingError(f"npm install azurite@{VERSION} failed: {stderr[-500:]}")
        if not (partial / binary.relative_to(home)).exists():
            raise AzuriteMissingError(
                f"npm install azurite@{VERSION} succeeded but installed no {binary.name}"
            )
        with contextlib.suppress(OSError):  # another process installed it first
            partial.rename(home)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return binary


def create_container(endpoint: str, name: str) -> None:
    """Create container ``name`` (Azure's REST API, SharedKey-signed)."""
    date = email.utils.formatdate(usegmt=True)
    version = "2021-08-06"
    # the string to sign: the verb, 11 standard headers (none here), the x-ms-
    # headers and the resource (path-style: the account's name twice)
    to_sign = (
        "PUT\n" + "\n" * 11 + f"x-ms-date:{date}\nx-ms-version:{version}\n"
        f"/{ACCOUNT}/{ACCOUNT}/{name}\nrestype:container"
    )
    signature = base64.b64encode(
        hmac.new(base64.b64decode(KEY), to_sign.encode(), hashlib.sha256).digest()
    ).decode()
    request = urllib.request.Request(
        f"{endpoint}/{name}?restype=container",
        method="PUT",
        headers={
            "x-ms-date": date,
            "x-ms-version": version,
            "Authorization": f"SharedKey {ACCOUNT}:{signature}",
        },
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


def start(workdir: Path | None = None, *, timeout: float = 60.0) -> AzuriteServer:
    """Azurite on a free loopback port, its container created.

    Raises:
        AzuriteMissingError: Azurite cannot be installed.
        RuntimeError: it did not start in ``timeout`` seconds.
    """
    binary = azurite_binary()
    data = Path(tempfile.mkdtemp(prefix="azurite-", dir=workdir))
    port = free_port()
    command = [
        str(binary),
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--location",
        str(data),
        "--skipApiVersionCheck",
        "--loose",
        "--silent",
    ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        preexec_fn=dies_with_this_process(),
    )
    server = AzuriteServer(f"http://127.0.0.1:{port}/{ACCOUNT}", process=proc, workdir=data)
    try:
        wait_for(port, proc, "Azurite", timeout)
        create_container(server.endpoint, CONTAINER)
    except Exception:
        server.stop()
        raise
    return server


@contextlib.contextmanager
def running(workdir: Path | None = None) -> Iterator[AzuriteServer]:
    server = start(workdir)
    try:
        yield server
    finally:
        server.stop()


def _run_in_group(args: list[str], timeout: float) -> tuple[int, str]:
    """Run ``args`` in a process group of its own; on timeout, the whole group
    (npm and what it started) is killed before TimeoutExpired is raised."""
    proc = subprocess.Popen(
        args,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return proc.returncode, stderr
