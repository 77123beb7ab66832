package io.arrowlog.spark.vectors;

import io.arrowlog.spark.errors.ArrowLogException;
import java.util.List;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TimeStampVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.types.TimeUnit;
import org.apache.arrow.vector.types.pojo.ArrowType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/** Arrow vectors as Spark reads them: the few types it takes in another form, converted. */
public final class Vectors {
  private Vectors() {}

  /**
   * {@code v} as the vector Spark's {@code ArrowColumnVector} takes for {@code field}:
   * itself, or (timestamps of another unit than microseconds) a converted copy, added to
   * {@code owned}.
   */
  public static ValueVector forSpark(
      ValueVector v, StructField field, BufferAllocator allocator, List<ValueVector> owned) {
    boolean tz = field.dataType() instanceof TimestampType;
    boolean ntz = field.dataType() instanceof TimestampNTZType;
    if (!(tz || ntz) || v instanceof TimeStampMicroTZVector || v instanceof TimeStampMicroVector) {
      return v;
    }
    if (!(v instanceof TimeStampVector ts)) {
      return v; // ArrowColumnVector says what it cannot read
    }
    ArrowType.Timestamp type = (ArrowType.Timestamp) ts.getField().getType();
    long per = perMicro(type.getUnit());
    int n = ts.getValueCount();
    TimeStampVector out =
        tz
            ? new TimeStampMicroTZVector(field.name(), allocator, "UTC")
            : new TimeStampMicroVector(field.name(), allocator);
    owned.add(out);
    out.allocateNew(n);
    for (int i = 0; i < n; i++) {
      if (ts.isNull(i)) {
        out.setNull(i);
        continue;
      }
      long raw = ts.get(i);
      long micros;
      if (per > 0) {
        micros = Math.multiplyExact(raw, per);
      } else {
        // nanoseconds: exact only, as the Python reader's cast is
        if (raw % 1000 != 0) {
          throw new ArrowLogException(
              "ArrowInvalid",
              "column " + field.name() + ": timestamp " + raw
                  + "ns would lose its nanoseconds as microseconds");
        }
        micros = raw / 1000;
      }
      out.setIndexDefined(i);
      out.getDataBuffer().setLong((long) i * 8, micros);
    }
    out.setValueCount(n);
    return out;
  }

  /** Microseconds per unit; -1 for nanoseconds (a division). */
  private static long perMicro(TimeUnit unit) {
    return switch (unit) {
      case SECOND -> 1_000_000L;
      case MILLISECOND -> 1_000L;
      case MICROSECOND -> 1L;
      case NANOSECOND -> -1L;
    };
  }
}
