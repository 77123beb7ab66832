package io.arrowlog.spark;

import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.format.SegmentWriter;
import io.arrowlog.spark.format.StagedHeader;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.VarCharVector;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.util.ArrowUtils;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One task attempt of a JVM write: routes each row to its partition (by the key's text, as
 * {@code Producer.send_keyed} and the Python sink route it), fills that partition's Arrow
 * vectors with Spark's own converter, and every {@code rowsPerBatch} rows or {@code budget}
 * bytes encodes them as a staged data object and uploads it under a key of its own. The
 * commit message names the objects; the driver commits them, or nobody does.
 */
final class StagedDataWriter implements DataWriter<InternalRow> {
  private static final byte[] NONE = "None".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] TRUE = "True".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] FALSE = "False".getBytes(StandardCharsets.US_ASCII);
  /** What to do about a partition column from a topic of more partitions (as the Python sink). */
  static final String PARTITION_HINT =
      "a DataFrame read from a topic of more partitions keeps their numbers; drop the column"
          + " to spread the rows (df.drop(\"partition\")), or route them by key (option"
          + " keyColumn)";

  /** The most rows written between two measures of a partition's bytes. */
  private static final long MAX_UNMEASURED = 1024;

  private final StagedWriterFactory job;
  private final int defaultPartition;
  private final BufferAllocator allocator;
  private final Schema schema;
  private final Pending[] pending;
  private final List<StagedCommit.Ref> refs = new ArrayList<>();
  private final List<Path> uploaded = new ArrayList<>();
  private final CRC32C crc = new CRC32C();
  private final PresignedUploads presigned;

  /** One partition's rows not yet uploaded. */
  private static final class Pending {
    final VectorSchemaRoot root;
    final ArrowWriter writer;
    long rows;
    /** The row count at which to measure the vectors' bytes next. */
    long nextCheck = 1;

    Pending(VectorSchemaRoot root) {
      this.root = root;
      this.writer = ArrowWriter.create(root);
    }
  }

  StagedDataWriter(StagedWriterFactory job, int defaultPartition) {
    this.job = job;
    this.defaultPartition = defaultPartition;
    this.allocator =
        ArrowUtils.rootAllocator().newChildAllocator("arrowlog-writer", 0, Long.MAX_VALUE);
    this.schema = readSchema(job.schema);
    this.pending = new Pending[job.partitions];
    this.presigned = job.signer == null ? null : new PresignedUploads(job.signer, job.token);
  }

  private static Schema readSchema(byte[] message) {
    try {
      return MessageSerializer.deserializeSchema(
          new ReadChannel(Channels.newChannel(new ByteArrayInputStream(message))));
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  @Override
  public void write(InternalRow row) {
    if (job.skip) {
      return; // this version was committed already: nothing is written
    }
    int p = route(row);
    Pending at = pending[p];
    if (at == null) {
      at = pending[p] = new Pending(VectorSchemaRoot.create(schema, allocator));
    }
    at.writer.write(row);
    at.rows++;
    if (at.rows >= job.rowsPerBatch) {
      flush(p, at);
    } else if (at.rows >= at.nextCheck) {
      // measuring sets every vector's value count: not for every row, but
      // when half the rows the bytes so far say still fit are written (a row
      // larger than those before is cut off by the halving in upload)
      long size = at.writer.sizeInBytes();
      if (size >= job.budget) {
        flush(p, at);
      } else {
        long fit = (job.budget - size) / Math.max(1, size / at.rows);
        at.nextCheck = at.rows + Math.max(1, Math.min(MAX_UNMEASURED, fit / 2));
      }
    }
  }

  private int route(InternalRow row) {
    int k = job.keyOrdinal;
    if (k < 0) {
      return job.partitionOrdinal < 0 ? defaultPartition : byColumn(row);
    }
    byte[] text;
    if (row.isNullAt(k)) {
      text = NONE;
    } else {
      text =
          switch (job.keyKind) {
            case STRING -> utf8(row.getUTF8String(k));
            case LONG -> ascii(Long.toString(row.getLong(k)));
            case INT -> ascii(Integer.toString(row.getInt(k)));
            case SHORT -> ascii(Short.toString(row.getShort(k)));
            case BYTE -> ascii(Byte.toString(row.getByte(k)));
            case BOOLEAN -> row.getBoolean(k) ? TRUE : FALSE;
          };
    }
    crc.reset();
    crc.update(text);
    return (int) (crc.getValue() % job.partitions);
  }

  /** The partition a read's {@code partition} column gives, as the Python sink checks it. */
  private int byColumn(InternalRow row) {
    int c = job.partitionOrdinal;
    if (row.isNullAt(c)) {
      throw new ArrowLogException(
          "SchemaMismatchError",
          "column " + job.partitionName + " has null(s): every row needs a partition");
    }
    long p =
        switch (job.partitionKind) {
          case LONG -> row.getLong(c);
          case INT -> row.getInt(c);
          case SHORT -> row.getShort(c);
          case BYTE -> row.getByte(c);
          default -> throw new IllegalStateException("partition column of " + job.partitionKind);
        };
    if (p < 0 || p >= job.partitions) {
      throw new ArrowLogException(
          "UnknownTopicOrPartitionError",
          "column partition has value " + p + ", outside 0.." + (job.partitions - 1)
              + " of the topic: " + PARTITION_HINT);
    }
    return (int) p;
  }

  /** A key's bytes, if they are text: Python cannot print any other as send_keyed hashes it. */
  private byte[] utf8(UTF8String key) {
    if (!key.isValid()) {
      throw new ArrowLogException(
          "SchemaMismatchError",
          "keyColumn '" + job.names[job.keyOrdinal] + "' has a value that is not UTF-8 text,"
              + " which Producer.send_keyed cannot route either");
    }
    return key.getBytes();
  }

  private static byte[] ascii(String digits) {
    return digits.getBytes(StandardCharsets.US_ASCII);
  }

  private void flush(int p, Pending at) {
    at.writer.finish();
    checkNulls(at.root);
    for (int i = 0; i < job.nullable.length; i++) {
      checkText(at.root.getVector(i), job.names[i]);
    }
    upload(p, at.root);
    at.writer.reset();
    at.rows = 0;
    at.nextCheck = 1;
  }

  private void checkNulls(VectorSchemaRoot root) {
    for (int i = 0; i < job.nullable.length; i++) {
      if (!job.nullable[i] && root.getVector(i).getNullCount() > 0) {
        throw new ArrowLogException(
            "SchemaMismatchError",
            "column '" + job.names[i] + "' holds nulls, but the topic has it not null");
      }
    }
  }

  /**
   * Refuses strings that are not UTF-8 text (Spark's {@code cast(binary as string)} makes
   * them), in a column or anywhere inside one, as the Python sink refuses them: Arrow's
   * {@code utf8} holds text only. The bytes of all values are one UTF-8 sequence, and no
   * value starts inside a character, if and only if every value is text.
   */
  private static void checkText(FieldVector vector, String column) {
    if (vector instanceof VarCharVector strings) {
      int n = strings.getValueCount();
      if (n == 0) {
        return;
      }
      ArrowBuf offsets = strings.getOffsetBuffer();
      long data = strings.getDataBuffer().memoryAddress();
      int start = offsets.getInt(0);
      int end = offsets.getInt((long) n * VarCharVector.OFFSET_WIDTH);
      boolean text = UTF8String.fromAddress(null, data + start, end - start).isValid();
      for (int i = 0; text && i < n; i++) {
        int at = offsets.getInt((long) i * VarCharVector.OFFSET_WIDTH);
        int next = offsets.getInt((long) (i + 1) * VarCharVector.OFFSET_WIDTH);
        text = at == next || (strings.getDataBuffer().getByte(at) & 0xC0) != 0x80;
      }
      if (!text) {
        throw new ArrowLogException(
            "SchemaMismatchError", "column '" + column + "' holds a string that is not UTF-8 text");
      }
      return;
    }
    for (FieldVector child : vector.getChildrenFromFields()) {
      checkText(child, column);
    }
  }

  /** Encodes and uploads {@code root}'s rows, in halves while a segment would be too large. */
  private void upload(int p, VectorSchemaRoot root) {
    long now = System.currentTimeMillis();
    String appendId = UUID.randomUUID().toString().replace("-", "");
    StagedHeader header =
        new StagedHeader(
            appendId, root.getRowCount(), now, job.producerId, job.epoch, job.transactionalId);
    SegmentWriter.Encoded encoded = SegmentWriter.encode(root, header, job.codec);
    byte[] data = encoded.bytes();
    if (data.length > job.maxBytes) {
      int rows = root.getRowCount();
      if (rows <= 1) {
        throw new ArrowLogException(
            "RecordBatchTooLargeError",
            "a row encodes to " + data.length + " bytes, over the topic's max_batch_bytes ("
                + job.maxBytes + ")");
      }
      try (VectorSchemaRoot first = root.slice(0, rows / 2);
          VectorSchemaRoot second = root.slice(rows / 2, rows - rows / 2)) {
        upload(p, first);
        upload(p, second);
      }
      return;
    }
    if (presigned != null) {
      presigned.put(p, header.at(), data);
    } else {
      put(Path.of(job.directories[p]).resolve(header.at()), data);
    }
    refs.add(
        new StagedCommit.Ref(
            p, header.at(), root.getRowCount(), data.length, now, appendId, encoded.stats()));
  }

  /** Writes {@code data} under {@code target} whole or not at all, as the local store does. */
  private void put(Path target, byte[] data) {
    try {
      Files.createDirectories(target.getParent());
      Path tmp = Files.createTempFile(Path.of(job.temporary), "staged-", ".tmp");
      try {
        try (FileChannel out = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
          ByteBuffer buffer = ByteBuffer.wrap(data);
          while (buffer.hasRemaining()) {
            out.write(buffer);
          }
          if (job.fsync) {
            out.force(true);
          }
        }
        Files.createLink(target, tmp);
      } finally {
        Files.deleteIfExists(tmp);
      }
      uploaded.add(target);
      if (job.fsync) {
        try (FileChannel dir = FileChannel.open(target.getParent(), StandardOpenOption.READ)) {
          dir.force(true);
        }
      }
    } catch (FileAlreadyExistsException e) {
      throw new ArrowLogException("ArrowLogError", "staged object exists already: " + target, e);
    } catch (IOException e) {
      throw new ArrowLogException("StoreError", "cannot write " + target + ": " + e, e);
    }
  }

  @Override
  public WriterCommitMessage commit() {
    for (int p = 0; p < pending.length; p++) {
      if (pending[p] != null && pending[p].rows > 0) {
        flush(p, pending[p]);
      }
    }
    return new StagedCommit(List.copyOf(refs));
  }

  @Override
  public void abort() {
    for (Path path : uploaded) {
      try {
        Files.deleteIfExists(path);
      } catch (IOException e) {
        // an object left behind is an orphan no commit names: vacuum reports it
      }
    }
  }

  @Override
  public void close() {
    for (Pending at : pending) {
      if (at != null) {
        at.root.close();
      }
    }
    allocator.close();
  }
}
