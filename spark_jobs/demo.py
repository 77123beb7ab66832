"""The main demo as a Spark application, on the session spark-submit configured
(``arrowlog.jobs.demo``): backfill with expected offsets, a Spark transform
committed as one transaction, the committed read, an exactly-once Delta
export. Submit it again, or kill it anywhere and submit it again: nothing is
written twice.

    spark-submit spark_jobs/demo.py [--root DIR_OR_URL] [--rows N] [--data FILE]
        [--delta DIR]
"""

import sys

from arrowlog.jobs import demo

if __name__ == "__main__":
    sys.exit(demo.submit())
