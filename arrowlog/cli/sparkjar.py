"""``arrowlog spark-jar``: the path of the JVM reader's jar for the installed
pyspark, for ``spark-submit --jars`` and cluster images (compiled on first use
where the package came without one: docs/spark.md, "The JVM reader")."""

from __future__ import annotations

import click

from arrowlog.jobs.commandline import handled, with_examples


@click.command("spark-jar")
@click.option("--debug", is_flag=True, hidden=True)
@with_examples(
    "arrowlog spark-jar",
    'spark-submit --jars "$(arrowlog spark-jar)" job.py',
)
def spark_jar(debug: bool) -> None:
    """Print the path of arrowlog's JVM reader jar for the installed pyspark.

    The package's own jar if it was built for this pyspark's minor version,
    else one compiled now into the user's cache (once; needs a JDK 17+).
    """
    debug = debug or bool(click.get_current_context().find_root().params.get("debug"))
    with handled(debug, lambda: None):
        from arrowlog.spark.jvm import jar_path  # pyspark: the spark extra

        click.echo(str(jar_path()))
