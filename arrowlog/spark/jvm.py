"""The JVM reader's Python half: the jar, :func:`configure`, and the planner.

The jar (its sources in ``arrowlog/spark/java/``; built by ``make setup`` into
``arrowlog/spark/jars/``, or on first use into the user's cache) registers
``arrowlog`` as a JVM DataSource V2 source. Spark then picks it over the Python
source for ``format("arrowlog")``; it reads batches itself, as Arrow vectors,
and hands writes and streams to the Python source (see docs/spark.md, "The JVM
reader").

A read is planned once, by the library's own rules, in Python
(:mod:`arrowlog.spark.jvm_planner`, which the JVM driver runs); executors fetch
the planned segments with no credentials and no Python.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

from arrowlog._cache import CACHE_ENV, cache_dir
from arrowlog.errors import InvalidConfigError, MissingDependencyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

#: the JVM reader's sources, in the package: every ``.java`` file is compiled,
#: every other file is a resource copied into the jar as it is
SOURCES = Path(__file__).parent / "java"
#: where ``make setup`` puts the jar (inside the package, so a wheel built
#: after it carries it)
JAR = Path(__file__).parent / "jars" / "arrowlog-spark.jar"
#: the session setting naming the planner's interpreter (the JVM reads it:
#: io/arrowlog/spark/OptionNames.java)
PYTHON_CONF = "spark.arrowlog.python"
#: the lowest Java the jar is compiled for (Spark 4 needs 17 too)
JAVA_RELEASE = "17"
#: javac's warnings that are errors in ``make setup`` (strict builds)
_STRICT = ("-Xlint:all,-path,-serial,-classfile", "-Werror")


def jar_path() -> Path:
    """The JVM source's jar for the installed pyspark: the package's own if it
    was built against this pyspark's minor version (``make setup``, or a wheel
    built after it), else one compiled against this pyspark into the user's
    cache (:func:`cache_dir`), now if it is not there yet (about 10 s, once per
    arrowlog and pyspark version).

    Raises:
        MissingDependencyError: no jar fits and there is no JDK to compile one.
    """
    import pyspark

    if JAR.is_file() and _minor(built_against(JAR)) == _minor(pyspark.__version__):
        return JAR
    cached = cached_jar()
    # a jar that does not say what it was built against (cut short by a crash
    # before it reached the disk, or not a jar) is compiled again
    if not cached.is_file() or built_against(cached) != pyspark.__version__:
        build_jar(cached)
    return cached


def cached_jar() -> Path:
    """The cache's jar for these sources and the installed pyspark."""
    import pyspark

    key = f"{sources_digest()[:16]}-pyspark-{pyspark.__version__}"
    return cache_dir() / "spark" / key / "arrowlog-spark.jar"


def sources_digest() -> str:
    """A SHA-256 of the JVM reader's sources (names and contents): a jar
    compiled from other sources is never taken for this one."""
    digest = hashlib.sha256()
    for path in sorted(p for p in SOURCES.rglob("*") if p.is_file()):
        digest.update(path.relative_to(SOURCES).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def find_javac() -> Path | None:
    """``$JAVA_HOME/bin/javac``, else the first ``javac`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return Path(home) / "bin" / "javac"
    found = shutil.which("javac")
    return Path(found) if found else None


def build_jar(dest: str | Path, *, strict: bool = False) -> Path:
    """Compile the JVM reader against the installed pyspark's jars into the
    jar ``dest``. The jar appears whole or not at all (written beside it, then
    renamed): processes building the same jar at once each leave a whole one,
    and a JVM that has the old one open keeps reading it.

    Args:
        strict: javac's lint warnings are errors (``make setup``); a user's
            build leaves them out, as a newer JDK may warn of more.

    Raises:
        MissingDependencyError: no ``javac``, or it failed (a JDK older than 17).
    """
    dest = Path(dest)
    javac = find_javac()
    if javac is None:
        raise MissingDependencyError(
            f"arrowlog's JVM reader is compiled once against your pyspark, and that needs a "
            f"JDK {JAVA_RELEASE} or newer: no javac found (JAVA_HOME "
            f"{os.environ.get('JAVA_HOME') or 'is not set'}, none on the PATH). Install one "
            "(e.g. apt install openjdk-17-jdk-headless) or set JAVA_HOME to one, or read "
            "through the Python source (leave out arrowlog.spark.configure)",
            name="javac",
        )
    import pyspark

    _writable(dest.parent)  # before the compilation, not after it
    log.warning(
        "compiling arrowlog's JVM reader against pyspark %s into %s (once for this "
        "arrowlog and pyspark)",
        pyspark.__version__,
        dest,
    )
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    with tempfile.TemporaryDirectory(prefix="arrowlog-jar-") as work:
        classes = Path(work) / "classes"
        argfile = Path(work) / "sources.txt"
        argfile.write_text("".join(f'"{s}"\n' for s in sources))
        compiled = subprocess.run(
            [
                *(str(javac), "--release", JAVA_RELEASE, *(_STRICT if strict else ("-nowarn",))),
                *("-encoding", "UTF-8", "-cp", f"{spark_jars()}/*", "-d", str(classes)),
                f"@{argfile}",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if compiled.returncode != 0:
            output = (compiled.stdout + compiled.stderr).strip().splitlines()
            # the first error, not the warnings javac prints after the errors
            first = next((i for i, line in enumerate(output) if ": error:" in line), None)
            shown = output[-8:] if first is None else output[first : first + 8]
            raise MissingDependencyError(
                f"compiling arrowlog's JVM reader with {javac} failed (it needs a JDK "
                f"{JAVA_RELEASE} or newer): " + " | ".join(shown),
                name="javac",
            )
        for resource in SOURCES.rglob("*"):
            if resource.is_file() and resource.suffix != ".java":
                target = classes / resource.relative_to(SOURCES)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(resource, target)
        write_build_info(classes)
        _write_jar(classes, dest)
    return dest


def _writable(directory: Path) -> None:
    """Raises MissingDependencyError if no jar can be written into ``directory``."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK):
            raise PermissionError(f"{directory} is not writable")
    except OSError as e:
        raise MissingDependencyError(
            f"arrowlog's JVM reader is compiled once into a cache directory, and "
            f"{directory} cannot be written ({e}): set {CACHE_ENV} to a writable directory",
            name="javac",
        ) from None


def _write_jar(classes: Path, dest: Path) -> None:
    """Jar ``classes`` into ``dest``, whole or not at all: written beside it
    under a name of its own (threads of one process build at once too), on
    disk before it is renamed (a crash after the rename never leaves a jar
    cut short)."""
    fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".partial", dir=dest.parent)
    partial = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as jar:
                jar.writestr(
                    "META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: arrowlog\r\n"
                )
                for path in sorted(p for p in classes.rglob("*") if p.is_file()):
                    jar.write(path, path.relative_to(classes).as_posix())
            out.flush()
            os.fsync(out.fileno())
        partial.chmod(0o644)  # mkstemp's 0600 would keep other users' Spark out
        os.replace(partial, dest)
    except OSError as e:
        partial.unlink(missing_ok=True)
        raise MissingDependencyError(
            f"writing arrowlog's JVM reader to {dest} failed ({e}): set {CACHE_ENV} to a "
            "directory with room",
            name="javac",
        ) from None


