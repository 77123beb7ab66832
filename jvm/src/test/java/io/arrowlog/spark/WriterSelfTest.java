package io.arrowlog.spark;

import static io.arrowlog.spark.GoldenSelfTest.expect;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.format.ColumnRanges;
import io.arrowlog.spark.format.Fetch;
import io.arrowlog.spark.format.JsonProbes;
import io.arrowlog.spark.format.Segment;
import io.arrowlog.spark.format.SegmentFile;
import io.arrowlog.spark.format.SegmentWriter;
import io.arrowlog.spark.format.StagedHeader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compare.VectorEqualsVisitor;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.util.ArrowUtils;

/**
 * The JVM's encoder of staged data objects ({@link SegmentWriter}) on the rows of {@link
 * WriterRows}, turned into Arrow by Spark's own {@code ArrowWriter}: for each case (codec
 * none and ZSTD, a small batch and one large enough for a column table) it writes the
 * object to {@code OUT_DIR/<case>/<its key>}, and reads it back with the JVM reader's own
 * classes (whole, and for a large object two columns by ranged reads). Also writes
 * {@code OUT_DIR/probes.json}: headers, doubles and decimals as the encoder writes them
 * as JSON, for Python to compare with its own. Run by tests/jvm/test_segment_writer.py:
 *
 * <pre>java io.arrowlog.spark.WriterSelfTest OUT_DIR</pre>
 *
 * <p>Exits 1 if any check fails.
 */
public final class WriterSelfTest {
  /** A case: its name, codec, rows, and the header's varying parts. */
  record Case(String name, SegmentWriter.Codec codec, int rows, String appendId, long ms) {}

  static final List<Case> CASES =
      List.of(
          new Case("none-small", SegmentWriter.Codec.NONE, 50, id(1), 1_700_000_000_123L),
          new Case("zstd-small", SegmentWriter.Codec.ZSTD, 50, id(2), 1_700_000_009_999L),
          new Case("none-big", SegmentWriter.Codec.NONE, 50_000, id(3), 1_700_000_010_000L),
          new Case("zstd-big", SegmentWriter.Codec.ZSTD, 50_000, id(4), 1_712_345_678_901L));
  static final long PRODUCER_ID = 42;
  static final int PRODUCER_EPOCH = 7;
  static final String TRANSACTIONAL_ID = "spark-write-\"é\"-1";

  private static int passed;

  private WriterSelfTest() {}

  static String id(int k) {
    return String.format("%032x", 0xabcdef00L + k);
  }

  public static void main(String[] args) throws Exception {
    Path out = Path.of(args[0]);
    List<String> failures = new ArrayList<>();
    try (BufferAllocator allocator = new RootAllocator()) {
      for (Case c : CASES) {
        check("case " + c.name() + " is written and read back", failures,
            () -> writeAndReadBack(c, out, allocator));
      }
      check("a batch of another count than its header's is refused", failures,
          () -> refusesOtherCounts(allocator));
    }
    check("a header without a 32-digit append id is refused", failures, () ->
        refused(() -> new StagedHeader("ABC", 1, 0, 1, 0, "t"), "InvalidConfigError"));
    check("a header of no records is refused", failures, () ->
        refused(() -> new StagedHeader(id(0), 0, 0, 1, 0, "t"), "InvalidConfigError"));
    Files.writeString(out.resolve("probes.json"), probes().toString());
    System.out.println(passed + " checks passed, " + failures.size() + " failed");
    for (String failure : failures) {
      System.out.println("FAILED " + failure);
    }
    System.exit(failures.isEmpty() ? 0 : 1);
  }

  interface Check {
    void run() throws Exception;
  }

  private static void check(String name, List<String> failures, Check check) {
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

  /** {@code call} throws an arrowlog error of {@code type}. */
  private static void refused(Check call, String type) throws Exception {
    try {
      call.run();
    } catch (ArrowLogException e) {
      expect(e.type().equals(type), "refused as " + e.type() + ", expected " + type);
      return;
    }
    throw new AssertionError("not refused");
  }

  private static void refusesOtherCounts(BufferAllocator allocator) throws Exception {
    Schema schema = ArrowUtils.toArrowSchema(WriterRows.SCHEMA, "UTC", true, false, false);
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      ArrowWriter writer = ArrowWriter.create(root);
      writer.finish();
      StagedHeader one = new StagedHeader(id(0), 1, 0, 1, 0, "t");
      refused(() -> SegmentWriter.staged(root, one, SegmentWriter.Codec.NONE), "InvalidBatchError");
      writer.write(WriterRows.row(0));
      writer.write(WriterRows.row(1));
      writer.finish();
      refused(() -> SegmentWriter.staged(root, one, SegmentWriter.Codec.ZSTD), "InvalidBatchError");
    }
  }

