package io.arrowlog.spark.format;

import io.arrowlog.spark.errors.ArrowLogException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.zip.CRC32C;
import org.apache.arrow.flatbuf.Buffer;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.vector.TypeLayout;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Some columns of a large segment, by ranged reads: its head (schema and column table),
 * then the rest of its frame and the wanted columns' bytes, every byte checked against
 * the column table's CRCs before Arrow parses it. The Python library reads the same way
 * (arrowlog/segment/column_table.py and projection.py hold the format).
 */
public final class ColumnRanges {
  /** Smaller segments are read whole: two round trips cost more than their bytes. */
  static final long MIN_BYTES = 1024 * 1024;

  private static final int HEAD_BYTES = 16 * 1024;
  /** Columns closer than this are read in one request. */
  private static final long GAP = 256 * 1024;

  static final byte[] TAG = "arrowlog-columns:".getBytes(StandardCharsets.US_ASCII);
  private static final int OFFSET = 12;
  private static final ExecutorService POOL =
      Executors.newFixedThreadPool(
          8,
          r -> {
            Thread t = new Thread(r, "arrowlog-range");
            t.setDaemon(true);
            return t;
          });

  private ColumnRanges() {}

  /** A segment's column table: absolute byte ranges, each with its CRC32C. */
  record Table(long bodyStart, long bodyEnd, long frameCrc, long[][] columns) {}

  /**
   * The segment's bytes up to the end of its record batch, with the frame and the
   * {@code wanted} columns filled in and checked (the rest left zero); null when the
   * segment is better read whole (small, every column wanted, no usable column table).
   */
  public static byte[] fetch(Segment segment, Set<String> wanted) {
    if (segment.size() < MIN_BYTES) {
      return null;
    }
    String key = segment.key();
    byte[] head = Fetch.range(segment, 0, Math.min(segment.size(), HEAD_BYTES));
    int schemaLength = head.length >= 16 ? Framing.le32(head, 12) : 0;
    if (head.length < 16 || Framing.le32(head, 8) != -1 || schemaLength <= 0) {
      throw SegmentFile.corrupt("not a segment's head (bad IPC framing)", key);
    }
    if (16L + schemaLength > head.length) {
      return null; // a schema larger than the head: rare enough to read whole
    }
    Schema schema;
    try {
      schema =
          MessageSerializer.deserializeSchema(
              new ReadChannel(new BytesChannel(head, 8, 8 + schemaLength)));
    } catch (IOException | RuntimeException e) {
      throw SegmentFile.corrupt("unreadable schema: " + e, key);
    }
    List<Field> fields = schema.getFields();
    Map<String, String> metadata = schema.getCustomMetadata();
    String raw = metadata == null ? null : metadata.get("arrowlog.columns");
    Table table = raw == null ? null : parse(raw, fields.size());
    if (table == null || table.bodyEnd() > segment.size() || hasViews(fields)) {
      return null;
    }
    List<Integer> picked = new ArrayList<>();
    for (int i = 0; i < fields.size(); i++) {
      if (wanted.contains(fields.get(i).getName())) {
        picked.add(i);
      }
    }
    if (picked.size() == fields.size()) {
      return null;
    }
    byte[] data = new byte[Math.toIntExact(table.bodyEnd())];
    int headEnd = (int) Math.min(head.length, table.bodyStart());
    System.arraycopy(head, 0, data, 0, headEnd);
    List<long[]> ranges = new ArrayList<>();
    if (headEnd < table.bodyStart()) {
      ranges.add(new long[] {headEnd, table.bodyStart()});
    }
    List<long[]> columns = new ArrayList<>();
    for (int i : picked) {
      columns.add(table.columns()[i]);
    }
    ranges.addAll(coalesce(columns));
    fill(segment, data, ranges);
    checkFrame(data, schemaLength, table, fields.size(), key);
    checkPlacement(data, table, fields, picked, key);
    for (int i : picked) {
      long[] c = table.columns()[i];
      CRC32C crc = new CRC32C();
      crc.update(data, (int) c[0], (int) (c[1] - c[0]));
      if (crc.getValue() != c[2]) {
        throw SegmentFile.corrupt(
            "checksum mismatch in column '" + fields.get(i).getName() + "'", key);
      }
    }
    return data;
  }

