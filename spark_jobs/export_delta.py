"""The Delta export as a Spark application: appends a topic's newly committed
records to a Delta table exactly once, in one delta-rs commit that records the
offsets (``arrowlog.jobs.export_delta``; the same command as ``arrowlog
export-delta``). The range is read in the driver by arrowlog's own reader;
``arrowlog.jobs.export_delta.export(spark, ...)`` reads it through a Spark
session instead, inside a job of your own.

    spark-submit spark_jobs/export_delta.py --root ROOT TOPIC DELTA_PATH
        [--delta-storage-options JSON] [--from-new-incarnation] [--skip-deleted]
"""

import sys

from arrowlog.jobs import export_delta

if __name__ == "__main__":
    sys.exit(export_delta.main())
