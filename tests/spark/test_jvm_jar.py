"""Which jar ``arrowlog.spark.configure`` gives Spark: the package's own where it
was built for this pyspark, else one compiled on first use into the user's
cache (a wheel built from a clean clone carries the sources, not a jar), and a
one-line error naming what to install where no JDK is there to compile it."""

from __future__ import annotations

import os
import stat
import zipfile
from pathlib import Path

import pyspark
import pytest

from arrowlog._cache import CACHE_ENV
from arrowlog.errors import InvalidConfigError, MissingDependencyError
from arrowlog.spark import jvm

#: each test that compiles takes about 7 s (javac against pyspark's jars)
pytestmark = pytest.mark.slow


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache, and a package that came with no jar."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(jvm, "JAR", tmp_path / "package" / "arrowlog-spark.jar")
    return tmp_path / "cache"


def fake_jar(path: Path, spark_version: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(jvm.BUILD_INFO, f"spark.version={spark_version}\n")
    return path


def test_without_a_jar_in_the_package_one_is_compiled_into_the_cache_once(cache: Path) -> None:
    jar = jvm.jar_path()
    assert jar.is_relative_to(cache) and jar.is_file()
    assert jvm.built_against(jar) == pyspark.__version__
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
    assert "io/arrowlog/spark/ArrowLogProvider.class" in names
    # the service file that makes format("arrowlog") the JVM source's
    assert "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister" in names
    assert not [n for n in names if n.endswith(".java")]
    built = jar.stat().st_mtime_ns
    assert jvm.jar_path() == jar and jar.stat().st_mtime_ns == built  # not compiled again
    assert [p.name for p in jar.parent.iterdir()] == [jar.name]  # no partial file left


def test_the_packages_jar_is_taken_when_it_was_built_for_this_pyspark_minor(cache: Path) -> None:
    minor = ".".join(pyspark.__version__.split(".")[:2])
    fake_jar(jvm.JAR, f"{minor}.99")
    assert jvm.jar_path() == jvm.JAR
    assert not cache.exists()


def test_a_packages_jar_built_for_another_pyspark_is_passed_over_for_a_compiled_one(
    cache: Path,
) -> None:
    fake_jar(jvm.JAR, "3.5.1")
    jar = jvm.jar_path()
    assert jar.is_relative_to(cache)
    assert jvm.built_against(jar) == pyspark.__version__


def test_a_jar_of_other_sources_is_never_taken_from_the_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache is keyed by the sources' digest and the pyspark version: an
    arrowlog upgrade compiles its own jar instead of reusing the old one."""
    before = jvm.cached_jar()
    fake_jar(before, pyspark.__version__)
    sources = tmp_path / "sources"
    (sources / "io").mkdir(parents=True)
    (sources / "io" / "A.java").write_text("class A {}\n")
    monkeypatch.setattr(jvm, "SOURCES", sources)
    after = jvm.cached_jar()
    assert after != before and after.parent.parent == before.parent.parent


def test_without_a_jdk_the_error_says_what_to_install_and_nothing_is_written(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(MissingDependencyError) as caught:
        jvm.jar_path()
    message = str(caught.value)
    assert "JDK 17 or newer: no javac found" in message
    assert "set JAVA_HOME" in message and "leave out arrowlog.spark.configure" in message
    assert "\n" not in message
    assert not cache.exists()


def test_a_javac_that_fails_is_reported_in_one_line_and_leaves_no_jar(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An old JDK first on the PATH (javac 11 refuses ``--release 17``)."""
    home = tmp_path / "jdk11"
    (home / "bin").mkdir(parents=True)
    javac = home / "bin" / "javac"
    javac.write_text("#!/bin/sh\necho 'error: release version 17 not supported' >&2\nexit 2\n")
    javac.chmod(javac.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(MissingDependencyError) as caught:
        jvm.jar_path()
    message = str(caught.value)
    assert f"compiling arrowlog's JVM reader with {javac} failed" in message
    assert "release version 17 not supported" in message and "\n" not in message
    assert not jvm.cached_jar().exists()
    assert not [p for p in cache.rglob("*") if p.is_file()]


def test_javacs_first_error_is_reported_not_the_warnings_printed_after_it(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    javac = home / "bin" / "javac"
    warnings = "".join(f"echo 'A.java:{i}: warning: [deprecation] old' >&2\n" for i in range(12))
    javac.write_text(
        "#!/bin/sh\necho 'S.java:41: error: incompatible types' >&2\n"
        f"{warnings}echo '1 error' >&2\nexit 1\n"
    )
    javac.chmod(javac.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(MissingDependencyError) as caught:
        jvm.jar_path()
    assert "S.java:41: error: incompatible types" in str(caught.value)


def test_configure_given_a_running_session_says_it_takes_the_builder() -> None:
    class SparkSession:  # what a user holds after getOrCreate()
        pass

    with pytest.raises(InvalidConfigError, match=r"configure\(\) takes SparkSession.builder"):
        jvm.configure(SparkSession())  # type: ignore[arg-type]


def test_java_home_names_the_javac_that_compiles(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = jvm.find_javac()
    assert real is not None
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    calls = tmp_path / "calls"
    wrapper = home / "bin" / "javac"
    wrapper.write_text(f'#!/bin/sh\necho called >> {calls}\nexec {real} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(home))
    monkeypatch.setenv("PATH", os.environ["PATH"])
    assert jvm.built_against(jvm.jar_path()) == pyspark.__version__
    assert calls.read_text() == "called\n"


def test_a_jar_cut_short_in_the_cache_is_compiled_again(cache: Path) -> None:
    """A jar renamed into place before its bytes reached the disk (a crash)
    is left cut short: it says nothing of what it was built against, and is
    compiled again rather than handed to Spark."""
    cut = jvm.cached_jar()
    cut.parent.mkdir(parents=True)
    cut.write_bytes(b"PK\x03\x04")
    assert jvm.jar_path() == cut
    assert zipfile.is_zipfile(cut) and jvm.built_against(cut) == pyspark.__version__


def test_a_cache_that_cannot_be_written_is_one_line_before_anything_is_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    monkeypatch.setattr(jvm, "JAR", tmp_path / "package" / "arrowlog-spark.jar")
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    calls = tmp_path / "calls"
    javac = home / "bin" / "javac"
    javac.write_text(f"#!/bin/sh\necho called >> {calls}\nexit 0\n")
    javac.chmod(javac.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(home))
    with pytest.raises(MissingDependencyError) as caught:
        jvm.jar_path()
    message = str(caught.value)
    assert "cannot be written" in message and CACHE_ENV in message and "\n" not in message
    assert not calls.exists()  # refused before javac ran


def test_configure_keeps_the_jars_spark_submit_would_have_started_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The builder's spark.jars replaces spark-defaults.conf's and --jars'."""
    from pyspark.sql import SparkSession

    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    (tmp_path / "spark-defaults.conf").write_text(
        "# site jars\nspark.jars.packages  io.delta:delta-spark_2.13:4.0.0\n"
        "spark.jars   /opt/site/a.jar,/opt/site/b.jar\n"
    )
    ours = str(jvm.jar_path())

    def jars() -> list[str]:
        return str(jvm.configure(SparkSession.Builder())._options["spark.jars"]).split(",")

    assert jars() == ["/opt/site/a.jar", "/opt/site/b.jar", ours]
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--master local[2] --jars /opt/c.jar pyspark-shell")
    assert jars() == ["/opt/c.jar", ours]
    given = jvm.configure(SparkSession.Builder().config("spark.jars", "/opt/d.jar"))
    assert given._options["spark.jars"] == f"/opt/d.jar,{ours}"  # the builder's own, kept
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    (tmp_path / "spark-defaults.conf").unlink()
    assert jars() == [ours]
