package io.arrowlog.spark;

import static io.arrowlog.spark.GoldenSelfTest.expect;

import io.arrowlog.spark.errors.PythonErrors;

/** Python tracebacks as Spark hands them over, and the one line read from each. */
final class Tracebacks {
  private static final String RAISED =
      """
      Traceback (most recent call last):
        File "/site/arrowlog/spark/source.py", line 47, in schema
          opts = ReadOptions.parse(self.options, streaming=None)
                 ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
        File "/site/arrowlog/spark/options.py", line 146, in check_names
          raise InvalidConfigError(
      arrowlog.errors.InvalidConfigError: reading arrowlog: unknown option 'startingoffset'
      """;

  /** An arrowlog error raised while handling another: the last one is what went wrong. */
  private static final String CHAINED =
      """
      Traceback (most recent call last):
        File "/site/arrowlog/log/client.py", line 296, in _lookup
          return self._learnt(name, entry)
      KeyError: 'nope'

      During handling of the above exception, another exception occurred:

      Traceback (most recent call last):
        File "/site/arrowlog/spark/sink.py", line 128, in __init__
          topic = log.topic(options.topic)
      arrowlog.errors.UnknownTopicOrPartitionError: unknown topic 'nope' at file:///tmp/log
      """;

  /** A bug raised while handling an arrowlog error: its traceback is kept whole. */
  private static final String BUG_AFTER =
      RAISED
          + """

          During handling of the above exception, another exception occurred:

          Traceback (most recent call last):
            File "/site/arrowlog/spark/source.py", line 50, in schema
              raise TypeError("oops")
          TypeError: oops
          """;

  private Tracebacks() {}

  static void oneLine() {
    String got = PythonErrors.raised(RAISED);
    expect(
        "InvalidConfigError: reading arrowlog: unknown option 'startingoffset'".equals(got),
        "raised: " + got);
    got = PythonErrors.raised(CHAINED);
    expect(
        "UnknownTopicOrPartitionError: unknown topic 'nope' at file:///tmp/log".equals(got),
        "chained: " + got);
    expect(PythonErrors.raised(BUG_AFTER) == null, "a bug's traceback is kept");
    expect(PythonErrors.raised("Traceback ...\nValueError: x\n") == null, "not arrowlog's");
    expect(PythonErrors.raised(null) == null, "no message");
  }
}
