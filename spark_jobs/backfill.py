"""The backfill as a Spark application: a restartable bulk load of a Parquet,
CSV or Arrow file into one partition of a topic with expected offsets, run in
the driver (``arrowlog.jobs.backfill``; the same command as ``arrowlog
backfill``). Kill it at any moment and submit it again: it resumes where the
log really ends, and the partition holds the input exactly once, in order.

    spark-submit spark_jobs/backfill.py --root ROOT TOPIC FILE [--partition 0]
        [--start-offset 0] [--rows-per-batch 65536] [--create] [--no-progress]
"""

import sys

from arrowlog.jobs import backfill

if __name__ == "__main__":
    sys.exit(backfill.main())
