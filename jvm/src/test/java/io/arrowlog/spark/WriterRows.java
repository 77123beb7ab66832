package io.arrowlog.spark;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.ArrayBasedMapData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The rows of the writer's contract: row {@code i} of every column is a function of
 * {@code i} alone, which tests/jvm/test_segment_writer.py computes the same way in Python
 * ({@code spec_row}) to build the batch it expects. Pseudo-random values come from
 * splitmix64, so that a large batch does not compress away (the column path of a
 * reader needs an object of more than 1 MiB).
 */
final class WriterRows {
  /**
   * A column of every type Spark's Arrow conversion writes that a topic may have, and two
   * with empty buffers (no string bytes; no buffers at all).
   */
  static final StructType SCHEMA =
      (StructType)
          DataType.fromDDL(
              "id BIGINT NOT NULL, flag BOOLEAN, tiny TINYINT, small SMALLINT, i INT, l BIGINT,"
                  + " f FLOAT, d DOUBLE, s STRING, bin BINARY, dec DECIMAL(10,2),"
                  + " big DECIMAL(38,10), day DATE, ts TIMESTAMP, ntz TIMESTAMP_NTZ,"
                  + " arr ARRAY<INT>, st STRUCT<a: INT, b: STRING>, m MAP<STRING, INT>,"
                  + " blank STRING, nothing VOID");

  private WriterRows() {}

  static long splitmix64(long x) {
    long z = x + 0x9E3779B97F4A7C15L;
    z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
    z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
    return z ^ (z >>> 31);
  }

  /** {@code r} (unsigned) modulo {@code m}. */
  private static long mod(long r, long m) {
    return Long.remainderUnsigned(r, m);
  }

  static InternalRow row(int i) {
    long r = splitmix64(i);
    Object[] v = new Object[SCHEMA.size()];
    v[0] = (long) i;
    v[1] = i % 7 == 3 ? null : (r & 1) == 1;
    v[2] = i % 11 == 5 ? null : (byte) ((i * 37) % 256 - 128);
    v[3] = i % 13 == 6 ? null : (short) ((i * 1009) % 65536 - 32768);
    v[4] = i % 5 == 0 ? null : (int) r;
    v[5] = i % 9 == 4 ? null : r;
    v[6] = i % 19 == 2 ? null : floatValue(i);
    v[7] = i % 23 == 7 ? null : ((double) mod(r, 2_000_001) - 1_000_000.0) * 1.0e-7;
    v[8] = i % 6 == 1 ? null : UTF8String.fromString("row " + i + (i % 4 == 0 ? " é€😀" : ""));
    v[9] = i % 8 == 7 ? null : bytes(i);
    v[10] = i % 10 == 9 ? null : decimal(BigInteger.valueOf(mod(r, 19_999_999_999L)
        - 9_999_999_999L), 10, 2);
    v[11] = i % 12 == 11 ? null : decimal(big(i, r), 38, 10);
    v[12] = i % 14 == 13 ? null : (i * 37) % 40_000 - 10_000;
    v[13] = i % 15 == 14 ? null : mod(r, 8_000_000_000_000_001L) - 4_000_000_000_000_000L;
    v[14] = i % 16 == 15 ? null : mod(splitmix64(i + 1_000_000L), 8_000_000_000_000_001L)
        - 4_000_000_000_000_000L;
    v[15] = i % 9 == 8 ? null : array(i);
    v[16] = i % 10 == 3 ? null : new GenericInternalRow(new Object[] {
        i % 3 == 0 ? null : i * 3, UTF8String.fromString("b" + i)});
    v[17] = i % 11 == 10 ? null : map(i);
    v[18] = i % 2 == 0 ? null : UTF8String.EMPTY_UTF8; // no data bytes: an empty buffer
    v[19] = null;
    return new GenericInternalRow(v);
  }

  /** NaN now and then, the most negative float once, else a float of a few digits. */
  private static float floatValue(int i) {
    if (i % 17 == 8) {
      return Float.NaN;
    }
    if (i == 1) {
      return -Float.MAX_VALUE;
    }
    return (float) ((i % 1000) * 0.37 - 100.5);
  }

  /** 32 bytes of splitmix64, little-endian: what a big batch cannot compress. */
  private static byte[] bytes(int i) {
    ByteBuffer out = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
    for (int k = 0; k < 4; k++) {
      out.putLong(splitmix64(4L * i + k));
    }
    return out.array();
  }

  /** Near the precision's limit, and the smallest steps of the scale at rows 5 and 6. */
  private static BigInteger big(int i, long r) {
    if (i == 5 || i == 6) {
      return BigInteger.valueOf(i - 5);
    }
    return BigInteger.valueOf(r).multiply(BigInteger.valueOf(1_000_003)).add(BigInteger.valueOf(i));
  }

  private static Decimal decimal(BigInteger unscaled, int precision, int scale) {
    return Decimal.apply(new BigDecimal(unscaled, scale), precision, scale);
  }

  private static GenericArrayData array(int i) {
    Object[] out = new Object[i % 4];
    for (int j = 0; j < out.length; j++) {
      out[j] = j == 2 ? null : j * i - 5;
    }
    return new GenericArrayData(out);
  }

  private static ArrayBasedMapData map(int i) {
    Object[] keys = new Object[i % 3];
    Object[] values = new Object[keys.length];
    for (int k = 0; k < keys.length; k++) {
      keys[k] = UTF8String.fromString("k" + k);
      values[k] = k == 1 ? null : i + k;
    }
    return new ArrayBasedMapData(new GenericArrayData(keys), new GenericArrayData(values));
  }
}
