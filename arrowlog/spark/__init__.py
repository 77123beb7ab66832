"""arrowlog as a Spark data source: ``spark.read.format("arrowlog")``,
``df.write.format("arrowlog")``, and Structured Streaming in both directions.

The source registers itself: the package installs the top-level module
``pyspark_arrowlog``, which Spark's Python data source lookup
(``pkgutil.iter_modules`` in a Python worker) finds in a normal install and in an
editable one made with ``editable_mode=compat`` (``make setup``). :func:`register`
does it by hand where that lookup cannot see the package.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from arrowlog._extras import require_extra

pyspark, _ = require_extra("spark")  # before pyspark is imported: say which extra is missing

from arrowlog.spark.versions import require_pyspark  # noqa: E402

# before the source is imported: an older pyspark fails there on a missing name
require_pyspark(pyspark.__version__)

from arrowlog.spark.jvm import configure  # noqa: E402
from arrowlog.spark.source import ArrowLogDataSource  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["ArrowLogDataSource", "configure", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``arrowlog`` format with ``spark`` (for this session; the
    class is pickled to the workers, which still need arrowlog importable)."""
    spark.dataSource.register(ArrowLogDataSource)
