package io.arrowlog.spark.format;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;
import java.util.zip.CRC32C;
import org.apache.arrow.flatbuf.Buffer;
import org.apache.arrow.flatbuf.Message;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.flatbuf.RecordBatch;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.message.ArrowBlock;
import org.apache.arrow.vector.types.pojo.Field;

/**
 * The writer's side of a segment's column table (arrowlog/format/segment/column_table.py
 * holds the format; {@link ColumnRanges} reads it): placeholder dashes of a width known
 * from the number of columns go into the schema metadata, and once the file is encoded
 * the table is written over them in both copies of the schema, from the layout of the
 * record batch just written. Filled before the whole-file CRC is taken; the frame's CRC
 * is taken with the table and the file CRC still dashes.
 */
final class ColumnTable {
  static final String KEY = "arrowlog.columns";
  /** Batches of at least this many bytes in memory get a table (column_table.py). */
  static final long MIN_BYTES = 256 * 1024;

  private ColumnTable() {}

  /** Whether a segment of {@code root} gets a column table, as Python decides. */
  static boolean wanted(VectorSchemaRoot root) {
    long bytes = 0;
    for (FieldVector v : root.getFieldVectors()) {
      bytes += v.getBufferSize();
    }
    return !root.getFieldVectors().isEmpty() && bytes >= MIN_BYTES;
  }

  /** The metadata value the table is written over. */
  static String placeholder(int columns) {
    return "arrowlog-columns:" + "-".repeat(ColumnRanges.width(columns));
  }

  /**
   * Writes the table over its placeholders in {@code data[0, size)}, the one-batch IPC
   * file whose record batch is at {@code block}. Left dashes (readers then fetch the
   * object whole) where the batch's buffers do not map onto the fields as the readers
   * count them, or the placeholder is not found once in each copy of the schema, as
   * Python leaves it.
   */
  static void fill(byte[] data, int size, List<Field> fields, ArrowBlock block) {
    int metaStart = Math.toIntExact(block.getOffset()) + 8;
    int metaLength = block.getMetadataLength() - 8;
    ByteBuffer meta = ByteBuffer.wrap(data, metaStart, metaLength).slice();
    Message message = Message.getRootAsMessage(meta.order(ByteOrder.LITTLE_ENDIAN));
    if (message.headerType() != MessageHeader.RecordBatch) {
      return;
    }
    RecordBatch batch = (RecordBatch) message.header(new RecordBatch());
    int total = 0;
    for (Field f : fields) {
      total += ColumnRanges.bufferCount(f);
    }
    if (total != batch.buffersLength()) {
      return;
    }
    long bodyStart = block.getOffset() + block.getMetadataLength();
    long bodyEnd = bodyStart + block.getBodyLength();
    StringBuilder text = new StringBuilder(ColumnRanges.width(fields.size()));
    text.append(entry(bodyStart, bodyEnd, crc(data, 0, bodyStart)));
    int buffer = 0;
    for (Field f : fields) {
      int count = ColumnRanges.bufferCount(f);
      long lo = bodyStart;
      long hi = bodyStart;
      if (count > 0) {
        Buffer first = batch.buffers(buffer);
        Buffer last = batch.buffers(buffer + count - 1);
        lo = bodyStart + first.offset();
        hi = Math.max(lo, bodyStart + last.offset() + last.length());
      }
      text.append(entry(lo, hi, crc(data, lo, hi)));
      buffer += count;
    }
    text.append(String.format(Locale.ROOT, "%08x", crc(text)));
    byte[] table = text.toString().getBytes(StandardCharsets.US_ASCII);
    int schemaEnd = 16 + Framing.le32(data, 12);
    int footerStart = size - 10 - Framing.le32(data, size - 10);
    int[] slots = {
      ColumnRanges.tableSlot(data, 16, schemaEnd),
      ColumnRanges.tableSlot(data, footerStart, size - 10)
    };
    if (slots[0] < 0 || slots[1] < 0) {
      return; // the tag also in a name of the schema: left dashes, as Python leaves it
    }
    for (int slot : slots) {
      System.arraycopy(table, 0, data, slot, table.length);
    }
  }

  private static String entry(long start, long end, long crc) {
    return String.format(Locale.ROOT, "%012x%012x%08x", start, end, crc);
  }

  private static long crc(byte[] data, long from, long to) {
    CRC32C crc = new CRC32C();
    crc.update(data, (int) from, (int) (to - from));
    return crc.getValue();
  }

  private static long crc(CharSequence text) {
    CRC32C crc = new CRC32C();
    crc.update(text.toString().getBytes(StandardCharsets.US_ASCII));
    return crc.getValue();
  }
}
