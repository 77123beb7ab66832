package io.arrowlog.spark.planning;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.format.Segment;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.sources.Filter;

/**
 * The plan wire: the JSON lines this reader and its Python planner exchange, one request
 * and one answer per line (docs/plan-wire.md says what each field means). The names are
 * arrowlog/spark/plan_wire.py's; the golden answers that module writes
 * (jvm/src/test/resources/golden/) are read by the self-test, which fails when the two
 * drift apart.
 *
 * <p>Every request and answer carries {@link #VERSION}: an answer of another version is
 * refused ({@code UnsupportedVersionError}, naming both), as the planner refuses a request
 * of another; a jar and a Python package of different builds never misread each other.
 */
public final class PlanWire {
  /** The version this reader speaks (plan_wire.VERSION). */
  public static final int VERSION = 1;

  static final String VERSION_FIELD = "version";
  static final String KIND = "kind";
  static final String PLAN = "plan";
  static final String CHECK = "check";
  static final String RELOCATE = "relocate";
  /** The kinds of a batch write's requests (arrowlog/spark/jvm_writing.py answers them). */
  public static final String WRITE_CHECK = "write_check";

  public static final String WRITE_BEGIN = "write_begin";
  public static final String WRITE_SIGN = "write_sign";
  public static final String WRITE_COMMIT = "write_commit";
  public static final String WRITE_ABORT = "write_abort";
  static final String OPTIONS = "options";
  static final String COLUMNS = "columns";
  static final String FILTERS = "filters";

  static final String ERROR = "error";
  static final String ERROR_TYPE = "type";
  static final String ERROR_MESSAGE = "message";
  static final String TASKS = "tasks";
  static final String SCHEMAS = "schemas";
  static final String METADATA_COLUMNS = "metadata_columns";
  static final String PLAN_MS = "plan_ms";
  static final String UNREADABLE = "unreadable";
  static final String SEGMENT = "segment";

  static final String TOPIC = "topic";
  static final String PARTITION = "partition";
  static final String ROWS = "rows";
  static final String BYTES = "bytes";
  static final String SEGMENTS = "segments";

  static final String LOCATION = "location";
  static final String KEY = "key";
  static final String BASE = "base";
  static final String END = "end";
  static final String LO = "lo";
  static final String HI = "hi";
  static final String SIZE = "size";
  static final String COMPACTED = "compacted";
  static final String APPEND_ID = "append_id";
  static final String DROPPABLE = "droppable";

  private static final JsonNodeFactory JSON = JsonNodeFactory.instance;

  private PlanWire() {}

  /** A plan answer: the tasks, the names of the metadata columns, the planner's time. */
  public record Plan(List<SegmentTask> tasks, MetadataColumns metadata, double plannerMillis) {}

  /** A check answer: why the JVM cannot read the topic (or null), the metadata names. */
  public record Check(String unreadable, MetadataColumns metadata) {}

  /** An error answer: the Python error's class name and message. */
  public record Failure(String type, String message) {}

  /** The request for the tasks of a read ({@code columns}: null for all of them). */
  public static ObjectNode planRequest(
      Map<String, String> options, List<String> columns, Filter[] filters) {
    ObjectNode request = request(PLAN, options);
    if (columns == null) {
      request.putNull(COLUMNS);
    } else {
      ArrayNode cols = request.putArray(COLUMNS);
      columns.forEach(cols::add);
    }
    ArrayNode pushed = request.putArray(FILTERS);
    for (Filter f : filters) {
      ObjectNode spec = Filters.spec(f);
      if (spec != null) {
        pushed.add(spec);
      }
    }
    return request;
  }

  /** The request for whether the JVM reader can read the topic of a read. */
  public static ObjectNode checkRequest(Map<String, String> options) {
    return request(CHECK, options);
  }

  /** The request for where the records of {@code segment}, removed since the plan, lie. */
  public static ObjectNode relocateRequest(Map<String, String> options, Segment segment) {
    ObjectNode request = request(RELOCATE, options);
    ObjectNode wanted = request.putObject(RELOCATE);
    wanted.put(KEY, segment.key());
    wanted.put(BASE, segment.base());
    wanted.put(END, segment.end());
    return request;
  }

  /** A batch write's request of {@code kind} ({@link #WRITE_CHECK}, ...), its fields to add. */
  public static ObjectNode writeRequest(String kind, Map<String, String> options) {
    return request(kind, options);
  }

