"""The supported pyspark range has one lower bound: the spark extra in
pyproject.toml says it, ``make test-spark-min`` runs Spark tests under exactly it
(the Makefile reads it from pyproject.toml), and ``arrowlog.spark`` refuses an
older pyspark with a clear error instead of a missing name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest
import tomllib

import arrowlog
from arrowlog.spark.versions import PYSPARK_MIN, release, require_pyspark

ROOT = Path(__file__).resolve().parents[2]


def extra_bounds() -> tuple[str, str]:
    """The ``pyspark>=LOW,<HIGH`` of pyproject's spark extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [spec] = [r for r in project["optional-dependencies"]["spark"] if r.startswith("pyspark")]
    match = re.fullmatch(r"pyspark>=([\d.]+),<([\d.]+)", spec)
    assert match, f"the spark extra's pyspark is not a >=,< range: {spec!r}"
    return match.group(1), match.group(2)


def test_pyproject_and_the_source_name_the_same_lower_bound() -> None:
    low, high = extra_bounds()
    assert release(low) == PYSPARK_MIN
    assert release(low) < release(high)


def test_make_test_spark_min_pins_the_lower_bound_of_pyproject() -> None:
    # -n prints the recipe without running it; the stamp may or may not be current,
    # so the install line (pyspark==LOW) is printed only sometimes, the run always.
    out = subprocess.run(
        ["make", "--no-print-directory", "-n", "test-spark-min"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    pins = set(re.findall(r"ARROWLOG_SPARK_MIN=(\S+)", out))
    pins |= set(re.findall(r"'pyspark==([^']+)'", out))
    assert pins == {extra_bounds()[0]}, out


def test_the_pyspark_under_test_is_in_the_supported_range() -> None:
    """Under ``make test-spark-min``: exactly the lower bound (so that target
    cannot quietly test the newest pyspark); anywhere else: inside the range."""
    low, high = extra_bounds()
    pinned = os.environ.get("ARROWLOG_SPARK_MIN")
    if pinned is not None:
        assert pinned == low
        assert pyspark.__version__ == low
    assert release(low) <= release(pyspark.__version__) < release(high)


@pytest.mark.parametrize("version", ["4.2", "4.2.0", "4.2.1", "4.3.0", "4.3.0.dev1", "5.0.0"])
def test_supported_versions_pass(version: str) -> None:
    require_pyspark(version)


@pytest.mark.parametrize("version", ["3.5.3", "4.0.0", "4.1", "4.1.4", "4.1.0+local"])
def test_older_versions_are_refused_naming_the_bound(version: str) -> None:
    with pytest.raises(arrowlog.errors.MissingDependencyError) as caught:
        require_pyspark(version)
    message = str(caught.value)
    assert f"needs pyspark>=4.2.0, found pyspark {version}" in message
    assert "pip install --upgrade 'arrowlog[spark]'" in message
    assert isinstance(caught.value, ImportError) and caught.value.name == "pyspark"


@pytest.mark.slow
def test_importing_arrowlog_spark_under_pyspark_4_1_fails_clearly() -> None:
    """The check runs on import, before the source module (which, under a real
    4.0, stops on a bare ImportError of DataSourceStreamArrowWriter)."""
    script = (
        "import pyspark; pyspark.__version__ = '4.1.0'\n"
        "try:\n"
        "    import arrowlog.spark\n"
        "except ImportError as e:\n"
        "    print(type(e).__name__, e)\n"
        "import sys; print('source imported:', 'arrowlog.spark.source' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith(
        "MissingDependencyError the Spark data source (arrowlog.spark) needs "
        "pyspark>=4.2.0, found pyspark 4.1.0"
    ), out
    assert out.endswith("source imported: False\n")
