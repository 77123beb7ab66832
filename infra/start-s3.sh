#!/usr/bin/env bash
# Start a throwaway SeaweedFS S3 server on 127.0.0.1 for manual use (Ctrl-C stops it).
# It prints the endpoint, credentials and an arrowlog URL to use with them.
set -euo pipefail
cd "$(dirname "$0")/.."
make setup >/dev/null
exec .venv/bin/python -m infra.seaweedfs
