"""``python -m tests.soak --store local|s3|azure|gcs --seconds N --seed S``: run one soak,
print its counts and anomalies, exit 1 if any anomaly was found."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

from tests.soak.runner import OVERTIME, run, store_for


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--store", choices=["local", "s3", "azure", "gcs"], default="local")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, help="replays a run's plan (default: random)")
    parser.add_argument(
        "--overtime",
        type=float,
        default=OVERTIME,
        help="at most this many seconds past --seconds until a transaction committed, a read, "
        "an export, a staged batch and a kill happened (default: %(default)g)",
    )
    parser.add_argument("--dir", type=Path, help="work directory (default: a new temp dir)")
    parser.add_argument(
        "--spark",
        action="store_true",
        help="with the Spark writer (runs past --seconds until killed twice)",
    )
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix=f"arrowlog-soak-{seed}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    with store_for(args.store, workdir) as spec:
        report = run(
            spec, seconds=args.seconds, seed=seed, workdir=workdir, spark=args.spark,
            overtime=args.overtime,
        )  # fmt: skip
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
