package io.arrowlog.spark.format;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Locale;

/**
 * Numbers as the writer's column statistics write them, for
 * tests/jvm/test_segment_writer.py to compare with Python's {@code json.dumps} of a float
 * and {@code str} of a Decimal: doubles at the edges of Python's notations and a few
 * thousand of every magnitude, and decimals of the scales Spark writes.
 */
public final class JsonProbes {
  private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

  private JsonProbes() {}

  /** {@code [[bits as 16 hex digits, text], ...]}. */
  public static ArrayNode doubles() {
    ArrayNode out = JSON.arrayNode();
    double[] edges = {
      0.0, -0.0, 1.0, -1.5, 0.1, 0.1 + 0.2, (double) 0.1f, (double) -Float.MAX_VALUE,
      (double) Float.MIN_VALUE, 1e-4, 1e-5, 1.5e-5, 9.999e-5, 1e15, 1e16, 9999999999999998.0,
      123456789012345678.0, 5e-324, Double.MIN_NORMAL, Double.MAX_VALUE, Math.PI, 1e22, 1e23,
      Math.scalb(1.0, 53), Math.scalb(1.0, -44), Math.scalb(1.0, 100), Math.scalb(1.0, -1000),
    };
    for (double d : edges) {
      add(out, d);
    }
    long state = 1;
    for (int i = 0; i < 3000; i++) {
      state = next(state);
      double any = Double.longBitsToDouble(state);
      if (Double.isFinite(any)) {
        add(out, any);
      }
      state = next(state);
      float single = Float.intBitsToFloat((int) state);
      if (Float.isFinite(single)) {
        add(out, single); // a float column's bound: the float, widened
      }
      state = next(state);
      add(out, Math.scalb(1.0, (int) Long.remainderUnsigned(state, 2000) - 1000)); // powers of two
    }
    return out;
  }

  /** {@code [[unscaled, scale, text], ...]}. */
  public static ArrayNode decimals() {
    ArrayNode out = JSON.arrayNode();
    String[] unscaled = {
      "0", "1", "-1", "12345", "-1000000", "99999999999999999999999999999999999999"
    };
    for (String u : unscaled) {
      for (int scale : new int[] {0, 2, 6, 7, 10, 18, 38}) {
        BigDecimal d = new BigDecimal(new BigInteger(u), scale);
        ArrayNode one = out.addArray();
        one.add(u).add(scale).add(d.toString());
      }
    }
    return out;
  }

  private static void add(ArrayNode out, double d) {
    ArrayNode one = out.addArray();
    one.add(String.format(Locale.ROOT, "%016x", Double.doubleToRawLongBits(d)));
    one.add(PyJson.number(d));
  }

  private static long next(long x) {
    long z = x + 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }
}
