package io.arrowlog.spark.format;

import io.arrowlog.spark.errors.ArrowLogException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.WritableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.zip.CRC32C;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.dictionary.DictionaryProvider;
import org.apache.arrow.vector.ipc.ArrowFileWriter;
import org.apache.arrow.vector.ipc.message.ArrowBlock;
import org.apache.arrow.vector.ipc.message.IpcOption;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * Staged data objects encoded on the JVM, as the Python library encodes them
 * (arrowlog/format/segment/codec.py, {@code encode}): an Arrow IPC file of one record
 * batch whose schema metadata carries the header and its CRC32C, and the whole-file
 * CRC32C in both copies of the schema (the schema message and the footer's), taken with
 * both reading dashes and then written over them. Beside the header: the batch's column
 * statistics ({@link ColumnStats}) and, for a large batch, a column table ({@link
 * ColumnTable}). No column is dictionary-encoded.
 */
public final class SegmentWriter {
  /** The IPC buffer compression of a topic that the JVM writes. */
  public enum Codec {
    NONE,
    ZSTD
  }

  static final String HEADER_CRC_KEY = "arrowlog.header_crc32c";
  static final String CRC_KEY = "arrowlog.crc32c";
  /** pyarrow's default ZSTD level, which the Python writer compresses with. */
  private static final int ZSTD_LEVEL = 1;

  private SegmentWriter() {}

  /**
   * The bytes of one staged data object holding every row of {@code root} (at least one),
   * with {@code header} as given. {@code root}'s schema is the topic's; its vectors are
   * read, not changed nor closed.
   *
   * @throws ArrowLogException {@code InvalidBatchError}: the root holds no rows, or other
   *     than the header's count; {@code InvalidConfigError}: the schema holds arrowlog's
   *     checksum tag or keys; {@code RecordBatchTooLargeError}: past 2 GiB encoded.
   */
  public static byte[] staged(VectorSchemaRoot root, StagedHeader header, Codec codec) {
    return encode(root, header, codec).bytes();
  }

  /**
   * A staged data object's bytes, and the column statistics written into it: JSON as a
   * commit's ref carries them ({@code {"column":[min,max,nulls],...}}, arrowlog's {@code
   * Ref.stats}; null when no column has any), so that the driver need not read them back
   * from the object for the checkpoint's pruning.
   */
  public record Encoded(byte[] bytes, String stats) {}

  /** {@link #staged}, with the statistics it wrote (same errors). */
  public static Encoded encode(VectorSchemaRoot root, StagedHeader header, Codec codec) {
    int rows = root.getRowCount();
    if (rows < 1 || rows != header.recordCount()) {
      throw new ArrowLogException(
          "InvalidBatchError",
          "a staged data object of " + header.recordCount() + " records from a batch of "
              + rows + " rows");
    }
    boolean tabled = ColumnTable.wanted(root);
    String stats = ColumnStats.json(root);
    Map<String, String> metadata = metadata(root.getSchema(), header, stats);
    if (tabled) {
      metadata.put(ColumnTable.KEY, ColumnTable.placeholder(root.getFieldVectors().size()));
    }
    Sink sink = new Sink(capacity(root, metadata));
    ArrowBlock block = write(root, metadata, codec, sink);
    byte[] data = sink.buffer;
    int size = sink.size;
    int[] slots = crcSlots(data, size);
    if (tabled) {
      ColumnTable.fill(data, size, root.getSchema().getFields(), block);
    }
    // both slots read dashes now: the CRC of the bytes as they are is the file's
    CRC32C crc = new CRC32C();
    crc.update(data, 0, size);
    byte[] value = hex8(crc.getValue());
    for (int slot : slots) {
      System.arraycopy(value, 0, data, slot, 8);
    }
    return new Encoded(size == data.length ? data : Arrays.copyOf(data, size), stats);
  }

  /**
   * The schema metadata of the object: the topic's own entries, then arrowlog's (the
   * header, the column statistics, the file CRC's placeholder).
   */
  private static Map<String, String> metadata(
      Schema schema, StagedHeader header, String stats) {
    Map<String, String> metadata = new LinkedHashMap<>();
    Map<String, String> own = schema.getCustomMetadata();
    if (own != null) {
      for (Map.Entry<String, String> e : own.entrySet()) {
        if (e.getKey().startsWith("arrowlog.")) {
          throw new ArrowLogException(
              "InvalidConfigError",
              "schema metadata key '" + e.getKey() + "' is reserved: arrowlog keeps its "
                  + "segment header under 'arrowlog.'");
        }
        metadata.put(e.getKey(), e.getValue());
      }
    }
    String json = header.toJson();
    metadata.put(SegmentFile.HEADER_KEY, json);
    metadata.put(HEADER_CRC_KEY, crc32c(json));
    if (stats != null) {
      metadata.put(ColumnStats.KEY, stats);
      metadata.put(ColumnStats.CRC_KEY, crc32c(stats));
    }
    metadata.put(CRC_KEY, "arrowlog-crc32c:--------");
    return metadata;
  }

  /**
   * The IPC file of {@code root} with {@code metadata} on its schema, into {@code sink};
   * where its record batch lies.
   */
  private static ArrowBlock write(
      VectorSchemaRoot root, Map<String, String> metadata, Codec codec, Sink sink) {
    Schema schema = new Schema(root.getSchema().getFields(), metadata);
    // the caller's vectors under the schema with metadata; not closed here (not ours)
    VectorSchemaRoot framed =
        new VectorSchemaRoot(schema, root.getFieldVectors(), root.getRowCount());
    CompressionUtil.CodecType type =
        codec == Codec.ZSTD
            ? CompressionUtil.CodecType.ZSTD
            : CompressionUtil.CodecType.NO_COMPRESSION;
    try (ArrowFileWriter writer =
        new ArrowFileWriter(
            framed,
            new DictionaryProvider.MapDictionaryProvider(),
            sink,
            null,
            IpcOption.DEFAULT,
            Codecs.INSTANCE,
            type,
            Optional.of(ZSTD_LEVEL))) {
      writer.start();
      writer.writeBatch();
      writer.end();
      return writer.getRecordBlocks().get(0);
    } catch (IOException e) {
      throw new IllegalStateException("writing into memory failed", e); // Sink never throws
    }
  }

  /**
   * Where the whole-file CRC's 8 characters sit: in the schema message, and in the
   * footer's copy of the schema (exactly one tagged value in each).
   */
  private static int[] crcSlots(byte[] data, int size) {
    int schemaEnd = 16 + Framing.le32(data, 12);
    int footerStart = size - 10 - Framing.le32(data, size - 10);
    try {
      return new int[] {
        Framing.slot(data, 16, schemaEnd, "<new segment>"),
        Framing.slot(data, footerStart, size - 10, "<new segment>")
      };
    } catch (ArrowLogException e) {
      throw new ArrowLogException(
          "InvalidConfigError",
          "the schema contains 'arrowlog-crc32c:', arrowlog's checksum tag (a field name, "
              + "metadata or a time zone)");
    }
  }

  /**
   * More room than the object takes, so that the sink never grows: every buffer stored
   * plain or compressed (Arrow stores a buffer that does not shrink plain), each with its
   * length, padding and place in the batch's metadata, and the schema written twice.
   */
  private static int capacity(VectorSchemaRoot root, Map<String, String> metadata) {
    long bytes = 0;
    long buffers = 0;
    for (FieldVector v : root.getFieldVectors()) {
      bytes += v.getBufferSize();
      buffers += ColumnRanges.bufferCount(v.getField());
    }
    long schema = 512;
    for (Map.Entry<String, String> e : metadata.entrySet()) {
      schema += 3L * (e.getKey().length() + e.getValue().length()) + 16;
    }
    for (Field f : root.getSchema().getFields()) {
      schema += described(f);
    }
    long room = bytes + 48 * buffers + 2 * schema + 1024;
    return (int) Math.min(room, Integer.MAX_VALUE - 64);
  }

  /** Generous bytes for a field's description in a schema, its children's included. */
  private static long described(Field f) {
    long n = 128 + 3L * f.getName().length();
    if (f.getMetadata() != null) {
      for (Map.Entry<String, String> e : f.getMetadata().entrySet()) {
        n += 3L * (e.getKey().length() + e.getValue().length()) + 16;
      }
    }
    for (Field child : f.getChildren()) {
      n += described(child);
    }
    return n;
  }

  static String crc32c(String text) {
    CRC32C crc = new CRC32C();
    crc.update(text.getBytes(StandardCharsets.UTF_8));
    return new String(hex8(crc.getValue()), StandardCharsets.US_ASCII);
  }

  /** 8 lowercase hex digits. */
  static byte[] hex8(long value) {
    byte[] out = new byte[8];
    for (int i = 7; i >= 0; i--) {
      out[i] = (byte) "0123456789abcdef".charAt((int) (value & 0xf));
      value >>>= 4;
    }
    return out;
  }

  /** A growable byte array that Arrow's writer writes into. */
  private static final class Sink implements WritableByteChannel {
    byte[] buffer;
    int size;
    private boolean open = true;

    Sink(int capacity) {
      buffer = new byte[Math.max(capacity, 1024)];
    }

    @Override
    public int write(ByteBuffer src) {
      int n = src.remaining();
      if ((long) size + n > Integer.MAX_VALUE - 64) {
        throw new ArrowLogException(
            "RecordBatchTooLargeError",
            "the batch encodes to more than 2 GiB, more than one object holds; split it");
      }
      if (size + n > buffer.length) {
        long grown = Math.max((long) buffer.length * 2, (long) size + n);
        buffer = Arrays.copyOf(buffer, (int) Math.min(grown, Integer.MAX_VALUE - 64));
      }
      src.get(buffer, size, n);
      size += n;
      return n;
    }

    @Override
    public boolean isOpen() {
      return open;
    }

    @Override
    public void close() {
      open = false;
    }
  }
}
