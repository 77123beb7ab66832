"""Start a throwaway SeaweedFS S3 server by hand (``infra/start-s3.sh`` runs this);
the server itself is :mod:`arrowlog.testing.seaweedfs`.

    python -m infra.seaweedfs            # same as: arrowlog s3-server
"""

from __future__ import annotations

import sys

if __name__ == "__main__":
    from arrowlog.cli import main

    sys.exit(main(["s3-server", *sys.argv[1:]]))
