"""Fixtures of the command-line tests (their helpers: :mod:`tests.support.cli`)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A local root named by ARROWLOG_ROOT, as a user would set it."""
    path = tmp_path / "log"
    monkeypatch.setenv("ARROWLOG_ROOT", str(path))
    return path
