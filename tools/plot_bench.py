"""Draw the writers suite's results (``python -m bench --suite writers``) as
the README's plot: appends/s against writers per partition, shared and
spread, per backend, one panel per kind of writer.

    python tools/plot_bench.py                      # bench/results/latest.json -> docs/writers.svg
    python tools/plot_bench.py --plain              # the --plain run -> docs/writers-plain.svg
    python tools/plot_bench.py --results R --out O
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # bench is a folder of the repository, not installed

from bench.plot import writers_svg  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "latest.json")
    parser.add_argument("--out", type=Path)
    parser.add_argument(
        "--plain", action="store_true", help="the run with --plain (staged appends off)"
    )
    args = parser.parse_args()
    name, flag = ("writers_plain", " --plain") if args.plain else ("writers", "")
    out = args.out or ROOT / "docs" / f"{name.replace('_', '-')}.svg"
    results = json.loads(args.results.read_text())
    if name not in results:
        sys.exit(f"{args.results} has no {name} results: run python -m bench --suite writers{flag}")
    out.write_text(writers_svg(results[name]))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
