package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * One segment checked and opened: an Arrow IPC file of one record batch whose whole-file
 * CRC32C sits, as 8 hex digits after a tag, in the schema message and in the footer
 * (arrowlog/segment/framing.py; the CRC is computed with both written as dashes).
 */
final class SegmentFile implements AutoCloseable {
  private static final byte[] MAGIC = "ARROW1".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] TAG = "arrowlog-crc32c:".getBytes(StandardCharsets.US_ASCII);
  static final byte[] PLACEHOLDER = "--------".getBytes(StandardCharsets.US_ASCII);
  private static final ObjectMapper JSON = new ObjectMapper();

  final String key;
  final ColumnReader reader;
  /** The columns read (those wanted). */
  final VectorSchemaRoot root;
  final long timestampMs;
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
  long[] rows(SegmentTask.Segment segment) {
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
  static SegmentFile open(
      ArrowBuf data,
      boolean whole,
      SegmentTask.Segment segment,
      BufferAllocator allocator,
      Set<String> wanted,
      Schema topic) {
    String key = segment.key();
    ColumnReader reader;
    try {
      if (whole) {
        verify(data, key);
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
      long base = header.path("base_offset").asLong(-1);
      long count = header.path("record_count").asLong(-1);
      if (!header.path("control_type").isNull()) {
        throw corrupt("a transaction marker where the plan has records", key);
      }
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

  /** A compacted object's table, checked by its CRC32C and against the plan. */
  private static Map<Long, long[]> runs(
      Map<String, String> metadata, SegmentTask.Segment segment, long count, String key)
      throws IOException {
    String raw = metadata == null ? null : metadata.get("arrowlog.compacted");
    String stored = metadata == null ? null : metadata.get("arrowlog.compacted_crc32c");
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
    String raw = metadata == null ? null : metadata.get("arrowlog.header");
    if (raw == null) {
      throw corrupt("no arrowlog header: not a segment", key);
    }
    JsonNode header = JSON.readTree(raw);
    if (header.path("v").asInt() != 1) {
      throw corrupt("unsupported segment format version " + header.path("v"), key);
    }
    return header;
  }

  /**
   * The framing, and the CRC over the whole file (in Arrow memory: the CRC reads it
   * there; only the schema message and the footer, where the checksum fields are, are
   * copied out to be searched).
   */
  static void verify(ArrowBuf data, String key) {
    long size = data.capacity();
    if (size < 26 || size > Integer.MAX_VALUE) {
      throw corrupt("not an Arrow IPC file (" + size + " bytes; truncated?)", key);
    }
    int n = (int) size;
    byte[] head = bytes(data, 0, 16);
    byte[] tail = bytes(data, n - 10, n);
    if (!Arrays.equals(head, 0, 6, MAGIC, 0, 6) || !Arrays.equals(tail, 4, 10, MAGIC, 0, 6)) {
      throw corrupt("not an Arrow IPC file (" + n + " bytes; truncated?)", key);
    }
    int continuation = le32(head, 8);
    int schemaLength = le32(head, 12);
    int footerLength = le32(tail, 0);
    if (continuation != -1 || schemaLength <= 0 || footerLength <= 0) {
      throw corrupt("bad IPC framing", key);
    }
    long schemaEnd = 16L + schemaLength;
    long footerStart = (long) n - 10 - footerLength;
    if (!(schemaEnd <= footerStart && footerStart < n - 10)) {
      throw corrupt("bad IPC framing (overlapping regions)", key);
    }
    byte[] schema = bytes(data, 16, (int) schemaEnd);
    byte[] footer = bytes(data, (int) footerStart, n - 10);
    int a = 16 + slot(schema, 0, schema.length, key);
    int b = (int) footerStart + slot(footer, 0, footer.length, key);
    String stored = new String(schema, a - 16, 8, StandardCharsets.US_ASCII);
    if (!stored.equals(new String(footer, b - (int) footerStart, 8, StandardCharsets.US_ASCII))) {
      throw corrupt("checksum fields disagree", key);
    }
    CRC32C crc = new CRC32C();
    crc.update(data.nioBuffer(0, a));
    crc.update(PLACEHOLDER);
    crc.update(data.nioBuffer(a + 8, b - a - 8));
    crc.update(PLACEHOLDER);
    crc.update(data.nioBuffer(b + 8, n - b - 8));
    if (stored.equals("--------") || !stored.equals(String.format("%08x", crc.getValue()))) {
      throw corrupt("checksum mismatch", key);
    }
  }

  /** Bytes {@code [from, to)} of {@code data}, copied out. */
  private static byte[] bytes(ArrowBuf data, int from, int to) {
    byte[] out = new byte[to - from];
    data.getBytes(from, out);
    return out;
  }

  /** Where the CRC's 8 characters sit in {@code [lo, hi)}: exactly one tagged value. */
  static int slot(byte[] data, int lo, int hi, String key) {
    int found = -1;
    int count = 0;
    for (int i = lo; i + TAG.length + 8 <= hi; i++) {
      if (data[i] == TAG[0]
          && Arrays.equals(data, i, i + TAG.length, TAG, 0, TAG.length)
          && value(data, i + TAG.length)) {
        found = i + TAG.length;
        count++;
      }
    }
    if (count != 1) {
      throw corrupt("checksum field missing or repeated", key);
    }
    return found;
  }

  private static boolean value(byte[] data, int at) {
    boolean dashes = true;
    boolean hex = true;
    for (int i = at; i < at + 8; i++) {
      byte c = data[i];
      dashes &= c == '-';
      hex &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    }
    return dashes || hex;
  }

  static int le32(byte[] b, int at) {
    return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16
        | (b[at + 3] & 0xff) << 24;
  }

  static ArrowLogException corrupt(String message, String key) {
    return new ArrowLogException("CorruptSegmentError", key + ": " + message);
  }
}
