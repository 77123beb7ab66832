"""The oldest pyspark the Spark source runs on, checked when ``arrowlog.spark`` is
imported.

The source is built on pyspark's Python Data Source API, which grew release by
release (read in each release's ``pyspark/sql/datasource.py`` and
``pyspark/sql/streaming/datasource.py``):

- 4.0.0: ``DataSource``, ``DataSourceReader``, ``DataSourceStreamReader``,
  ``DataSourceArrowWriter``, ``InputPartition``, ``WriterCommitMessage``;
- 4.1.0: filter pushdown (``Filter`` and its subclasses, ``pushFilters``) and
  ``DataSourceStreamArrowWriter`` (the streaming sink);
- 4.2.0: ``pyspark.sql.streaming.datasource`` (``ReadLimit``, ``ReadMaxRows``,
  ``SupportsTriggerAvailableNow``) and ``latestOffset(start, limit)`` with
  ``reportLatestOffset``: ``maxOffsetsPerTrigger``, ``availableNow`` and the
  streaming progress rest on them; and ``to_arrow_schema(schema, timezone=)``
  (4.1 has ``timestamp_utc=`` instead), the exact schema of every batch.

Without this check, pyspark 4.0 fails on the first import with a bare
``ImportError``; 4.1 imports the batch source, then fails in every read task
(``to_arrow_schema() got an unexpected keyword argument 'timezone'``) and with
``No module named 'pyspark.sql.streaming.datasource'`` at the first streaming
read. Batch reads and writes pass on 4.1 once that call is adapted; streaming
would need a second implementation of admission control, so 4.2.0 it is.
``pyproject.toml``'s spark extra says the same bound
(``tests/spark/test_pyspark_bound.py`` keeps them equal; ``make test-spark-min``
runs Spark tests under exactly that version).
"""

from __future__ import annotations

import re

from arrowlog.errors import MissingDependencyError

#: the lower bound of the ``spark`` extra
PYSPARK_MIN: tuple[int, int, int] = (4, 2, 0)


def release(version: str) -> tuple[int, ...]:
    """``"4.2.0"`` -> ``(4, 2, 0)``, ``"4.2"`` too; a pre-release or local suffix
    (``4.3.0.dev1``, ``4.2.0+local``) keeps only its release numbers."""
    match = re.match(r"\d+(?:\.\d+)*", version)
    if match is None:
        raise MissingDependencyError(f"pyspark reports an unreadable version {version!r}")
    numbers = tuple(int(part) for part in match.group().split("."))
    return (*numbers, 0, 0)[: max(3, len(numbers))]  # 4.2 is 4.2.0, not older


def require_pyspark(version: str) -> None:
    """Refuse a pyspark older than :data:`PYSPARK_MIN`.

    Raises:
        MissingDependencyError: ``version`` is older; the message says which
            version is needed and how to upgrade.
    """
    if release(version) < PYSPARK_MIN:
        needed = ".".join(map(str, PYSPARK_MIN))
        raise MissingDependencyError(
            f"the Spark data source (arrowlog.spark) needs pyspark>={needed}, found "
            f"pyspark {version} (its Python Data Source API lacks parts arrowlog "
            f"uses): pip install --upgrade 'arrowlog[spark]'",
            name="pyspark",
        )