def configure(builder: SparkSession.Builder) -> SparkSession.Builder:
    """Add arrowlog's JVM reader to a session being built (as delta-spark's
    ``configure_spark_with_delta_pip``): ``spark.jars`` gains the jar, and the
    planner runs with this interpreter. In a local session where nothing names
    PySpark's interpreter (``PYSPARK_PYTHON``, ``spark.pyspark.python``), it
    sets ``PYSPARK_PYTHON`` to this one: Spark's default, ``python3`` on the
    PATH, is often another (a virtualenv's python run by its path, not
    activated) that cannot import arrowlog, and ``format("arrowlog")`` would not
    be found. Call it before the session's JVM starts.

    The jar is the one built for this pyspark's minor version (Spark's
    internal classes it extends change between them): see :func:`jar_path`.

    Raises:
        MissingDependencyError: no jar fits this pyspark and no JDK is there
            to compile one.
    """
    conf = getattr(builder, "_options", None)  # the options set so far
    if not isinstance(conf, dict):
        raise InvalidConfigError(
            f"configure() takes SparkSession.builder, before getOrCreate(), not a "
            f"{type(builder).__name__}: the JVM reader has to be on the classpath when the "
            "session's JVM starts (a running session reads through arrowlog.spark.register)"
        )
    jar = str(jar_path())
    # the builder's spark.jars replaces what spark-submit would have set: keep those
    given = conf.get("spark.jars")
    jars = [j for j in str(given if given is not None else launch_jars()).split(",") if j]
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


def launch_jars() -> str:
    """The ``spark.jars`` spark-submit starts a PySpark session with when the
    builder sets none: ``--jars`` in ``PYSPARK_SUBMIT_ARGS``, else the
    ``spark.jars`` of ``spark-defaults.conf`` (in ``$SPARK_CONF_DIR``, else the
    Spark home's ``conf/``)."""
    args = shlex.split(os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        if arg == "--jars" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--jars="):
            return arg.split("=", 1)[1]
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not conf_dir:
        from pyspark.find_spark_home import _find_spark_home

        conf_dir = os.path.join(_find_spark_home(), "conf")
    try:
        text = Path(conf_dir, "spark-defaults.conf").read_text()
    except OSError:
        return ""
    for line in text.splitlines():
        # a Java properties line: key and value apart by '=', ':' or blanks
        found = re.match(r"\s*spark\.jars\s*[=:\s]\s*(.*?)\s*$", line)
        if found:
            return found.group(1)
    return ""


def spark_jars() -> Path:
    """The jars of the installed pyspark, which the JVM reader compiles against."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


#: inside the jar: the pyspark version it was compiled against
BUILD_INFO = "io/arrowlog/spark/build.properties"


def write_build_info(classes: str | Path) -> None:
    """Record the pyspark version in the classes about to be jarred."""
    import pyspark

    target = Path(classes) / BUILD_INFO
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"spark.version={pyspark.__version__}\n")


def built_against(jar: Path) -> str:
    """The pyspark version ``jar`` was compiled against ("unknown" if it says none)."""
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
