package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.arrowlog.spark.format.Segment;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.SegmentTask;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * The JVM reader against the golden files Python writes (tests/jvm/golden.py): every
 * case's segments read with the reader's own classes give the rows the Python reader
 * gives, every wire answer reads as written, the names both languages share agree, and an
 * answer of another wire version is refused. Run by tests/jvm/test_golden_contract.py:
 *
 * <pre>java io.arrowlog.spark.GoldenSelfTest GOLDEN_DIR OUT_DIR</pre>
 *
 * <p>Writes into OUT_DIR the requests this reader sends ({@code requests.jsonl}), which the
 * Python test reads with the planner's own parser. Exits 1 if any check fails.
 */
public final class GoldenSelfTest {
  static final ObjectMapper JSON = new ObjectMapper();

  private final Path golden;
  private final List<String> failures = new ArrayList<>();
  private int passed;

  private GoldenSelfTest(Path golden) {
    this.golden = golden;
  }

  public static void main(String[] args) throws Exception {
    Path golden = Path.of(args[0]);
    Path out = Path.of(args[1]);
    GoldenSelfTest test = new GoldenSelfTest(golden);
    JsonNode contract = read(golden.resolve("contract.json"));
    test.check("the shared names agree", () -> Contract.names(contract));
    test.check("the filters are sent as the planner takes them", () -> Contract.filters(contract));
    for (Path dir : test.cases()) {
      test.check("case " + dir.getFileName() + " reads as Python reads it", () -> test.readCase(dir));
    }
    for (String answer : List.of("check", "check-failed", "relocate", "relocate-none", "error")) {
      test.check("answer " + answer + " reads as written", () -> test.answer(answer));
    }
    Path staged = golden.resolve("staged");
    for (Map.Entry<String, String> e : StagedObjects.REFUSALS.entrySet()) {
      test.check(
          "staged objects: " + e.getKey() + " is refused",
          () -> StagedObjects.refused(staged, e.getKey(), e.getValue()));
    }
    test.check("a Python traceback reads as its arrowlog error's line", Tracebacks::oneLine);
    test.check("an answer of another version is refused", test::refusesOtherVersions);
    test.check("a planner answering another version is refused", () -> Versions.planner(out));
    test.check("the requests are written", () -> Contract.requests(out));
    System.out.println(test.passed + " checks passed, " + test.failures.size() + " failed");
    for (String failure : test.failures) {
      System.out.println("FAILED " + failure);
    }
    System.exit(test.failures.isEmpty() ? 0 : 1);
  }

  interface Check {
    void run() throws Exception;
  }

  private void check(String name, Check check) {
    try {
      check.run();
      passed++;
      System.out.println("ok     " + name);
    } catch (Throwable t) { // every failure is reported, then the exit code says so
      failures.add(name + ": " + t);
      System.out.println("FAILED " + name);
      t.printStackTrace(System.out);
    }
  }

  static void expect(boolean condition, String message) {
    if (!condition) {
      throw new AssertionError(message);
    }
  }

  static JsonNode read(Path path) throws IOException {
    return JSON.readTree(Files.readString(path));
  }

  private List<Path> cases() throws IOException {
    List<Path> out = new ArrayList<>();
    try (Stream<Path> dirs = Files.list(golden)) {
      dirs.filter(d -> Files.isRegularFile(d.resolve("plan.json"))).sorted().forEach(out::add);
    }
    expect(out.size() >= 7, "golden cases found: " + out);
    return out;
  }

