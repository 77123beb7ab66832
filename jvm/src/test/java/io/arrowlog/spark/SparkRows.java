package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import java.util.Base64;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecializedGetters;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;

/**
 * Rows as Spark reads them from a columnar batch, rendered as the golden files' JSON
 * (tests/jvm/golden.py, json_value): a decimal as its plain string, binary as base64, a
 * date as days and a timestamp as microseconds since the epoch, a struct as the array of
 * its fields, a map as an array of {@code [key, value]}.
 */
final class SparkRows {
  private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

  private SparkRows() {}

  static ArrayNode row(InternalRow row, StructType schema) {
    ArrayNode out = JSON.arrayNode();
    for (int i = 0; i < schema.size(); i++) {
      out.add(value(row, i, schema.fields()[i].dataType()));
    }
    return out;
  }

  static JsonNode value(SpecializedGetters g, int i, DataType t) {
    if (g.isNullAt(i)) {
      return JSON.nullNode();
    }
    if (t instanceof BooleanType) {
      return JSON.booleanNode(g.getBoolean(i));
    }
    if (t instanceof ByteType) {
      return JSON.numberNode(g.getByte(i));
    }
    if (t instanceof ShortType) {
      return JSON.numberNode(g.getShort(i));
    }
    if (t instanceof IntegerType || t instanceof DateType) {
      return JSON.numberNode(g.getInt(i));
    }
    if (t instanceof LongType || t instanceof TimestampType || t instanceof TimestampNTZType) {
      return JSON.numberNode(g.getLong(i));
    }
    if (t instanceof FloatType) {
      return JSON.numberNode((double) g.getFloat(i));
    }
    if (t instanceof DoubleType) {
      return JSON.numberNode(g.getDouble(i));
    }
    if (t instanceof StringType) {
      return JSON.textNode(g.getUTF8String(i).toString());
    }
    if (t instanceof BinaryType) {
      return JSON.textNode(Base64.getEncoder().encodeToString(g.getBinary(i)));
    }
    if (t instanceof DecimalType d) {
      return JSON.textNode(
          g.getDecimal(i, d.precision(), d.scale()).toJavaBigDecimal().toPlainString());
    }
    if (t instanceof StructType s) {
      return row(g.getStruct(i, s.size()), s);
    }
    if (t instanceof ArrayType a) {
      ArrayData data = g.getArray(i);
      ArrayNode out = JSON.arrayNode();
      for (int j = 0; j < data.numElements(); j++) {
        out.add(value(data, j, a.elementType()));
      }
      return out;
    }
    if (t instanceof MapType m) {
      MapData data = g.getMap(i);
      ArrayNode out = JSON.arrayNode();
      for (int j = 0; j < data.numElements(); j++) {
        ArrayNode entry = out.addArray();
        entry.add(value(data.keyArray(), j, m.keyType()));
        entry.add(value(data.valueArray(), j, m.valueType()));
      }
      return out;
    }
    throw new IllegalArgumentException("no JSON form for Spark type " + t);
  }
}
