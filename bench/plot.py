"""Line charts as SVG, written by hand (no plotting library is installed):
appends per second against writers, for the README.

A chart is one or more panels side by side; each panel draws every series
as one ``<polyline>`` (and a circle per point), its x axis on a log-2 scale
(1, 2, 4, ... writers), its y axis linear from 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Any

PANEL_WIDTH, PANEL_HEIGHT = 430, 330
#: room around a panel's plot area: left (y labels), right, top (title, legend), bottom
LEFT, RIGHT, TOP, BOTTOM = 62, 16, 74, 44
LAYOUT_COLORS = {"shared": "#d62728", "spread": "#1f77b4"}
LAYOUT_NAMES = {"shared": "one partition", "spread": "one each"}
KIND_LEGEND = {"append": "append", "producer": "producer"}


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[tuple[float, float]]  # (x, y), x > 0
    color: str
    dashed: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    series: Sequence[Series]
    x_label: str = "writers"
    y_label: str = "appends/s"


def y_axis(largest: float) -> tuple[float, float]:
    """The top of a y axis from 0 that shows ``largest``, and the step of its
    grid: 1, 2 or 5 times a power of ten, about five steps."""
    largest = largest if largest > 0 else 1.0
    raw = largest / 5
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw * (1 - 1e-9))
    return math.ceil(largest / step - 1e-9) * step, step


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:g}"


def _panel(panel: Panel, left: float) -> list[str]:
    """The SVG elements of one panel whose box starts at x = ``left``."""
    xs = sorted({x for s in panel.series for x, _ in s.points}) or [1.0]
    top_y, step = y_axis(max((y for s in panel.series for _, y in s.points), default=0.0))
    x0, x1 = left + LEFT, left + PANEL_WIDTH - RIGHT
    y0, y1 = PANEL_HEIGHT - BOTTOM, TOP  # y0: the axis (value 0), y1: the top
    lo, hi = math.log2(xs[0]), math.log2(xs[-1])

    def px(x: float) -> float:
        return x0 if hi == lo else x0 + (math.log2(x) - lo) / (hi - lo) * (x1 - x0)

    def py(y: float) -> float:
        return y0 - y / top_y * (y0 - y1)

    out = [
        f'<text x="{left + PANEL_WIDTH / 2:.1f}" y="18" text-anchor="middle" '
        f'font-weight="bold">{escape(panel.title)}</text>'
    ]
    for i in range(round(top_y / step) + 1):  # horizontal grid and y labels
        value = i * step
        y = py(value)
        out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{x0 - 6}" y="{y + 4:.1f}" text-anchor="end">{_number(value)}</text>')
    for x in xs:  # x ticks at the writer counts measured
        out.append(f'<text x="{px(x):.1f}" y="{y0 + 16}" text-anchor="middle">{_number(x)}</text>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>')
    out.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>')
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{PANEL_HEIGHT - 8}" text-anchor="middle">'
        f"{escape(panel.x_label)}</text>"
    )
    out.append(
        f'<text transform="translate({left + 14},{(y0 + y1) / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(panel.y_label)}</text>'
    )
    for i, s in enumerate(panel.series):
        dash = ' stroke-dasharray="6 4"' if s.dashed else ""
        points = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in s.points)
        out.append(
            f'<polyline points="{points}" fill="none" stroke="{s.color}" stroke-width="2"{dash}>'
            f"<title>{escape(s.name)}</title></polyline>"
        )
        out.extend(
            f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{s.color}"/>'
            for x, y in s.points
        )
        # legend: two columns under the title
        lx, ly = left + 16 + (i % 2) * (PANEL_WIDTH - 32) / 2, 36 + (i // 2) * 16
        out.append(
            f'<line x1="{lx:.1f}" y1="{ly}" x2="{lx + 22:.1f}" y2="{ly}" stroke="{s.color}" '
            f'stroke-width="2"{dash}/>'
        )
        out.append(f'<text x="{lx + 28:.1f}" y="{ly + 4}">{escape(s.name)}</text>')
    return out


def chart_svg(panels: Sequence[Panel]) -> str:
    """An SVG document with ``panels`` side by side."""
    width = PANEL_WIDTH * max(1, len(panels))
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{PANEL_HEIGHT}" '
        f'viewBox="0 0 {width} {PANEL_HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{PANEL_HEIGHT}" fill="#ffffff"/>',
    ]
    for i, panel in enumerate(panels):
        out.extend(_panel(panel, i * PANEL_WIDTH))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def writers_panels(results: dict[str, Any]) -> list[Panel]:
    """One panel per backend in the writers suite's results (each its own
    scale: a local directory takes several times SeaweedFS's appends):
    appends/s against writers, a series per layout (color) and kind of
    writer (solid: plain append, dashed: the others)."""
    rows: list[dict[str, Any]] = results["rows"]
    panels = []
    for backend in dict.fromkeys(r["backend"] for r in rows):
        series = []
        for layout, layout_name in LAYOUT_NAMES.items():
            for kind, kind_name in KIND_LEGEND.items():
                points = [
                    (float(r["writers"]), float(r["appends_per_s"]))
                    for r in rows
                    if r["backend"] == backend and r["layout"] == layout and r["kind"] == kind
                ]
                if points:
                    name = f"{layout_name}, {kind_name}"
                    color = LAYOUT_COLORS[layout]
                    series.append(Series(name, sorted(points), color, dashed=kind != "append"))
        title = f"{backend}, {results['batch_bytes'] >> 10} KiB batches"
        panels.append(Panel(title, series))
    return panels


def writers_svg(results: dict[str, Any]) -> str:
    """The writers suite's scaling table as a chart (see :func:`writers_panels`)."""
    return chart_svg(writers_panels(results))
