package io.arrowlog.spark.errors;

/**
 * An arrowlog error raised on the JVM, named as the Python library names it (the
 * message starts with the error's type, as a failing Python task's does).
 */
public class ArrowLogException extends RuntimeException {
  private final String type;

  public ArrowLogException(String type, String message) {
    super(type + ": " + message);
    this.type = type;
  }

  public ArrowLogException(String type, String message, Throwable cause) {
    super(type + ": " + message, cause);
    this.type = type;
  }

  /** The Python error's class name, e.g. {@code CorruptSegmentError}. */
  public String type() {
    return type;
  }
}
