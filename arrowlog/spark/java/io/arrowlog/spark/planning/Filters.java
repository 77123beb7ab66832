package io.arrowlog.spark.planning;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.Base64;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;

/**
 * Spark's filters as a plan request carries them (docs/plan-wire.md, "Filters"): {@code
 * op} (the filter's class name, one of {@code plan_wire.FILTER_OPS}), {@code attribute}
 * (the column's path) and {@code value}, typed ({@code {"type": "int", "value": 3}}).
 */
public final class Filters {
  static final String OP = "op";
  static final String ATTRIBUTE = "attribute";
  static final String VALUE = "value";
  static final String TYPE = "type";

  private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

  private Filters() {}

  /** {@code f} as the planner takes it; null for a kind (or a value) it does not take. */
  public static ObjectNode spec(Filter f) {
    ObjectNode spec = JSON.objectNode();
    String attribute;
    Object value = null;
    Object[] values = null;
    if (f instanceof EqualTo e) {
      attribute = e.attribute();
      value = e.value();
    } else if (f instanceof GreaterThan g) {
      attribute = g.attribute();
      value = g.value();
    } else if (f instanceof GreaterThanOrEqual g) {
      attribute = g.attribute();
      value = g.value();
    } else if (f instanceof LessThan l) {
      attribute = l.attribute();
      value = l.value();
    } else if (f instanceof LessThanOrEqual l) {
      attribute = l.attribute();
      value = l.value();
    } else if (f instanceof In i) {
      attribute = i.attribute();
      values = i.values();
    } else if (f instanceof IsNull n) {
      attribute = n.attribute();
    } else if (f instanceof IsNotNull n) {
      attribute = n.attribute();
    } else {
      return null;
    }
    spec.put(OP, f.getClass().getSimpleName());
    spec.putArray(ATTRIBUTE).add(attribute);
    if (values != null) {
      ArrayNode list = spec.putArray(VALUE);
      for (Object v : values) {
        if (v == null) {
          continue; // equal to nothing: `IN (0, NULL)` keeps what `IN (0)` keeps
        }
        ObjectNode typed = typed(v);
        if (typed == null) {
          return null;
        }
        list.add(typed);
      }
    } else if (!(f instanceof IsNull) && !(f instanceof IsNotNull)) {
      ObjectNode typed = typed(value);
      if (typed == null) {
        return null;
      }
      spec.set(VALUE, typed);
    }
    return spec;
  }

  private static ObjectNode typed(Object v) {
    ObjectNode out = JSON.objectNode();
    if (v instanceof Boolean b) {
      out.put(TYPE, "bool").put(VALUE, b);
    } else if (v instanceof Byte || v instanceof Short || v instanceof Integer
        || v instanceof Long) {
      out.put(TYPE, "int").put(VALUE, ((Number) v).longValue());
    } else if (v instanceof Float || v instanceof Double) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        return null; // JSON has no such numbers: the filter only loses its pruning
      }
      out.put(TYPE, "float").put(VALUE, d);
    } else if (v instanceof String s) {
      out.put(TYPE, "str").put(VALUE, s);
    } else if (v instanceof BigDecimal d) {
      out.put(TYPE, "decimal").put(VALUE, d.toPlainString());
    } else if (v instanceof byte[] b) {
      out.put(TYPE, "binary").put(VALUE, Base64.getEncoder().encodeToString(b));
    } else if (v instanceof LocalDate d) {
      out.put(TYPE, "date").put(VALUE, d.toEpochDay());
    } else if (v instanceof java.sql.Date d) {
      out.put(TYPE, "date").put(VALUE, d.toLocalDate().toEpochDay());
    } else if (v instanceof Instant t) {
      out.put(TYPE, "timestamp_us").put(VALUE, micros(t));
    } else if (v instanceof java.sql.Timestamp t) {
      // Spark's own conversion: java.sql.Timestamp is Julian before 1582, Spark's
      // timestamps are proleptic Gregorian
      out.put(TYPE, "timestamp_us").put(VALUE, DateTimeUtils.fromJavaTimestamp(t));
    } else if (v instanceof LocalDateTime t) {
      out.put(TYPE, "timestamp_us").put(VALUE, micros(t.toInstant(ZoneOffset.UTC)));
    } else {
      return null;
    }
    return out;
  }

  private static long micros(Instant t) {
    return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000L), t.getNano() / 1000);
  }
}
