package io.arrowlog.spark;

import java.util.List;

/**
 * The names of the read options and session settings the JVM reads itself; the Python
 * source parses every option (arrowlog/spark/options.py). The golden file
 * {@code options.json}, written from that module, is checked against these by the
 * self-test: a name renamed on one side fails the suite.
 */
final class OptionNames {
  /** Which reader reads a batch: {@link #READER_JVM} (the default) or {@link #READER_PYTHON}. */
  static final String READER = "reader";

  static final String READER_JVM = "jvm";
  static final String READER_PYTHON = "python";
  /** Who writes a batch: the JVM (the default, where it can) or {@link #READER_PYTHON}. */
  static final String WRITER = "writer";

  /** The session's idempotence keys of a batch write (options win over them). */
  static final List<String> SESSION_WRITE_KEYS =
      List.of("spark.arrowlog.write.txnAppId", "spark.arrowlog.write.txnVersion");

  /** What a read subscribes to, as its description names it. */
  static final String TOPIC = "topic";

  static final String SUBSCRIBE = "subscribe";

  /** The read options named here, and the readers {@link #READER} takes. */
  static final List<String> READ_OPTIONS = List.of(READER, TOPIC, SUBSCRIBE);

  static final List<String> READERS = List.of(READER_JVM, READER_PYTHON);

  /** The session's planner interpreter (set by arrowlog.spark.configure). */
  static final String PYTHON_CONF = "spark.arrowlog.python";

  /** PySpark's own settings and variables of its interpreter, in the order PySpark reads. */
  static final List<String> PYSPARK_PYTHON_CONFS =
      List.of("spark.pyspark.driver.python", "spark.pyspark.python");

  static final List<String> PYSPARK_PYTHON_ENV = List.of("PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON");

  private OptionNames() {}
}
