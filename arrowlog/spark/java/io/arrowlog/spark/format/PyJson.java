package io.arrowlog.spark.format;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * JSON text as Python's {@code json.dumps} writes it (the default {@code ensure_ascii}):
 * the bytes of a header are checked by a CRC32C over them, and Python and the JVM must
 * write the same ones for the same header.
 */
final class PyJson {
  private static final char[] HEX = "0123456789abcdef".toCharArray();

  private PyJson() {}

  /**
   * {@code s} as a JSON string: printable ASCII as is but for {@code "} and {@code \},
   * the five short escapes, every other character (control, DEL, non-ASCII, each half of
   * a surrogate pair) as {@code \\uxxxx} in lowercase hex.
   */
  static void string(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c >= ' ' && c <= '~') {
            out.append(c);
          } else {
            out.append("\\u")
                .append(HEX[c >>> 12])
                .append(HEX[(c >>> 8) & 0xf])
                .append(HEX[(c >>> 4) & 0xf])
                .append(HEX[c & 0xf]);
          }
        }
      }
    }
    out.append('"');
  }

  /**
   * A finite double as Python's {@code repr} writes it: the shortest digits that read
   * back as the same double (the nearest such, where two are as short), in positional
   * notation when the decimal point falls within 16 digits of them ({@code 0.0001},
   * {@code 1000000000000000.0}), else as {@code 1.5e-05}, {@code 1e+16}.
   */
  static String number(double d) {
    if (!Double.isFinite(d)) {
      throw new IllegalArgumentException("JSON has no " + d);
    }
    if (d == 0) {
      return 1 / d < 0 ? "-0.0" : "0.0";
    }
    BigDecimal shortest = shortest(d).stripTrailingZeros();
    String digits = shortest.unscaledValue().abs().toString();
    int point = digits.length() - shortest.scale(); // value = 0.<digits> * 10^point
    StringBuilder out = new StringBuilder(24);
    if (d < 0) {
      out.append('-');
    }
    if (point > -4 && point <= 16) {
      if (point <= 0) {
        out.append("0.").append("0".repeat(-point)).append(digits);
      } else if (point >= digits.length()) {
        out.append(digits).append("0".repeat(point - digits.length())).append(".0");
      } else {
        out.append(digits, 0, point).append('.').append(digits, point, digits.length());
      }
      return out.toString();
    }
    out.append(digits.charAt(0));
    if (digits.length() > 1) {
      out.append('.').append(digits, 1, digits.length());
    }
    int exponent = point - 1;
    out.append(exponent < 0 ? "e-" : "e+");
    int magnitude = Math.abs(exponent);
    if (magnitude < 10) {
      out.append('0');
    }
    return out.append(magnitude).toString();
  }

  /**
   * The fewest significant digits that read back as {@code d}: of the two decimals of
   * that many digits around it, the nearer that does.
   */
  private static BigDecimal shortest(double d) {
    BigDecimal exact = new BigDecimal(d);
    for (int digits = 1; digits < 17; digits++) {
      BigDecimal down = exact.round(new MathContext(digits, RoundingMode.FLOOR));
      BigDecimal up = exact.round(new MathContext(digits, RoundingMode.CEILING));
      boolean downOk = down.doubleValue() == d;
      boolean upOk = up.doubleValue() == d;
      if (downOk && upOk) {
        return exact.round(new MathContext(digits, RoundingMode.HALF_EVEN));
      }
      if (downOk || upOk) {
        return downOk ? down : up;
      }
    }
    return exact.round(new MathContext(17, RoundingMode.HALF_EVEN)); // always reads back
  }
}
