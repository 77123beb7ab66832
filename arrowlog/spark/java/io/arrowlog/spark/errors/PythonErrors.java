package io.arrowlog.spark.errors;

import java.util.Map;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.spark.SparkThrowable;
import org.apache.spark.sql.errors.QueryCompilationErrors;
import org.apache.spark.sql.errors.QueryExecutionErrors;

/**
 * The Python source's arrowlog errors in one line. Spark raises an error of a Python data
 * source with the whole Python traceback as its message, the line that says what is wrong
 * last; here the same Spark error (same condition, same action) carries that line alone,
 * {@code InvalidConfigError: unknown option ...}, as the JVM planner's errors do. Any other
 * error (not arrowlog's, or not the Python source's) is left as Spark raised it.
 */
public final class PythonErrors {
  /** Spark's condition for a Python source's error while analysing a query. */
  static final String SOURCE_ERROR = "PYTHON_DATA_SOURCE_ERROR";

  /** Spark's condition for a Python streaming source's error. */
  static final String STREAM_ERROR = "PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR";

  /** The last line of a traceback raising an arrowlog error: its class and message. */
  private static final Pattern RAISED =
      Pattern.compile("^arrowlog(?:\\.\\w+)*\\.(\\w+): (.*)$", Pattern.MULTILINE);

  private PythonErrors() {}

  /**
   * {@code Type: message} of the arrowlog error a Python traceback ends with; null when it
   * ends with another error (a bug's traceback is kept whole).
   */
  public static String raised(String traceback) {
    if (traceback == null) {
      return null;
    }
    Matcher m = RAISED.matcher(traceback);
    int start = -1;
    String type = null;
    while (m.find()) {
      start = m.start();
      type = m.group(1);
    }
    if (type == null) {
      return null;
    }
    String rest = traceback.substring(start);
    if (rest.contains("\nTraceback (most recent call last)") || rest.contains("\n  File \"")) {
      return null; // another error was raised while handling it
    }
    String message = rest.substring(rest.indexOf(": ") + 2).strip();
    return type + ": " + message.replaceAll("\\s*\\n\\s*", " ");
  }

  /** {@code call}'s result; a Python source's arrowlog error it raises, in one line. */
  public static <T> T oneLine(Supplier<T> call) {
    try {
      return call.get();
    } catch (Exception e) { // Spark's AnalysisException is checked in Java
      throw PythonErrors.<RuntimeException>sneaky(cleaned(e));
    }
  }

  /** Runs {@code call}; a Python source's arrowlog error it raises, in one line. */
  public static void oneLine(Runnable call) {
    oneLine(
        () -> {
          call.run();
          return null;
        });
  }

  /** {@code e}, or the same Spark error with the arrowlog error's line as its message. */
  public static Throwable cleaned(Throwable e) {
    if (!(e instanceof SparkThrowable spark)) {
      return e;
    }
    Map<String, String> params = spark.getMessageParameters();
    String line = raised(params.get("msg"));
    if (line == null) {
      return e;
    }
    Throwable clean;
    if (SOURCE_ERROR.equals(spark.getCondition())) {
      clean = QueryCompilationErrors.pythonDataSourceError(
          params.get("action"), params.get("type"), line);
    } else if (STREAM_ERROR.equals(spark.getCondition())) {
      clean = QueryExecutionErrors.pythonStreamingDataSourceRuntimeError(
          params.get("action"), line);
    } else {
      return e;
    }
    clean.addSuppressed(e); // the traceback, for the driver's log
    return clean;
  }

  /** Throws {@code t}, checked or not (Spark's AnalysisException is checked in Java). */
  @SuppressWarnings("unchecked")
  public static <E extends Throwable> E sneaky(Throwable t) throws E {
    throw (E) t;
  }
}
