package io.arrowlog.spark.format;

import java.util.List;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.FloatingPointPrecision;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.arrow.vector.types.pojo.Field;

/**
 * A batch's column statistics as the Python writer puts them beside the header
 * (arrowlog/format/stats.py, {@code column_stats} without dictionaries; the JSON of
 * header.py's {@code stats_metadata}): for each top-level column of a kept type, {@code
 * [min, max, null count]}, a bound null where unknown. Integers, dates, times and
 * timestamps as integers of their unit, booleans, floats (no bound past a NaN or an
 * infinity), decimals as strings; strings and binaries the null count alone (their bounds
 * come from dictionaries, which the JVM does not write). A type Python keeps that this
 * class cannot bound exactly as Python does (unsigned integers, half floats, decimals
 * other than 128 and 256 bits) gets no entry: no statistics prunes nothing, a wrong bound
 * would lose rows.
 */
final class ColumnStats {
  static final String KEY = "arrowlog.stats";
  static final String CRC_KEY = "arrowlog.stats_crc32c";

  private enum Kind {
    NONE,
    INTEGER,
    BOOLEAN,
    FLOAT,
    DECIMAL,
    STRING
  }

  private ColumnStats() {}

  /** The statistics' JSON, or null when no column has any (Python then writes no key). */
  static String json(VectorSchemaRoot root) {
    StringBuilder out = new StringBuilder(64);
    List<FieldVector> vectors = root.getFieldVectors();
    int rows = root.getRowCount();
    for (FieldVector v : vectors) {
      Kind kind = kind(v.getField());
      if (kind == Kind.NONE) {
        continue;
      }
      out.append(out.length() == 0 ? '{' : ',');
      PyJson.string(out, v.getField().getName());
      out.append(":[");
      int nulls = v.getNullCount();
      if (nulls == rows || kind == Kind.STRING) {
        out.append("null,null");
      } else {
        bounds(out, v, kind, rows);
      }
      out.append(',').append(nulls).append(']');
    }
    return out.length() == 0 ? null : out.append('}').toString();
  }

  private static Kind kind(Field f) {
    if (f.getDictionary() != null) {
      return Kind.NONE;
    }
    ArrowType t = f.getType();
    return switch (t.getTypeID()) {
      case Int -> ((ArrowType.Int) t).getIsSigned() ? Kind.INTEGER : Kind.NONE;
      case Date, Time, Timestamp -> Kind.INTEGER;
      case Bool -> Kind.BOOLEAN;
      case FloatingPoint ->
          ((ArrowType.FloatingPoint) t).getPrecision() == FloatingPointPrecision.HALF
              ? Kind.NONE
              : Kind.FLOAT;
      case Decimal -> {
        int bits = ((ArrowType.Decimal) t).getBitWidth();
        yield bits == 128 || bits == 256 ? Kind.DECIMAL : Kind.NONE;
      }
      case Utf8, Binary, LargeUtf8, LargeBinary -> Kind.STRING;
      default -> Kind.NONE;
    };
  }

  /**
   * {@code min,max} of the non-null values of {@code v} (at least one), read from its
   * buffers: a virtual call and a bounds check per value cost more than the comparison.
   */
  private static void bounds(StringBuilder out, FieldVector v, Kind kind, int rows) {
    Rows valid = new Rows(v, rows);
    switch (kind) {
      case INTEGER -> integers(out, v, valid);
      case BOOLEAN -> booleans(out, v, valid);
      case FLOAT -> floats(out, v, valid);
      case DECIMAL -> decimals(out, v, valid);
      default -> throw new IllegalStateException("no bounds for " + kind);
    }
  }

  /** The rows of a vector that hold a value. */
  private static final class Rows {
    private final ArrowBuf validity;
    private final boolean all;
    final int count;

    Rows(FieldVector v, int count) {
      this.validity = v.getValidityBuffer();
      this.all = v.getNullCount() == 0;
      this.count = count;
    }