  /** A case's plan answer, its segments read by {@link SegmentReader}, row by row. */
  private void readCase(Path dir) throws Exception {
    PlanWire.Plan plan = PlanWire.plan(read(dir.resolve("plan.json")));
    JsonNode expected = read(dir.resolve("expected.json"));
    StructType schema = (StructType) DataType.fromJson(expected.get("spark_schema").toString());
    MetadataColumns meta = plan.metadata();
    expect(meta.in(schema), "metadata columns " + meta + " not in " + schema);
    ArrayNode rows = JSON.createArrayNode();
    for (SegmentTask task : plan.tasks()) {
      try (SegmentReader reader =
          new SegmentReader(
              local(task),
              schema,
              meta,
              new SegmentReaderFactory.Relocation(new HashMap<>(), "no-python-needed"))) {
        while (reader.next()) {
          ColumnarBatch batch = reader.get();
          for (int i = 0; i < batch.numRows(); i++) {
            rows.add(SparkRows.row(batch.getRow(i), schema));
          }
        }
      }
    }
    JsonNode got = JSON.readTree(rows.toString()); // numbers as the file's parse has them
    JsonNode want = expected.get("rows");
    expect(got.size() == want.size(), "rows: " + got.size() + ", expected " + want.size());
    for (int i = 0; i < want.size(); i++) {
      expect(got.get(i).equals(want.get(i)), "row " + i + ": " + got.get(i) + ", expected "
          + want.get(i));
    }
  }

  /** {@code task} with its segments' locations resolved in the golden directory. */
  private SegmentTask local(SegmentTask task) {
    Segment[] segments = task.segments().clone();
    for (int i = 0; i < segments.length; i++) {
      segments[i] = segments[i].at(golden.resolve(segments[i].location()).toString());
    }
    return new SegmentTask(
        task.topic(), task.partition(), task.rows(), task.bytes(), segments, task.schema());
  }

  /** A wire answer parsed, compared with what the golden file says it holds. */
  private void answer(String name) throws IOException {
    JsonNode answer = read(golden.resolve("wire").resolve(name + ".json"));
    JsonNode want = read(golden.resolve("wire").resolve("expected.json")).get(name);
    ObjectNode got = JSON.createObjectNode();
    if (name.startsWith("check")) {
      PlanWire.Check check = PlanWire.check(answer);
      got.put("unreadable", check.unreadable());
      got.set("metadata_columns", names(check.metadata()));
    } else if (name.startsWith("relocate")) {
      Segment planned = new Segment("x", "x", 0, 3, 1, 3, 10, -1, -1, "id", false);
      Segment found = PlanWire.relocated(answer, planned);
      if (found == null) {
        expect(want.isNull(), name + ": no segment, expected " + want);
        return;
      }
      expect(found.base() == 0 && found.end() == 3 && found.lo() == 1 && found.hi() == 3,
          "the planned offsets kept: " + found);
      got.put("location", found.location());
      got.put("key", found.key());
      got.put("size", found.size());
      got.putArray("compacted").add(found.compactedStart()).add(found.compactedEnd());
    } else {
      PlanWire.Failure failure = PlanWire.failure(answer);
      got.put("type", failure.type());
      got.put("message", failure.message());
    }
    expect(JSON.readTree(got.toString()).equals(want), name + ": read " + got + ", expected "
        + want);
  }

  private static JsonNode names(MetadataColumns meta) {
    if (meta == null) {
      return JSON.nullNode();
    }
    ObjectNode out = JSON.createObjectNode();
    out.put("topic", meta.topic());
    out.put("partition", meta.partition());
    out.put("offset", meta.offset());
    out.put("timestamp", meta.timestamp());
    return out;
  }

  /** Golden answers given another version (or none) are refused, naming both versions. */
  private void refusesOtherVersions() throws IOException {
    ObjectNode plan = (ObjectNode) read(golden.resolve("codec-none").resolve("plan.json"));
    PlanWire.plan(plan); // as written: read
    Map<String, JsonNode> answers = new HashMap<>();
    answers.put("plan", plan);
    answers.put("check", read(golden.resolve("wire").resolve("check.json")));
    answers.put("error", read(golden.resolve("wire").resolve("error.json")));
    for (Map.Entry<String, JsonNode> e : answers.entrySet()) {
      ObjectNode later = e.getValue().deepCopy();
      later.put("version", PlanWire.VERSION + 98);
      Versions.refused(() -> parse(e.getKey(), later), "version " + (PlanWire.VERSION + 98));
      ObjectNode unversioned = e.getValue().deepCopy();
      unversioned.remove("version");
      Versions.refused(() -> parse(e.getKey(), unversioned), "(none");
    }
  }

  private static void parse(String kind, JsonNode answer) {
    switch (kind) {
      case "plan" -> PlanWire.plan(answer);
      case "check" -> PlanWire.check(answer);
      default -> PlanWire.failure(answer);
    }
  }
}
