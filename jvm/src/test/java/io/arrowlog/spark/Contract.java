package io.arrowlog.spark;

import static io.arrowlog.spark.GoldenSelfTest.expect;

import com.fasterxml.jackson.databind.JsonNode;
import io.arrowlog.spark.format.Segment;
import io.arrowlog.spark.format.SegmentFile;
import io.arrowlog.spark.planning.Filters;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.PlanWire;
import java.io.IOException;
import java.math.BigDecimal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.LocalDate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.StringStartsWith;

/**
 * The names the JVM reader shares with the Python library, checked against the golden
 * {@code contract.json} (written from arrowlog.spark.plan_wire, arrowlog.spark.options
 * and arrowlog.scan), and the requests it sends.
 */
final class Contract {
  /** A filter of every op, with a value of every type the wire has (tests/jvm reads them). */
  static final Filter[] EVERY_FILTER = {
    new EqualTo("b", true),
    new EqualTo("i", 3),
    new GreaterThan("l", 7L),
    new GreaterThanOrEqual("f", 1.5),
    new LessThan("s", "m"),
    new LessThanOrEqual("dec", new BigDecimal("12.34")),
    new EqualTo("bin", new byte[] {0, 1, (byte) 255}),
    new GreaterThan("d", LocalDate.of(2024, 1, 2)),
    new LessThan("ts", Instant.parse("2024-01-02T03:04:05.123456Z")),
    new In("partition", new Object[] {0, 2, null}),
    new IsNull("x"),
    new IsNotNull("y"),
  };

  static final Map<String, String> OPTIONS = Map.of("path", "/golden/log", "topic", "t");

  private Contract() {}

  static void names(JsonNode contract) {
    expect(
        contract.get("plan_wire_version").asInt() == PlanWire.VERSION,
        "plan wire version: Python " + contract.get("plan_wire_version") + ", Java "
            + PlanWire.VERSION);
    expect(
        contract.get("segment_format_version").asInt() == SegmentFile.FORMAT_VERSION,
        "segment format version: Python " + contract.get("segment_format_version")
            + ", Java " + SegmentFile.FORMAT_VERSION);
    expect(
        contract.get("staged_format_version").asInt() == SegmentFile.STAGED_VERSION,
        "staged format version: Python " + contract.get("staged_format_version")
            + ", Java " + SegmentFile.STAGED_VERSION);
    expect(
        strings(contract.get("metadata_roles")).equals(MetadataColumns.ROLES),
        "metadata roles: Python " + contract.get("metadata_roles") + ", Java "
            + MetadataColumns.ROLES);
    List<String> options = strings(contract.get("read_options"));
    for (String name : OptionNames.READ_OPTIONS) {
      expect(options.contains(name), "option " + name + " is not one Python reads: " + options);
    }
    expect(
        strings(contract.get("readers")).equals(OptionNames.READERS),
        "readers: Python " + contract.get("readers") + ", Java " + OptionNames.READERS);
    expect(
        contract.get("python_conf").asText().equals(OptionNames.PYTHON_CONF),
        "planner setting: Python " + contract.get("python_conf") + ", Java "
            + OptionNames.PYTHON_CONF);
  }

  /** Every op and value type the JVM sends is one the planner takes, and all are sent. */
  static void filters(JsonNode contract) {
    Set<String> ops = new TreeSet<>();
    Set<String> types = new TreeSet<>();
    for (Filter f : EVERY_FILTER) {
      JsonNode spec = Filters.spec(f);
      expect(spec != null, f + " is not sent");
      ops.add(spec.get("op").asText());
      JsonNode value = spec.path("value");
      for (JsonNode typed : value.isArray() ? value : List.of(value)) {
        if (!typed.isMissingNode()) {
          types.add(typed.get("type").asText());
        }
      }
    }
    expect(ops.equals(new TreeSet<>(strings(contract.get("filter_ops")))),
        "filter ops: Java " + ops + ", Python " + contract.get("filter_ops"));
    expect(types.equals(new TreeSet<>(strings(contract.get("value_types")))),
        "value types: Java " + types + ", Python " + contract.get("value_types"));
    expect(Filters.spec(new StringStartsWith("s", "a")) == null, "StartsWith is sent");
  }

  /** A request of each kind, one per line, for the Python test to read. */
  static void requests(Path out) throws IOException {
    Segment removed = new Segment("/gone", "t/0/segments/5.arrow", 5, 8, 5, 8, 99, -1, -1,
        null, false);
    List<String> lines = List.of(
        PlanWire.planRequest(OPTIONS, List.of("i", "s"), EVERY_FILTER).toString(),
        PlanWire.planRequest(OPTIONS, null, new Filter[0]).toString(),
        PlanWire.checkRequest(OPTIONS).toString(),
        PlanWire.relocateRequest(OPTIONS, removed).toString());
    Files.write(out.resolve("requests.jsonl"), lines);
  }

  private static List<String> strings(JsonNode array) {
    List<String> out = new ArrayList<>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }
}
