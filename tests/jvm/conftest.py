"""The JVM reader's sources compiled once per session for the contract tests
that run its Java self-tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.jvm.jdk import compile_sources


@pytest.fixture(scope="session")
def jvm_classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The classes of the reader's sources and its self-tests', together."""
    classes = tmp_path_factory.mktemp("jvm-classes")
    compile_sources(classes)
    return classes