  private static ObjectNode request(String kind, Map<String, String> options) {
    ObjectNode request = JSON.objectNode();
    request.put(VERSION_FIELD, VERSION);
    request.put(KIND, kind);
    ObjectNode opts = request.putObject(OPTIONS);
    options.forEach(opts::put);
    return request;
  }

  /**
   * The error of an answer, or null if it is none; any answer is first checked to be of
   * this version.
   *
   * @throws ArrowLogException UnsupportedVersionError: an answer of another version.
   */
  public static Failure failure(JsonNode answer) {
    accepted(answer);
    JsonNode e = answer.get(ERROR);
    if (e == null) {
      return null;
    }
    return new Failure(e.path(ERROR_TYPE).asText(), e.path(ERROR_MESSAGE).asText());
  }

  /** Refuses an answer of another version than this reader's. */
  static void accepted(JsonNode answer) {
    JsonNode version = answer.get(VERSION_FIELD);
    if (version == null || !version.isInt() || version.asInt() != VERSION) {
      throw new ArrowLogException(
          "UnsupportedVersionError",
          "the arrowlog planner answered in plan wire version "
              + (version == null ? "(none: a planner from before versions)" : version.toString())
              + "; this JVM reader speaks version " + VERSION
              + ": the jar and the arrowlog package come from different builds"
              + " (rebuild the jar: make setup)");
    }
  }

  /** A plan answer (not an error: see {@link #failure}). */
  public static Plan plan(JsonNode answer) {
    accepted(answer);
    Map<String, byte[]> schemas = new HashMap<>();
    JsonNode sent = answer.path(SCHEMAS);
    sent.fieldNames()
        .forEachRemaining(
            name -> schemas.put(name, Base64.getDecoder().decode(sent.get(name).asText())));
    List<SegmentTask> tasks = new ArrayList<>();
    for (JsonNode t : answer.path(TASKS)) {
      List<Segment> segments = new ArrayList<>();
      for (JsonNode s : t.path(SEGMENTS)) {
        segments.add(segment(s));
      }
      String topic = t.get(TOPIC).asText();
      tasks.add(
          new SegmentTask(
              topic,
              t.get(PARTITION).asInt(),
              t.get(ROWS).asLong(),
              t.get(BYTES).asLong(),
              segments.toArray(new Segment[0]),
              schemas.get(topic)));
    }
    MetadataColumns metadata = MetadataColumns.of(answer.get(METADATA_COLUMNS));
    if (metadata == null) {
      throw new ArrowLogException(
          "ArrowLogError", "a plan answer without the names of the metadata columns");
    }
    return new Plan(tasks, metadata, answer.path(PLAN_MS).asDouble());
  }

  private static Segment segment(JsonNode s) {
    return new Segment(
        s.get(LOCATION).asText(),
        s.get(KEY).asText(),
        s.get(BASE).asLong(),
        s.get(END).asLong(),
        s.get(LO).asLong(),
        s.get(HI).asLong(),
        s.get(SIZE).asLong(),
        s.path(COMPACTED).path(0).asLong(-1),
        s.path(COMPACTED).path(1).asLong(-1),
        s.hasNonNull(APPEND_ID) ? s.get(APPEND_ID).asText() : null,
        s.path(DROPPABLE).asBoolean(false));
  }

  /** A check answer; an error answer checks nothing (the plan then fails with it). */
  public static Check check(JsonNode answer) {
    if (failure(answer) != null) {
      return new Check(null, null);
    }
    JsonNode reason = answer.path(UNREADABLE);
    return new Check(
        reason.isTextual() ? reason.asText() : null,
        MetadataColumns.of(answer.get(METADATA_COLUMNS)));
  }

  /**
   * A relocate answer: {@code planned} as read from the compacted object now holding its
   * records, or null if none does.
   *
   * @throws ArrowLogException an error answer, as the Python error.
   */
  public static Segment relocated(JsonNode answer, Segment planned) {
    Failure e = failure(answer);
    if (e != null) {
      throw new ArrowLogException(e.type(), e.message());
    }
    JsonNode s = answer.path(SEGMENT);
    if (!s.isObject()) {
      return null;
    }
    return new Segment(
        s.get(LOCATION).asText(),
        s.get(KEY).asText(),
        planned.base(),
        planned.end(),
        planned.lo(),
        planned.hi(),
        s.get(SIZE).asLong(),
        s.path(COMPACTED).path(0).asLong(),
        s.path(COMPACTED).path(1).asLong(),
        null,
        planned.droppable());
  }
}
