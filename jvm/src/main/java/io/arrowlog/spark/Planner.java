package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.util.DateTimeUtils;
import org.apache.spark.sql.errors.QueryCompilationErrors;
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
 * Plans a read with the library's own rules: runs {@code python -m arrowlog.spark.jvm_planner}
 * (the interpreter of {@code spark.arrowlog.python}, set by {@code
 * arrowlog.spark.configure}, else PySpark's) with the read as JSON, and takes the tasks.
 */
public final class Planner {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static volatile double lastMillis;
  private static volatile double lastPlannerMillis;

  record Plan(List<SegmentTask> tasks, double planMillis) {}

  private Planner() {}

  static Plan plan(Map<String, String> options, List<String> columns, Filter[] filters) {
    ObjectNode request = JSON.createObjectNode();
    ObjectNode opts = request.putObject("options");
    options.forEach(opts::put);
    if (columns != null) {
      ArrayNode cols = request.putArray("columns");
      columns.forEach(cols::add);
    }
    ArrayNode pushed = request.putArray("filters");
    for (Filter f : filters) {
      ObjectNode spec = filter(f);
      if (spec != null) {
        pushed.add(spec);
      }
    }
    long started = System.nanoTime();
    JsonNode reply = run(request);
    lastMillis = (System.nanoTime() - started) / 1e6;
    lastPlannerMillis = reply.path("plan_ms").asDouble();
    if (reply.has("error")) {
      JsonNode e = reply.get("error");
      String message = e.path("type").asText() + ": " + e.path("message").asText();
      // the class Spark raises for the Python source's planning errors
      throw Planner.<RuntimeException>raise(
          QueryCompilationErrors.pythonDataSourceError("plan", "arrowlog", message));
    }
    Map<String, byte[]> schemas = new HashMap<>();
    JsonNode sent = reply.path("schemas");
    sent.fieldNames()
        .forEachRemaining(
            name -> schemas.put(name, Base64.getDecoder().decode(sent.get(name).asText())));
    List<SegmentTask> tasks = new ArrayList<>();
    for (JsonNode t : reply.get("tasks")) {
      List<SegmentTask.Segment> segments = new ArrayList<>();
      for (JsonNode s : t.get("segments")) {
        segments.add(
            new SegmentTask.Segment(
                s.get("location").asText(),
                s.get("key").asText(),
                s.get("base").asLong(),
                s.get("end").asLong(),
                s.get("lo").asLong(),
                s.get("hi").asLong(),
                s.get("size").asLong(),
                s.path("compacted").path(0).asLong(-1),
                s.path("compacted").path(1).asLong(-1),
                s.hasNonNull("append_id") ? s.get("append_id").asText() : null,
                s.path("droppable").asBoolean(false)));
      }
      tasks.add(
          new SegmentTask(
              t.get("topic").asText(),
              t.get("partition").asInt(),
              t.get("rows").asLong(),
              t.get("bytes").asLong(),
              segments.toArray(new SegmentTask.Segment[0]),
              schemas.get(t.get("topic").asText())));
    }
    return new Plan(tasks, reply.path("plan_ms").asDouble());
  }

  /**
   * Why the JVM reader cannot read the topic of a read with {@code options} (a column
   * type it does not convert as Spark's Python reader does), or null.
   */
  static String unreadable(Map<String, String> options) {
    ObjectNode request = JSON.createObjectNode();
    request.put("check", true);
    ObjectNode opts = request.putObject("options");
    options.forEach(opts::put);
    JsonNode reason = run(request).path("unreadable");
    return reason.isTextual() ? reason.asText() : null;
  }

  /** The planner process of this JVM, kept between queries, and its interpreter. */
  private static Process process;
  private static String processPython;
  private static BufferedReader replies;

  private static JsonNode run(ObjectNode request) {
    return run(python(), request);
  }

  /**
   * Where the records of {@code segment}, planned but removed since (compacted, then
   * vacuumed), lie now: the segment as read from the compacted object holding them, or
   * null if none does. Runs on an executor, with the driver's interpreter {@code python}.
   */
  static SegmentTask.Segment relocate(
      String python, Map<String, String> options, SegmentTask.Segment segment) {
    ObjectNode request = JSON.createObjectNode();
    ObjectNode opts = request.putObject("options");
    options.forEach(opts::put);
    ObjectNode wanted = request.putObject("relocate");
    wanted.put("key", segment.key());
    wanted.put("base", segment.base());
    wanted.put("end", segment.end());
    JsonNode reply = run(python, request);
    if (reply.has("error")) {
      JsonNode e = reply.get("error");
      throw new ArrowLogException(e.path("type").asText(), e.path("message").asText());
    }
    JsonNode s = reply.path("segment");
    if (!s.isObject()) {
      return null;
    }
    return new SegmentTask.Segment(
        s.get("location").asText(),
        s.get("key").asText(),
        segment.base(),
        segment.end(),
        segment.lo(),
        segment.hi(),
        s.get("size").asLong(),
        s.path("compacted").path(0).asLong(),
        s.path("compacted").path(1).asLong(),
        null,
        segment.droppable());
  }

  private static synchronized JsonNode run(String python, ObjectNode request) {
    byte[] line = (JSON.valueToTree(request).toString() + "\n").getBytes(StandardCharsets.UTF_8);
    for (int attempt = 0; ; attempt++) {
      try {
        Process p = planner(python);
        OutputStream in = p.getOutputStream();
        in.write(line);
        in.flush();
        String reply = replies.readLine();
        if (reply == null) {
          throw new IOException("the planner exited with " + p.waitFor());
        }
        return JSON.readTree(reply);
      } catch (IOException e) {
        stop();
        if (attempt >= 1) { // a planner that died between queries is started again, once
          throw new ArrowLogException(
              "ArrowLogError",
              "the arrowlog planner (" + python + " -m arrowlog.spark.jvm_planner) failed: "
                  + e.getMessage() + "; is arrowlog installed for that interpreter?",
              e);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        stop();
        throw new ArrowLogException("ArrowLogError", "interrupted while planning", e);
      }
    }
  }

  private static Process planner(String python) throws IOException {
    if (process != null && process.isAlive() && python.equals(processPython)) {
      return process;
    }
    stop();
    ProcessBuilder builder = new ProcessBuilder(python, "-m", "arrowlog.spark.jvm_planner");
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new ArrowLogException(
          "MissingDependencyError",
          "cannot run the arrowlog planner with " + python
              + " (set spark.arrowlog.python, or build the session with"
              + " arrowlog.spark.configure)",
          e);
    }
    processPython = python;
    replies =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    return process;
  }

  private static void stop() {
    if (process != null) {
      process.destroy();
      process = null;
      replies = null;
    }
  }

  /** Throws {@code t}, checked or not (Spark's AnalysisException is checked in Java). */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> E raise(Throwable t) throws E {
    throw (E) t;
  }

  /** Milliseconds the last plan took, as the driver waited for it (the bench reads it). */
  public static double lastMillis() {
    return lastMillis;
  }

  /** Of {@link #lastMillis}, those the planner spent planning (the rest: the round trip). */
  public static double lastPlannerMillis() {
    return lastPlannerMillis;
  }

  /** The interpreter that plans: as PySpark picks its own, with arrowlog's setting first. */
  static String python() {
    SparkSession session = SparkSession.active();
    for (String key :
        new String[] {
          "spark.arrowlog.python", "spark.pyspark.driver.python", "spark.pyspark.python"
        }) {
      String value = session.conf().get(key, "");
      if (!value.isEmpty()) {
        return value;
      }
    }
    for (String env : new String[] {"PYSPARK_DRIVER_PYTHON", "PYSPARK_PYTHON"}) {
      String value = System.getenv(env);
      if (value != null && !value.isEmpty()) {
        return value;
      }
    }
    return "python3";
  }

  /** A filter as the planner takes it; null for a kind it does not use. */
  static ObjectNode filter(Filter f) {
    ObjectNode spec = JSON.createObjectNode();
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
    spec.put("op", f.getClass().getSimpleName());
    spec.putArray("attribute").add(attribute);
    if (values != null) {
      ArrayNode list = spec.putArray("value");
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
      spec.set("value", typed);
    }
    return spec;
  }

  private static ObjectNode typed(Object v) {
    ObjectNode out = JSON.createObjectNode();
    if (v instanceof Boolean b) {
      out.put("type", "bool").put("value", b);
    } else if (v instanceof Byte || v instanceof Short || v instanceof Integer
        || v instanceof Long) {
      out.put("type", "int").put("value", ((Number) v).longValue());
    } else if (v instanceof Float || v instanceof Double) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d) || Double.isInfinite(d)) {
        return null; // JSON has no such numbers: the filter only loses its pruning
      }
      out.put("type", "float").put("value", d);
    } else if (v instanceof String s) {
      out.put("type", "str").put("value", s);
    } else if (v instanceof BigDecimal d) {
      out.put("type", "decimal").put("value", d.toPlainString());
    } else if (v instanceof byte[] b) {
      out.put("type", "binary").put("value", Base64.getEncoder().encodeToString(b));
    } else if (v instanceof LocalDate d) {
      out.put("type", "date").put("value", d.toEpochDay());
    } else if (v instanceof java.sql.Date d) {
      out.put("type", "date").put("value", d.toLocalDate().toEpochDay());
    } else if (v instanceof Instant t) {
      out.put("type", "timestamp_us").put("value", micros(t));
    } else if (v instanceof java.sql.Timestamp t) {
      // Spark's own conversion: java.sql.Timestamp is Julian before 1582, Spark's
      // timestamps are proleptic Gregorian
      out.put("type", "timestamp_us").put("value", DateTimeUtils.fromJavaTimestamp(t));
    } else if (v instanceof LocalDateTime t) {
      out.put("type", "timestamp_us").put("value", micros(t.toInstant(ZoneOffset.UTC)));
    } else {
      return null;
    }
    return out;
  }

  private static long micros(Instant t) {
    return Math.addExact(Math.multiplyExact(t.getEpochSecond(), 1_000_000L), t.getNano() / 1000);
  }
}
