package io.arrowlog.spark;

import static io.arrowlog.spark.GoldenSelfTest.expect;
import static io.arrowlog.spark.GoldenSelfTest.read;

import com.fasterxml.jackson.databind.JsonNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.format.Segment;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.SegmentTask;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * The golden case {@code staged} (a segment, a commit object naming two staged data
 * objects, a segment) planned wrongly: the reader refuses each object where the plan
 * does not name it as the commit does, as the Python reader's {@code check_segment} does.
 */
final class StagedObjects {
  /** Each wrong plan of the case's objects, and what its refusal says. */
  static final Map<String, String> REFUSALS = new LinkedHashMap<>();

  static {
    REFUSALS.put("a commit object planned as records", "a commit object where the plan has");
    REFUSALS.put("a staged object planned at a segment's key", "a staged data object outside");
    REFUSALS.put("a segment planned at a staged key", "a segment under staged/ without");
    REFUSALS.put("a staged object planned with another count", "holds 4 records, the commit");
    REFUSALS.put("a staged object planned with another append id", "not the staged data object");
    REFUSALS.put("a staged object planned without an append id", "not the staged data object");
  }

  private StagedObjects() {}

  /** Reads the case's object that {@code wrong} names planned wrongly: it must be refused. */
  static void refused(Path dir, String wrong, String message) throws IOException {
    PlanWire.Plan plan = PlanWire.plan(read(dir.resolve("plan.json")));
    SegmentTask task = plan.tasks().get(0);
    Segment first = task.segments()[0];
    Segment staged = task.segments()[1]; // four records at [3, 7)
    expect(staged.key().contains("/staged/") && staged.end() - staged.base() == 4,
        "the plan's second segment is the staged batch of [3, 7): " + staged);
    Segment segment =
        switch (wrong) {
          case "a commit object planned as records" -> {
            String key = "staged/0/segments/00000000000000000003.arrow";
            yield planned(dir, key, key, 3, 10, null);
          }
          case "a staged object planned at a segment's key" ->
              planned(dir, staged.location(), "staged/0/segments/00000000000000000003.arrow",
                  3, 7, staged.appendId());
          case "a segment planned at a staged key" ->
              planned(dir, first.location(), staged.key(), 0, 3, first.appendId());
          case "a staged object planned with another count" ->
              planned(dir, staged.location(), staged.key(), 3, 6, staged.appendId());
          case "a staged object planned with another append id" ->
              planned(dir, staged.location(), staged.key(), 3, 7, first.appendId());
          case "a staged object planned without an append id" ->
              planned(dir, staged.location(), staged.key(), 3, 7, null);
          default -> throw new AssertionError("no such wrong plan: " + wrong);
        };
    JsonNode expected = read(dir.resolve("expected.json"));
    StructType schema = (StructType) DataType.fromJson(expected.get("spark_schema").toString());
    SegmentTask one =
        new SegmentTask(
            task.topic(), task.partition(), 1, segment.size(), new Segment[] {segment},
            task.schema());
    try (SegmentReader reader =
        new SegmentReader(
            one,
            schema,
            plan.metadata(),
            new SegmentReaderFactory.Relocation(new HashMap<>(), "no-python-needed"))) {
      reader.next();
    } catch (ArrowLogException e) {
      expect(e.type().equals("CorruptSegmentError"), "refused as " + e.type() + ": " + e);
      expect(e.getMessage().contains(message), "the refusal says '" + message + "': " + e);
      expect(e.getMessage().contains(segment.key()), "the refusal names the key: " + e);
      return;
    }
    throw new AssertionError(wrong + " was read");
  }

  /** A segment of the case at {@code location} (relative to the golden directory). */
  private static Segment planned(
      Path dir, String location, String key, long base, long end, String appendId)
      throws IOException {
    Path file = dir.getParent().resolve(location);
    return new Segment(
        file.toString(), key, base, end, base, end, Files.size(file), -1, -1, appendId, false);
  }
}