  private static void writeAndReadBack(Case c, Path out, BufferAllocator allocator)
      throws Exception {
    Schema schema = ArrowUtils.toArrowSchema(WriterRows.SCHEMA, "UTC", true, false, false);
    try (VectorSchemaRoot root = VectorSchemaRoot.create(schema, allocator)) {
      ArrowWriter writer = ArrowWriter.create(root);
      for (int i = 0; i < c.rows(); i++) {
        writer.write(WriterRows.row(i));
      }
      writer.finish();
      StagedHeader header =
          new StagedHeader(
              c.appendId(), c.rows(), c.ms(), PRODUCER_ID, PRODUCER_EPOCH, TRANSACTIONAL_ID);
      SegmentWriter.Encoded encoded = SegmentWriter.encode(root, header, c.codec());
      byte[] data = encoded.bytes();
      expect(Arrays.equals(SegmentWriter.staged(root, header, c.codec()), data),
          "staged() writes what encode() does, and the same bytes twice");
      Path file = out.resolve(c.name()).resolve(header.at());
      Files.createDirectories(file.getParent());
      Files.write(file, data);
      Files.writeString(out.resolve(c.name()).resolve("stats.json"), encoded.stats());
      Segment segment =
          new Segment(
              file.toString(), "t/0/" + header.at(), 10, 10 + c.rows(), 10, 10 + c.rows(),
              data.length, -1, -1, c.appendId(), false);
      try (SegmentFile read =
          SegmentFile.open(
              Fetch.offHeap(data, allocator), true, segment, allocator, null, schema)) {
        sameColumns(root, read.root(), null);
      }
      if (c.rows() > 1000) {
        Set<String> two = Set.of("l", "bin");
        byte[] some = ColumnRanges.fetch(segment, two);
        expect(some != null, "a large object is read by its column table");
        expect(some.length < data.length, "the column read stops at the record batch's end");
        try (SegmentFile read =
            SegmentFile.open(
                Fetch.offHeap(some, allocator), false, segment, allocator, two, schema)) {
          sameColumns(root, read.root(), two);
        }
      }
    }
  }

  /** Every column of {@code read} (those {@code wanted}, or all) equals the written one. */
  private static void sameColumns(
      VectorSchemaRoot written, VectorSchemaRoot read, Set<String> wanted) {
    expect(read.getRowCount() == written.getRowCount(),
        "rows read " + read.getRowCount() + ", written " + written.getRowCount());
    int compared = 0;
    for (FieldVector v : written.getFieldVectors()) {
      String name = v.getField().getName();
      if (wanted != null && !wanted.contains(name)) {
        continue;
      }
      FieldVector got = read.getVector(name);
      expect(got != null, "column " + name + " read");
      expect(VectorEqualsVisitor.vectorEquals(v, got), "column " + name + " reads as written");
      compared++;
    }
    expect(compared == (wanted == null ? written.getFieldVectors().size() : wanted.size()),
        "every wanted column compared");
  }

  /** JSON as the encoder writes it, for Python to compare with its own. */
  private static ObjectNode probes() {
    ObjectNode probes = GoldenSelfTest.JSON.createObjectNode();
    probes.set("doubles", JsonProbes.doubles());
    probes.set("decimals", JsonProbes.decimals());
    ArrayNode headers = probes.putArray("headers");
    String[] ids = {TRANSACTIONAL_ID, null, "", "tab\t nl\n cr\r bs\\ del\u007f nul\u0000 😀"};
    long[] ms = {0, 9_999, 10_000, 1_700_000_000_123L, 9_999_999_999_999L};
    for (int k = 0; k < ids.length; k++) {
      StagedHeader h = new StagedHeader(id(k), k + 1, ms[k], k, k * 3, ids[k]);
      ObjectNode one = headers.addObject();
      one.put("append_id", h.appendId()).put("record_count", h.recordCount())
          .put("timestamp_ms", h.timestampMs()).put("producer_id", h.producerId())
          .put("producer_epoch", h.producerEpoch()).put("transactional_id", h.transactionalId())
          .put("json", h.toJson()).put("at", h.at());
    }
    return probes;
  }
}
