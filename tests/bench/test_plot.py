"""The hand-written SVG charts (bench/plot.py): well-formed XML whatever the
names hold, one polyline per series, x on a log-2 scale of writers, y from 0
up, and the writers suite's results drawn one panel per kind of writer."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from bench.plot import Panel, Series, chart_svg, writers_svg, y_axis

SVG = "{http://www.w3.org/2000/svg}"


def _polylines(svg: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return list(root.iter(f"{SVG}polyline"))


def _points(line: ET.Element) -> list[tuple[float, float]]:
    pairs = (p.split(",") for p in line.attrib["points"].split())
    return [(float(x), float(y)) for x, y in pairs]


def test_a_chart_parses_as_xml_with_one_polyline_per_series() -> None:
    panel = Panel(
        "a <title> & more",
        [
            Series("local, one <partition>", [(1, 400.0), (2, 300.0), (4, 200.0)], "#111"),
            Series("s3 & co", [(1, 300.0), (2, 550.0), (4, 800.0)], "#222", dashed=True),
        ],
    )
    lines = _polylines(chart_svg([panel]))
    assert [line.attrib["stroke"] for line in lines] == ["#111", "#222"]
    assert "stroke-dasharray" in lines[1].attrib and "stroke-dasharray" not in lines[0].attrib
    assert [line.findtext(f"{SVG}title") for line in lines] == ["local, one <partition>", "s3 & co"]


def test_writers_go_right_on_a_log_2_scale_and_more_appends_go_up() -> None:
    panel = Panel("t", [Series("s", [(1, 100.0), (2, 200.0), (4, 50.0), (16, 800.0)], "#000")])
    (line,) = _polylines(chart_svg([panel]))
    (x1, y1), (x2, y2), (x4, y4), (x16, y16) = _points(line)
    assert x1 < x2 < x4 < x16
    assert x4 - x2 == pytest.approx(x2 - x1)  # each doubling the same step
    assert x16 - x4 == pytest.approx(2 * (x2 - x1))
    assert y16 < y2 < y1 < y4  # SVG's y grows downwards


def test_the_y_axis_ends_at_a_round_step_above_the_largest_value() -> None:
    cases = {4469.2: (5000, 1000), 985.0: (1000, 200), 478: (500, 100), 1042: (1500, 500),
             1000: (1000, 200), 0: (1, 0.2), 0.3: (0.3, 0.1)}  # fmt: skip
    for largest, (top, step) in cases.items():
        assert y_axis(largest) == pytest.approx((top, step)), largest


def _row(backend: str, kind: str, layout: str, writers: int, rate: float) -> dict[str, Any]:
    return {"backend": backend, "kind": kind, "layout": layout, "writers": float(writers),
            "appends_per_s": rate}  # fmt: skip


def test_the_writers_results_draw_a_panel_per_backend_and_a_series_per_layout_and_kind() -> None:
    rows = [
        _row(backend, kind, layout, n, 100.0 * n)
        for backend in ("local", "seaweedfs")
        for kind in ("append", "producer")
        for layout in ("shared", "spread")
        for n in (1, 2, 4, 8, 16)
    ]
    svg = writers_svg({"rows": rows, "batch_bytes": 65536})
    lines = _polylines(svg)
    assert len(lines) == 8  # 2 backends x 2 layouts x 2 kinds
    assert all(len(_points(line)) == 5 for line in lines)
    dashed = ["stroke-dasharray" in line.attrib for line in lines]
    assert dashed == [False, True] * 4  # the producer's series dashed
    only_local = writers_svg({"rows": [r for r in rows if r["backend"] == "local"],
                              "batch_bytes": 65536})  # fmt: skip
    assert len(_polylines(only_local)) == 4
    width = {name: int(ET.fromstring(doc).attrib["width"]) for name, doc in
             (("both", svg), ("local", only_local))}  # fmt: skip
    assert width["both"] == 2 * width["local"]  # one panel per backend, side by side


def test_make_bench_measures_the_writers_and_draws_the_readmes_plot_from_them() -> None:
    """The README's plot (docs/writers.svg) is what `make bench` measured last:
    the writers suite runs, then tools/plot_bench.py draws its results."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    recipe = subprocess.run(
        ["make", "--no-print-directory", "-n", "bench"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    writers = next(i for i, line in enumerate(recipe) if "-m bench --suite writers" in line)
    plot = next(i for i, line in enumerate(recipe) if "tools/plot_bench.py" in line)
    assert writers < plot
    assert "docs/writers.svg" in (root / "README.md").read_text()
