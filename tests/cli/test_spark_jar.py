"""``arrowlog spark-jar``: the jar's path for ``spark-submit --jars``, or one
line saying what to install."""

from __future__ import annotations

from pathlib import Path

import pytest

from arrowlog._cache import CACHE_ENV
from arrowlog.spark import jvm
from tests.support.cli import fails, run

pytestmark = pytest.mark.spark


def test_it_prints_the_packages_jar_built_for_this_pyspark(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = run(capsys, "spark-jar")
    assert out == f"{jvm.JAR}\n"
    assert Path(out.strip()).is_file()


def test_without_a_jar_or_a_jdk_it_says_what_to_install_in_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jvm, "JAR", tmp_path / "none.jar")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    err = fails(capsys, 1, "spark-jar")
    assert err.startswith("arrowlog: MissingDependencyError: arrowlog's JVM reader is compiled")
    assert "JDK 17 or newer: no javac found" in err
    assert not (tmp_path / "cache").exists()
