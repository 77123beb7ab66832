"""The Iceberg export as a Spark application: appends a topic's newly committed
records to an Iceberg table exactly once, in one snapshot that records the
offsets (``arrowlog.jobs.export_iceberg``; the same command as ``arrowlog
export-iceberg``), read in the driver by arrowlog's own reader.

    spark-submit spark_jobs/export_iceberg.py --root ROOT TOPIC NAMESPACE.TABLE
        --warehouse DIR [--catalog-properties JSON] [--from-new-incarnation]
"""

import sys

from arrowlog.jobs import export_iceberg

if __name__ == "__main__":
    sys.exit(export_iceberg.main())
