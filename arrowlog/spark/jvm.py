"""The JVM reader's Python half: the jar, :func:`configure`, and the planner.

The jar (``jvm/`` in the repository, built by ``make setup`` into
``arrowlog/spark/jars/``) registers ``arrowlog`` as a JVM DataSource V2 source.
Spark then picks it over the Python source for ``format("arrowlog")``; it reads
batches itself, as Arrow vectors, and hands writes and streams to the Python
source (see docs/spark.md, "The JVM reader").

A read is planned once, by the library's own rules, in Python
(:mod:`arrowlog.spark.jvm_planner`, which the JVM driver runs); executors fetch
the planned segments with no credentials and no Python.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from arrowlog.errors import MissingDependencyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: where ``make setup`` puts the jar (inside the package, so a wheel carries it)
JAR = Path(__file__).parent / "jars" / "arrowlog-spark.jar"
#: the session setting naming the planner's interpreter (the JVM reads it:
#: io/arrowlog/spark/OptionNames.java)
PYTHON_CONF = "spark.arrowlog.python"


def jar_path() -> Path:
    """The JVM source's jar.

    Raises:
        MissingDependencyError: it was not built (``make setup`` builds it).
    """
    if not JAR.is_file():
        raise MissingDependencyError(
            f"the arrowlog JVM reader is not built ({JAR} is missing): run `make setup`, "
            "or read through the Python source (leave out arrowlog.spark.configure)"
        )
    return JAR


def configure(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Add arrowlog's JVM reader to a session being built (as delta-spark's
    ``configure_spark_with_delta_pip``): ``spark.jars`` gains the jar, and the
    planner runs with this interpreter. In a local session where nothing names
    PySpark's interpreter (``PYSPARK_PYTHON``, ``spark.pyspark.python``), it
    sets ``PYSPARK_PYTHON`` to this one: Spark's default, ``python3`` on the
    PATH, is often another (a virtualenv's python run by its path, not
    activated) that cannot import arrowlog, and ``format("arrowlog")`` would not
    be found. Call it before the session's JVM starts.

    Raises:
        MissingDependencyError: the jar was not built, or was built against
            another pyspark (Spark's internal classes it extends change).
    """
    import pyspark

    jar = str(jar_path())
    built = built_against(Path(jar))
    if _minor(built) != _minor(pyspark.__version__):
        raise MissingDependencyError(
            f"the arrowlog JVM reader was built against pyspark {built}, this is pyspark "
            f"{pyspark.__version__}: run `make setup` again to rebuild it"
        )
    conf = builder._options  # the options set so far
    jars = [j for j in str(conf.get("spark.jars", "")).split(",") if j]
    builder = builder.config("spark.jars", ",".join([*jars, jar])).config(
        PYTHON_CONF, sys.executable
    )
    local = str(conf.get("spark.master", "local")).startswith("local")
    named = os.environ.get("PYSPARK_PYTHON") or conf.get("spark.pyspark.python")
    if local and not named:
        # the environment the JVM starts with: Spark's lookup of Python data
        # sources reads PYSPARK_PYTHON from it, never the session's conf
        os.environ["PYSPARK_PYTHON"] = sys.executable
    return builder


def spark_jars() -> Path:
    """The jars of the installed pyspark, which the JVM reader compiles against."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


#: inside the jar: the pyspark version it was compiled against
BUILD_INFO = "io/arrowlog/spark/build.properties"


def write_build_info(classes: str) -> None:
    """Record the pyspark version in the classes about to be jarred (make setup)."""
    import pyspark

    target = Path(classes) / BUILD_INFO
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"spark.version={pyspark.__version__}\n")


def built_against(jar: Path) -> str:
    """The pyspark version ``jar`` was compiled against ("unknown" if it says none)."""
    import zipfile

    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read(BUILD_INFO).decode()
    except (KeyError, OSError, zipfile.BadZipFile):
        return "unknown"
    for line in text.splitlines():
        if line.startswith("spark.version="):
            return line.split("=", 1)[1].strip()
    return "unknown"


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])
