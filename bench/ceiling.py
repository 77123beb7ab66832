"""How near a new client's read comes to the least a client that keeps
arrowlog's checks must do, against a LIST and GETs that check nothing.

Three reads of the same partition on SeaweedFS, each side in a process of its
own (:mod:`bench.sides`), round by round:

- ``listed``: obstore's new store, a LIST, parallel GETs, pyarrow's decoding
  (the read bench's new-client baseline);
- ``checked``: what any client keeping arrowlog's checks must do at least: the
  topic's latest version, a LIST, then in parallel each segment's GET and its
  checks (file CRC, header, columns), the offsets chained from 0, one table;
  none of the client's read machinery (listing, read-ahead, prefetch, the
  known log, read_committed);
- ``cold``: ``arrowlog.connect`` and ``read``, as the read bench's new client.

``checked`` against ``listed`` is what the checks cost on this machine;
``cold`` against ``checked`` is what arrowlog's client adds to them.

    python -m bench.ceiling [--kib 1024] [--count 64] [--rounds 60] [--compression none]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from arrowlog.config import Compression
from arrowlog.testing import seaweedfs
from bench.__main__ import on_server
from bench.core import make_batch, paired_ratio, read_spec
from bench.sides import Side

READS = ("listed", "checked", "cold")


def measure(kib: int, count: int, rounds: int, compression: Compression) -> dict[str, list[float]]:
    """The seconds of each read, per round, on a partition of ``count``
    appends of ``kib`` KiB batches."""
    with tempfile.TemporaryDirectory(prefix="arrowlog-ceiling-") as tmp:
        server = seaweedfs.start(Path(tmp) / "seaweedfs")
        try:
            backend = on_server(server, "seaweedfs")
            topic = f"ceiling-{kib}-{compression.value}"
            spec = read_spec(backend, topic, make_batch(kib * 1024), count, compression)
            times: dict[str, list[float]] = {name: [] for name in READS}
            sides = {name: Side(spec) for name in READS}
            try:
                for name in READS:  # connections, pages: untimed
                    sides[name].time(name)
                for r in range(rounds):
                    for name in reversed(READS) if r % 2 else READS:
                        times[name].append(sides[name].time(name))
            finally:
                for side in sides.values():
                    side.close()
            return times
        finally:
            server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.ceiling", description=__doc__)
    parser.add_argument("--kib", type=int, default=1024, help="each batch's own size")
    parser.add_argument("--count", type=int, default=64, help="segments in the partition")
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--compression", default="none", choices=[c.value for c in Compression])
    args = parser.parse_args(argv)
    times = measure(args.kib, args.count, args.rounds, Compression(args.compression))
    print(f"{args.count} x {args.kib} KiB {args.compression} on seaweedfs, {args.rounds} rounds")
    for name in READS:
        print(f"  {name:8s} {statistics.median(times[name]) * 1e3:7.1f} ms (median)")
    print(
        f"  checked / listed: {paired_ratio(times['listed'], times['checked']):.3f}"
        "   (what the checks leave of a LIST and GETs that check nothing)"
    )
    print(
        f"  cold / checked:   {paired_ratio(times['checked'], times['cold']):.3f}"
        "   (what arrowlog's client leaves of the least a checking client does)"
    )
    print(
        f"  cold / listed:    {paired_ratio(times['listed'], times['cold']):.3f}"
        "   (the read bench's new-client figure)"
    )


if __name__ == "__main__":
    main()
