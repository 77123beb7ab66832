package io.arrowlog.spark.format;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.arrowlog.spark.errors.ArrowLogException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * One segment checked and opened: an Arrow IPC file of one record batch (its framing and
 * CRC: {@link Framing}) with arrowlog's header in the schema's metadata
 * (arrowlog/segment/__init__.py describes the keys named here).
 */
public final class SegmentFile implements AutoCloseable {
  /** The header's JSON (format version {@link #FORMAT_VERSION} or {@link #STAGED_VERSION}). */
  static final String HEADER_KEY = "arrowlog.header";
  /** A compacted object's table of runs, and its CRC32C. */
  static final String COMPACTED_KEY = "arrowlog.compacted";
  static final String COMPACTED_CRC_KEY = "arrowlog.compacted_crc32c";
  /** In a commit object only: the staged data objects it commits. */
  static final String REFS_KEY = "arrowlog.refs";
  /** The segment format version of a segment and a compacted object (the header's {@code v}). */
  public static final int FORMAT_VERSION = 1;
  /** The version of a staged data object's header and of a commit object's. */
  public static final int STAGED_VERSION = 2;

  /**
   * The key of a staged data object: {@code staged/<folder>/<name>.arrow} under its
   * partition's directory (arrowlog/format/topic.py, {@code staged_at}).
   */
  private static final Pattern STAGED_KEY =
      Pattern.compile(
          "(?:^|.*/)staged/\\d{10}/\\d{13}-[0-9a-f]{32}-\\d+(?:-p\\d+e\\d+s\\d+)?(?:-t)?\\.arrow");

  private static final ObjectMapper JSON = new ObjectMapper();

  private final String key;
  private final ColumnReader reader;
  /** The columns read (those wanted). */
  private final VectorSchemaRoot root;
  private final long timestampMs;
  /**
   * In a compacted object: each run's base offset to {first row, records, timestamp ms};
   * null in a segment.
   */
  private final Map<Long, long[]> runs;

  private SegmentFile(
      String key,
      ColumnReader reader,
      VectorSchemaRoot root,
      long timestampMs,
      Map<Long, long[]> runs) {
    this.key = key;
    this.reader = reader;
    this.root = root;
    this.timestampMs = timestampMs;
    this.runs = runs;
  }

  /**
   * Where {@code segment}'s records lie in this file: {first row, timestamp ms}. A segment's
   * are all of it; a compacted object's are one run of its table (null: left out, and the
   * plan allows it).
   */
  public long[] rows(Segment segment) {
    if (runs == null) {
      return new long[] {0, timestampMs};
    }
    long[] run = runs.get(segment.base());
    if (run == null && segment.droppable()) {
      return null; // aborted records, read_uncommitted: compaction left them out
    }
    if (run == null || run[1] != segment.end() - segment.base()) {
      throw corrupt(
          "compacted object does not hold the records of ["
              + segment.base() + ", " + segment.end() + ")",
          key);
    }
    return new long[] {run[0], run[2]};
  }

  /** The object's key. */
  public String key() {
    return key;
  }

  /** The columns read (those wanted), loaded. */
  public VectorSchemaRoot root() {
    return root;
  }

  /** The dictionary of a dictionary-encoded column ({@code id}: its encoding's), or null. */
  public Dictionary dictionary(long id) throws IOException {
    return reader.getDictionaryVectors().get(id);
  }

  @Override
  public void close() throws IOException {
    reader.close();
  }

  /**
   * A checked segment with the columns {@code wanted} loaded (null: all of them), from
   * the whole object ({@code whole}, checked here) or from what {@link ColumnRanges}
   * fetched and checked (the object up to the end of its record batch). Takes {@code
   * data}'s reference: the columns read are slices of it, or decompressed from it.
   */
  public static SegmentFile open(
      ArrowBuf data,
      boolean whole,
      Segment segment,
      BufferAllocator allocator,
      Set<String> wanted,
      Schema topic) {
    String key = segment.key();
    ColumnReader reader;
    try {
      if (whole) {
        Framing.verify(data, key);
      }
      if (data.capacity() < 8) {
        throw corrupt("not an Arrow IPC file (" + data.capacity() + " bytes; truncated?)", key);
      }
      reader = new ColumnReader(data, 8, allocator, wanted);
    } catch (RuntimeException e) {
      data.close();
      throw e;
    }
    try {
      Schema found = reader.getVectorSchemaRoot().getSchema();
      JsonNode header = header(found.getCustomMetadata(), key);
      long count = header.path("record_count").asLong(-1);
      if (!header.path("control_type").isNull()) {
        throw corrupt("a transaction marker where the plan has records", key);
      }
      if (found.getCustomMetadata().containsKey(REFS_KEY)) {
        throw corrupt(
            "a commit object where the plan has records: it holds none, the staged data "
                + "objects it names do (a planner that predates staged appends?)",
            key);
      }
      long base = staged(header, segment, count);
      if (topic != null) {
        TopicSchema.check(found, topic, reader, key);
      }
      Map<Long, long[]> runs =
          segment.compacted() ? runs(found.getCustomMetadata(), segment, count, key) : null;
      if (runs == null && (base != segment.base() || base + count != segment.end())) {
        throw corrupt(
            "segment holds [" + base + ", " + (base + count) + "), the log says ["
                + segment.base() + ", " + segment.end() + ")",
            key);
      }
      String appended = header.path("append_id").asText();
      if (runs == null && segment.appendId() != null && !segment.appendId().equals(appended)) {
        throw corrupt(
            "not the segment this scan planned (append " + appended + ", planned "
                + segment.appendId() + "): its records were deleted or compacted since, "
                + "and a late write took its key; plan the scan again",
            key);
      }
      if (!reader.loadNextBatch() || reader.selected().getRowCount() != count) {
        throw corrupt("header says " + count + " records, the batch has others", key);
      }
      VectorSchemaRoot root = reader.selected();
      long after = 8 + reader.bytesRead();
      if (whole
          && (after + 8 > data.capacity()
              || data.getByte(after) != -1
              || data.getByte(after + 4) != 0)) {
        throw corrupt("a segment holds one record batch, found more", key);
      }
      return new SegmentFile(key, reader, root, header.path("timestamp_ms").asLong(), runs);
    } catch (IOException | RuntimeException e) {
      try {
        reader.close();
      } catch (IOException suppressed) {
        e.addSuppressed(suppressed);
      }
      if (e instanceof ArrowLogException a) {
        throw a;
      }
      throw new ArrowLogException("CorruptSegmentError", key + ": unreadable Arrow IPC: " + e, e);
    }
  }

