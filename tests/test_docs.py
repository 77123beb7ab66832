"""The docs cite what exists: every repository path a doc names is there, every
cross-reference to an arrowlog name resolves, and docs/architecture.md draws
the layers that lint-imports enforces (pyproject.toml), in the same order."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

from tests.support.suite_order import LONG_FILES

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
SOURCES = sorted((ROOT / "arrowlog").rglob("*.py"))

#: a repository path: starts at one of the top-level folders
_PATH = re.compile(
    r"(?<![\w/.-])((?:arrowlog|tests|bench|jvm|infra|docs|spark_jobs|tools|\.ci)/[\w./-]*\w)"
)
#: paths that are outputs of a command, not files in the repository
_OUTPUTS = ("bench/results/",)
#: a Sphinx-style cross-reference to an arrowlog name
_REF = re.compile(r":(?:mod|func|class|meth|data|attr|exc):`~?(arrowlog(?:\.\w+)+)`")


def _cited_paths(text: str) -> list[str]:
    found = []
    for match in _PATH.finditer(text):
        path = match.group(1).split("::")[0]
        placeholder = text[match.end() : match.end() + 1] in ("<", "{", "*")
        if placeholder or any(c in path for c in "*<>{}") or path.startswith(_OUTPUTS):
            continue
        found.append(path)
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_doc_cites_exists(doc: Path) -> None:
    missing = [p for p in _cited_paths(doc.read_text()) if not (ROOT / p).exists()]
    assert missing == [], f"{doc.name} cites files that do not exist: {missing}"


def _resolves(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_cross_reference_resolves() -> None:
    broken = [
        f"{path.relative_to(ROOT)}:{n}: {ref}"
        for path in [*DOCS, *SOURCES]
        for n, line in enumerate(path.read_text().splitlines(), 1)
        for ref in _REF.findall(line)
        if not _resolves(ref)
    ]
    assert broken == []


def test_the_paths_check_sees_a_missing_file() -> None:
    assert _cited_paths(
        "see `arrowlog/nowhere.py`, tests/x/test_<name>.py, tests/x/test_y.py::z"
    ) == [
        "arrowlog/nowhere.py",
        "tests/x/test_y.py",
    ]
    assert not _resolves("arrowlog.read.nowhere")
    assert _resolves("arrowlog.read.consumer.Consumer")


def _contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (layers,) = [
        c["layers"] for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
    ]
    return [[m.strip("() ") for m in layer.split("|")] for layer in layers]


def test_architecture_doc_draws_the_enforced_layers_in_order() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    drawn = re.search(r"```text\nLAYERS\n(.*?)```", text, re.S)
    assert drawn, "docs/architecture.md has no ```text LAYERS block"
    rows = [
        [name.strip() for name in row.split("|")]
        for row in drawn.group(1).strip().splitlines()
        if row.strip()
    ]
    assert rows == _contract_layers()


def test_architecture_picture_is_drawn_from_the_contract() -> None:
    drawn = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "draw_layers.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert drawn.returncode == 0, drawn.stdout + drawn.stderr


def test_every_path_the_code_cites_exists() -> None:
    missing = [
        f"{path.relative_to(ROOT)}: {cited}"
        for path in SOURCES
        for cited in _cited_paths(path.read_text())
        if not (ROOT / cited).exists()
    ]
    assert missing == []


def test_every_file_the_suite_schedules_first_exists() -> None:
    """tests/support/suite_order.py names test files: a renamed one would lose
    its place without a word."""
    assert [name for name in LONG_FILES if not (ROOT / name).is_file()] == []
