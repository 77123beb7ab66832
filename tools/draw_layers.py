"""Draw the enforced package layers (pyproject.toml, [tool.importlinter]) as
docs/architecture.svg: one band per layer, top to bottom, each package a box.

    python tools/draw_layers.py            # write docs/architecture.svg
    python tools/draw_layers.py --check    # exit 1 if it is out of date
"""

from __future__ import annotations

import sys
from html import escape
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "architecture.svg"
WIDTH, BAND, GAP, MARGIN = 760, 34, 10, 16


def layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (found,) = [
        c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    return [[name.strip("() ") for name in layer.split("|")] for layer in found]


def svg(rows: list[list[str]]) -> str:
    height = MARGIN * 2 + len(rows) * (BAND + GAP) - GAP + 24
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'font-family="sans-serif" font-size="13">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="{MARGIN}" y="{MARGIN + 4}" fill="#555">each layer imports only the layers'
        " below it (make lint: lint-imports)</text>",
    ]
    inner = WIDTH - 2 * MARGIN
    for i, row in enumerate(rows):
        y = MARGIN + 18 + i * (BAND + GAP)
        shade = 235 - int(90 * i / max(1, len(rows) - 1))
        fill = f"rgb({shade},{shade + 10 if shade < 245 else 255},255)"
        box = (inner - GAP * (len(row) - 1)) / len(row)
        for j, name in enumerate(row):
            x = MARGIN + j * (box + GAP)
            label = escape(name.removeprefix("arrowlog.").lstrip("_") or name)
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{box:.1f}" height="{BAND}" rx="5" '
                f'fill="{fill}" stroke="#335"/>'
            )
            out.append(
                f'<text x="{x + box / 2:.1f}" y="{y + BAND / 2 + 5}" text-anchor="middle">'
                f"{label}</text>"
            )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    drawn = svg(layers())
    if "--check" in argv:
        if not OUT.exists() or OUT.read_text() != drawn:
            print(f"{OUT.relative_to(ROOT)} is out of date: run python tools/draw_layers.py")
            return 1
        return 0
    OUT.write_text(drawn)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