    boolean has(int i) {
      return all || (validity.getByte(i >>> 3) >> (i & 7) & 1) != 0;
    }
  }

  /** Signed integers, or temporal values as the integers of their unit (their storage). */
  private static void integers(StringBuilder out, FieldVector v, Rows rows) {
    ArrowBuf data = v.getDataBuffer();
    int width = ((BaseFixedWidthVector) v).getTypeWidth();
    long lo = Long.MAX_VALUE;
    long hi = Long.MIN_VALUE;
    for (int i = 0; i < rows.count; i++) {
      if (rows.has(i)) {
        long x =
            switch (width) {
              case 1 -> data.getByte(i);
              case 2 -> data.getShort(2L * i);
              case 4 -> data.getInt(4L * i);
              default -> data.getLong(8L * i);
            };
        lo = Math.min(lo, x);
        hi = Math.max(hi, x);
      }
    }
    out.append(lo).append(',').append(hi);
  }

  private static void booleans(StringBuilder out, FieldVector v, Rows rows) {
    ArrowBuf data = v.getDataBuffer();
    boolean anyFalse = false;
    boolean anyTrue = false;
    for (int i = 0; i < rows.count && !(anyFalse && anyTrue); i++) {
      if (rows.has(i)) {
        boolean x = (data.getByte(i >>> 3) >> (i & 7) & 1) != 0;
        anyTrue |= x;
        anyFalse |= !x;
      }
    }
    out.append(!anyFalse).append(',').append(anyTrue);
  }

  /**
   * NaN is left out of the minimum and, since Spark orders NaN above every number, leaves
   * no maximum; an infinite bound is none (not JSON, and it prunes nothing). A float's
   * bound is the float widened, as numpy's {@code item()} gives it to Python.
   */
  private static void floats(StringBuilder out, FieldVector v, Rows rows) {
    ArrowBuf data = v.getDataBuffer();
    boolean single = ((BaseFixedWidthVector) v).getTypeWidth() == 4;
    double lo = Double.POSITIVE_INFINITY;
    double hi = Double.NEGATIVE_INFINITY;
    boolean nan = false;
    for (int i = 0; i < rows.count; i++) {
      if (rows.has(i)) {
        double x = single ? data.getFloat(4L * i) : data.getDouble(8L * i);
        if (Double.isNaN(x)) {
          nan = true;
        } else {
          lo = Math.min(lo, x);
          hi = Math.max(hi, x);
        }
      }
    }
    out.append(Double.isFinite(lo) ? PyJson.number(lo) : "null").append(',');
    out.append(!nan && Double.isFinite(hi) ? PyJson.number(hi) : "null");
  }

  /**
   * As Python's {@code str} of a {@code Decimal} of the column's scale; compared as the
   * little-endian two's complement integers they are stored as (no object per row).
   */
  private static void decimals(StringBuilder out, FieldVector v, Rows rows) {
    ArrowBuf data = v.getDataBuffer();
    int width = ((BaseFixedWidthVector) v).getTypeWidth();
    int lo = -1;
    int hi = -1;
    for (int i = 0; i < rows.count; i++) {
      if (rows.has(i)) {
        lo = lo < 0 || compare(data, width, i, lo) < 0 ? i : lo;
        hi = hi < 0 || compare(data, width, i, hi) > 0 ? i : hi;
      }
    }
    out.append('"').append(v.getObject(lo)).append("\",\"").append(v.getObject(hi)).append('"');
  }

  /** The order of the stored integers at rows {@code a} and {@code b}. */
  private static int compare(ArrowBuf data, int width, int a, int b) {
    for (int at = width - 8; at >= 0; at -= 8) {
      long x = data.getLong((long) a * width + at);
      long y = data.getLong((long) b * width + at);
      if (x != y) {
        return at == width - 8 ? Long.compare(x, y) : Long.compareUnsigned(x, y);
      }
    }
    return 0;
  }
}
