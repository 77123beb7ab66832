package io.arrowlog.spark.vectors;

import java.nio.ByteOrder;
import org.apache.arrow.vector.BaseFixedWidthVector;
import org.apache.arrow.vector.BigIntVector;
import org.apache.arrow.vector.BitVector;
import org.apache.arrow.vector.DateDayVector;
import org.apache.arrow.vector.Float4Vector;
import org.apache.arrow.vector.Float8Vector;
import org.apache.arrow.vector.IntVector;
import org.apache.arrow.vector.SmallIntVector;
import org.apache.arrow.vector.TimeStampMicroTZVector;
import org.apache.arrow.vector.TimeStampMicroVector;
import org.apache.arrow.vector.TinyIntVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A fixed-width Arrow vector (numbers, booleans, dates, microsecond timestamps) as Spark
 * reads it, straight from the vector's buffers: no copy, and no per-value checks.
 *
 * <p>Spark's {@code ArrowColumnVector} reads each value through an accessor and Arrow's
 * checked buffer reads (the validity bit, the bounds and the buffer's reference count,
 * twice per value with the null test): a full-scan aggregate spent more time there than
 * in reading the segments. This reads as Spark's own {@code OffHeapColumnVector} does:
 * by address, for the rows of the batch it is in (Spark asks for no others). The vector
 * stays open until this column is closed, which closes it as {@code ArrowColumnVector}
 * does.
 */
public final class FixedWidthColumnVector extends ColumnVector {
  private final ValueVector vector;
  /** Where the values start. */
  private final long data;
  /** Where the validity bitmap starts; 0 when no value is null. */
  private final long validity;

  private final int nulls;

  private FixedWidthColumnVector(DataType type, BaseFixedWidthVector vector) {
    super(type);
    this.vector = vector;
    this.data = vector.getDataBuffer().memoryAddress();
    this.nulls = vector.getNullCount();
    this.validity = nulls == 0 ? 0 : vector.getValidityBuffer().memoryAddress();
  }

  /**
   * {@code v} read by address as Spark's {@code type}, or null where this class does not
   * read it (another pair of types: {@code ArrowColumnVector} reads those).
   */
  public static ColumnVector of(ValueVector v, DataType type) {
    if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN || !matches(v, type)) {
      return null; // Arrow's buffers are little-endian
    }
    return new FixedWidthColumnVector(type, (BaseFixedWidthVector) v);
  }

  private static boolean matches(ValueVector v, DataType type) {
    return (type instanceof BooleanType && v instanceof BitVector)
        || (type instanceof ByteType && v instanceof TinyIntVector)
        || (type instanceof ShortType && v instanceof SmallIntVector)
        || (type instanceof IntegerType && v instanceof IntVector)
        || (type instanceof LongType && v instanceof BigIntVector)
        || (type instanceof FloatType && v instanceof Float4Vector)
        || (type instanceof DoubleType && v instanceof Float8Vector)
        || (type instanceof DateType && v instanceof DateDayVector)
        || (type instanceof TimestampType && v instanceof TimeStampMicroTZVector)
        || (type instanceof TimestampNTZType && v instanceof TimeStampMicroVector);
  }

  @Override
  public void close() {
    vector.close();
  }

  @Override
  public boolean hasNull() {
    return nulls > 0;
  }

  @Override
  public int numNulls() {
    return nulls;
  }

  @Override
  public boolean isNullAt(int rowId) {
    return validity != 0 && !bit(validity, rowId);
  }

  private static boolean bit(long address, int i) {
    return ((Platform.getByte(null, address + (i >>> 3)) >>> (i & 7)) & 1) != 0;
  }

  @Override
  public boolean getBoolean(int rowId) {
    return bit(data, rowId);
  }

  @Override
  public byte getByte(int rowId) {
    return Platform.getByte(null, data + rowId);
  }

  @Override
  public short getShort(int rowId) {
    return Platform.getShort(null, data + 2L * rowId);
  }

  @Override
  public int getInt(int rowId) {
    return Platform.getInt(null, data + 4L * rowId);
  }

  @Override
  public long getLong(int rowId) {
    return Platform.getLong(null, data + 8L * rowId);
  }

  @Override
  public float getFloat(int rowId) {
    return Platform.getFloat(null, data + 4L * rowId);
  }

  @Override
  public double getDouble(int rowId) {
    return Platform.getDouble(null, data + 8L * rowId);
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    throw unsupported();
  }

  @Override
  public ColumnarMap getMap(int ordinal) {
    throw unsupported();
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    throw unsupported();
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    throw unsupported();
  }

  @Override
  public byte[] getBinary(int rowId) {
    throw unsupported();
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    throw unsupported();
  }

  private UnsupportedOperationException unsupported() {
    return new UnsupportedOperationException("a column of " + dataType() + " holds no such values");
  }
}