  /** GETs the ranges in parallel into {@code data}. */
  private static void fill(Segment segment, byte[] data, List<long[]> ranges) {
    List<Future<byte[]>> pending = new ArrayList<>();
    for (long[] r : ranges) {
      pending.add(POOL.submit(() -> Fetch.range(segment, r[0], r[1])));
    }
    for (int i = 0; i < ranges.size(); i++) {
      long[] r = ranges.get(i);
      byte[] got;
      try {
        got = pending.get(i).get();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ArrowLogException("StoreError", segment.key() + ": interrupted", e);
      } catch (ExecutionException e) {
        if (e.getCause() instanceof ArrowLogException a) {
          throw a;
        }
        throw new ArrowLogException("StoreError", segment.key() + ": " + e.getCause(), e);
      }
      if (got.length != r[1] - r[0]) {
        throw SegmentFile.corrupt("short range read at " + r[0] + ": " + got.length + " bytes", segment.key());
      }
      System.arraycopy(got, 0, data, (int) r[0], got.length);
    }
  }

  /**
   * The CRC of everything before the body, with the whole-file checksum and the column
   * table blanked in the schema message as the writer had them when it took it.
   */
  private static void checkFrame(byte[] data, int schemaLength, Table table, int n, String key) {
    int schemaEnd = 16 + schemaLength;
    int crc = Framing.slot(data, 16, schemaEnd, key);
    int slot = tableSlot(data, 16, schemaEnd);
    int width = width(n);
    if (slot < 0 || slot + width > schemaEnd) {
      throw SegmentFile.corrupt("checksum or column table missing", key);
    }
    System.arraycopy(Framing.PLACEHOLDER, 0, data, crc, 8);
    Arrays.fill(data, slot, slot + width, (byte) '-');
    CRC32C frame = new CRC32C();
    frame.update(data, 0, (int) table.bodyStart());
    if (frame.getValue() != table.frameCrc()) {
      throw SegmentFile.corrupt("checksum mismatch outside the columns", key);
    }
  }

  /**
   * Every buffer Arrow will read for the picked columns, as the record batch's own (checked)
   * metadata places them, lies within the column's range in the table: a table that says
   * otherwise would have Arrow read bytes never fetched nor checked.
   */
  private static void checkPlacement(
      byte[] data, Table table, List<Field> fields, List<Integer> picked, String key) {
    RecordBatch batch = lastBatch(data, table.bodyStart());
    if (batch == null) {
      throw SegmentFile.corrupt("record batch metadata does not match the schema", key);
    }
    int total = 0;
    for (Field f : fields) {
      total += bufferCount(f);
    }
    if (total != batch.buffersLength()) {
      throw SegmentFile.corrupt("record batch metadata does not match the schema", key);
    }
    int buffer = 0;
    for (int i = 0; i < fields.size(); i++) {
      int count = bufferCount(fields.get(i));
      if (picked.contains(i)) {
        long[] range = table.columns()[i];
        for (int j = buffer; j < buffer + count; j++) {
          Buffer b = batch.buffers(j);
          long start = table.bodyStart() + b.offset();
          if (b.length() > 0 && (start < range[0] || start + b.length() > range[1])) {
            throw SegmentFile.corrupt(
                "column '" + fields.get(i).getName() + "' lies outside its range in the column table",
                key);
          }
        }
      }
      buffer += count;
    }
  }

  /** The metadata of the frame's last message, whose body starts at {@code bodyStart}. */
  private static RecordBatch lastBatch(byte[] data, long bodyStart) {
    long at = 8; // past the file's magic: the stream's messages
    while (at + 8 <= bodyStart) {
      int length = Framing.le32(data, (int) at + 4);
      long end = at + 8 + length;
      if (Framing.le32(data, (int) at) != -1 || length <= 0 || end > bodyStart) {
        return null;
      }
      ByteBuffer meta = ByteBuffer.wrap(data, (int) at + 8, length).slice();
      Message message = Message.getRootAsMessage(meta.order(ByteOrder.LITTLE_ENDIAN));
      if (end == bodyStart) {
        return message.headerType() == MessageHeader.RecordBatch
            ? (RecordBatch) message.header(new RecordBatch())
            : null;
      }
      at = end + message.bodyLength();
    }
    return null;
  }

