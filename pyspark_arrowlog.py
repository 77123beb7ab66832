"""Found by Spark's Python data source lookup (modules named ``pyspark_*`` with a
``DefaultSource``): ``spark.read.format("arrowlog")`` works with no registration."""

from arrowlog.spark.source import ArrowLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
