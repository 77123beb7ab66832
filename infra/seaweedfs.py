"""The throwaway SeaweedFS server now lives in the package (``arrowlog s3-server``
runs it); tests and benchmarks keep importing it from here.

    python -m infra.seaweedfs            # same as: arrowlog s3-server
"""

from __future__ import annotations

import sys

from arrowlog._seaweedfs import (
    ACCESS_KEY,
    SECRET_KEY,
    S3Server,
    WeedMissingError,
    running,
    start,
    weed_binary,
)

__all__ = [
    "ACCESS_KEY",
    "SECRET_KEY",
    "S3Server",
    "WeedMissingError",
    "running",
    "start",
    "weed_binary",
]

if __name__ == "__main__":
    from arrowlog.cli import main

    sys.exit(main(["s3-server", *sys.argv[1:]]))
