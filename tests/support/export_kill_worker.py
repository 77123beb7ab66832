"""``arrowlog export-delta`` in a child process that SIGKILLs itself at one
point of the export (a real kill: no ``finally``, no cleanup):

    python -m tests.support.export_kill_worker {mid-read|after-commit} ARGV...

- ``mid-read``: delta-rs has the table's version and the export's app
  transactions in hand and is writing the range's data files; the process
  dies when delta-rs asks for the range's second batch;
- ``after-commit``: delta-rs has committed; the command has not returned.

ARGV is the command line after ``arrowlog``.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from typing import Any

import deltalake
import pyarrow as pa

from arrowlog.cli import main as cli


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    point, argv = sys.argv[1], sys.argv[2:]
    real = deltalake.write_deltalake

    def write(table_or_uri: Any, data: Any, **kwargs: Any) -> None:
        properties = kwargs.get("commit_properties")
        if properties is None or not properties.app_transactions:
            return real(table_or_uri, data, **kwargs)  # the table's creation
        if point == "mid-read":
            source: pa.RecordBatchReader = data

            def batches() -> Iterator[pa.RecordBatch]:
                for n, batch in enumerate(source):
                    if n == 1:
                        _die()
                    yield batch

            data = pa.RecordBatchReader.from_batches(source.schema, batches())
        real(table_or_uri, data, **kwargs)
        if point == "after-commit":
            _die()
        return None

    deltalake.write_deltalake = write
    sys.exit(cli(argv))


if __name__ == "__main__":
    main()