  /**
   * How many body buffers a field has in a record batch, its children's included (a
   * dictionary-encoded field: those of its indices).
   */
  static int bufferCount(Field f) {
    if (f.getDictionary() != null) {
      return TypeLayout.getTypeBufferCount(f.getDictionary().getIndexType());
    }
    int n = TypeLayout.getTypeBufferCount(f.getType());
    for (Field child : f.getChildren()) {
      n += bufferCount(child);
    }
    return n;
  }

  /** Where the table's text starts in {@code [lo, hi)}: after its one tag, or -1. */
  static int tableSlot(byte[] data, int lo, int hi) {
    int found = -1;
    for (int i = lo; i + TAG.length <= hi; i++) {
      if (data[i] == TAG[0] && Arrays.equals(data, i, i + TAG.length, TAG, 0, TAG.length)) {
        if (found >= 0) {
          return -1;
        }
        found = i + TAG.length;
      }
    }
    return found;
  }

  /** The characters of a column table of {@code columns} columns after its tag. */
  static int width(int columns) {
    return (2 * OFFSET + 8) * (columns + 1) + 8;
  }

  /** The table from its metadata value; null if never filled in or failing its CRC. */
  static Table parse(String value, int n) {
    byte[] raw = value.getBytes(StandardCharsets.US_ASCII);
    if (!value.startsWith("arrowlog-columns:") || raw.length != TAG.length + width(n)) {
      return null;
    }
    String text = value.substring(TAG.length);
    if (text.startsWith("-")) {
      return null;
    }
    String body = text.substring(0, text.length() - 8);
    CRC32C crc = new CRC32C();
    crc.update(body.getBytes(StandardCharsets.US_ASCII));
    try {
      if (Long.parseLong(text.substring(text.length() - 8), 16) != crc.getValue()) {
        return null;
      }
      long[] numbers = new long[3 * (n + 1)];
      int at = 0;
      for (int i = 0; i < numbers.length; i++) {
        int w = i % 3 == 2 ? 8 : OFFSET;
        numbers[i] = Long.parseLong(body.substring(at, at + w), 16);
        at += w;
      }
      long start = numbers[0];
      long end = numbers[1];
      long[][] columns = new long[n][];
      for (int i = 0; i < n; i++) {
        long a = numbers[3 + 3 * i];
        long b = numbers[4 + 3 * i];
        if (!(start <= a && a <= b && b <= end)) {
          return null;
        }
        columns[i] = new long[] {a, b, numbers[5 + 3 * i]};
      }
      return start <= end ? new Table(start, end, numbers[2], columns) : null;
    } catch (NumberFormatException e) {
      return null;
    }
  }

  /** Sorted, merged ranges: neighbours closer than {@link #GAP} in one request. */
  static List<long[]> coalesce(List<long[]> ranges) {
    List<long[]> sorted = new ArrayList<>();
    for (long[] r : ranges) {
      if (r[1] > r[0]) {
        sorted.add(new long[] {r[0], r[1]});
      }
    }
    sorted.sort((x, y) -> Long.compare(x[0], y[0]));
    List<long[]> merged = new ArrayList<>();
    for (long[] r : sorted) {
      long[] last = merged.isEmpty() ? null : merged.get(merged.size() - 1);
      if (last != null && r[0] - last[1] <= GAP) {
        last[1] = Math.max(last[1], r[1]);
      } else {
        merged.add(r);
      }
    }
    return merged;
  }

  /** View types carry buffer counts that depend on the data: such segments are read whole. */
  private static boolean hasViews(List<Field> fields) {
    for (Field f : fields) {
      if (f.getType().getTypeID().name().contains("View") || hasViews(f.getChildren())) {
        return true;
      }
    }
    return false;
  }
}
