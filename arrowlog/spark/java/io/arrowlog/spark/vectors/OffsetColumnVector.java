package io.arrowlog.spark.vectors;

import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/** The offset column of one segment: row {@code i} has offset {@code first + i}, no storage. */
public final class OffsetColumnVector extends ColumnVector {
  private final long first;

  public OffsetColumnVector(long first) {
    super(DataTypes.LongType);
    this.first = first;
  }

  @Override
  public long getLong(int rowId) {
    return first + rowId;
  }

  @Override
  public void close() {}

  @Override
  public boolean hasNull() {
    return false;
  }

  @Override
  public int numNulls() {
    return 0;
  }

  @Override
  public boolean isNullAt(int rowId) {
    return false;
  }

  private static UnsupportedOperationException notLong() {
    return new UnsupportedOperationException("the offset column holds longs");
  }

  @Override
  public boolean getBoolean(int rowId) {
    throw notLong();
  }

  @Override
  public byte getByte(int rowId) {
    throw notLong();
  }

  @Override
  public short getShort(int rowId) {
    throw notLong();
  }

  @Override
  public int getInt(int rowId) {
    throw notLong();
  }

  @Override
  public float getFloat(int rowId) {
    throw notLong();
  }

  @Override
  public double getDouble(int rowId) {
    throw notLong();
  }

  @Override
  public ColumnarArray getArray(int rowId) {
    throw notLong();
  }

  @Override
  public ColumnarMap getMap(int ordinal) {
    throw notLong();
  }

  @Override
  public Decimal getDecimal(int rowId, int precision, int scale) {
    throw notLong();
  }

  @Override
  public UTF8String getUTF8String(int rowId) {
    throw notLong();
  }

  @Override
  public byte[] getBinary(int rowId) {
    throw notLong();
  }

  @Override
  public ColumnVector getChild(int ordinal) {
    throw notLong();
  }
}