  /**
   * The base offset of the object's records: its header's, or for a staged data object
   * (whose header says 0) the plan's, which the commit naming it gave. A staged header
   * must be read from a staged key and a staged key hold one, as the Python reader checks
   * (arrowlog/partition/fetch.py, {@code check_segment}); a staged object must hold as many
   * records as the commit says, and be the object the commit names (its append id).
   */
  private static long staged(JsonNode header, Segment segment, long count) {
    String key = segment.key();
    boolean staged = header.path("staged").asBoolean(false);
    if (staged != STAGED_KEY.matcher(key).matches()) {
      throw corrupt(
          staged
              ? "a staged data object outside staged/ (the plan names it as a segment)"
              : "a segment under staged/ without a staged header",
          key);
    }
    long base = header.path("base_offset").asLong(-1);
    if (!staged) {
      return base;
    }
    if (header.path("v").asInt() != STAGED_VERSION || base != 0) {
      throw corrupt("staged data object with an impossible header", key);
    }
    if (count != segment.end() - segment.base()) {
      throw corrupt(
          "staged data object holds " + count + " records, the commit naming it says ["
              + segment.base() + ", " + segment.end() + ")",
          key);
    }
    String appended = header.path("append_id").asText();
    if (!appended.equals(segment.appendId())) {
      throw corrupt(
          "not the staged data object the commit names (append " + appended + ", planned "
              + segment.appendId() + ")",
          key);
    }
    return segment.base();
  }

  /** A compacted object's table, checked by its CRC32C and against the plan. */
  private static Map<Long, long[]> runs(
      Map<String, String> metadata, Segment segment, long count, String key)
      throws IOException {
    String raw = metadata == null ? null : metadata.get(COMPACTED_KEY);
    String stored = metadata == null ? null : metadata.get(COMPACTED_CRC_KEY);
    if (raw == null || stored == null) {
      throw corrupt("no compaction table: not a compacted object", key);
    }
    CRC32C crc = new CRC32C();
    crc.update(raw.getBytes(StandardCharsets.UTF_8));
    if (!stored.equals(String.format("%08x", crc.getValue()))) {
      throw corrupt("compaction table checksum mismatch", key);
    }
    JsonNode table = JSON.readTree(raw);
    long start = table.path("start").asLong(-1);
    long end = table.path("end").asLong(-1);
    if (start != segment.compactedStart() || end != segment.compactedEnd()) {
      throw corrupt(
          "compacted object holds [" + start + ", " + end + "), its key says ["
              + segment.compactedStart() + ", " + segment.compactedEnd() + ")",
          key);
    }
    Map<Long, long[]> out = new HashMap<>();
    long row = 0;
    for (JsonNode run : table.path("runs")) {
      long records = run.path(1).asLong(-1);
      if (records < 1) {
        throw corrupt("compaction table runs out of order", key);
      }
      out.put(run.path(0).asLong(), new long[] {row, records, run.path(2).asLong()});
      row += records;
    }
    if (row != count) {
      throw corrupt("compaction table does not match its records", key);
    }
    return out;
  }

  private static JsonNode header(Map<String, String> metadata, String key) throws IOException {
    String raw = metadata == null ? null : metadata.get(HEADER_KEY);
    if (raw == null) {
      throw corrupt("no arrowlog header: not a segment", key);
    }
    JsonNode header = JSON.readTree(raw);
    int version = header.path("v").asInt();
    if (version != FORMAT_VERSION && version != STAGED_VERSION) {
      throw corrupt("unsupported segment format version " + header.path("v"), key);
    }
    return header;
  }

  /** A {@code CorruptSegmentError} about the object at {@code key}. */
  public static ArrowLogException corrupt(String message, String key) {
    return Framing.corrupt(message, key);
  }
}
