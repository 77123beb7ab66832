package io.arrowlog.spark.format;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.arrow.flatbuf.MessageHeader;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowReader;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.ipc.message.MessageMetadataResult;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * An IPC stream reader over an object's bytes in Arrow memory, that loads only some
 * top-level columns of a record batch into {@link #selected()}.
 *
 * <p>Message bodies are slices of those bytes, never copied: an uncompressed column's
 * vector is the object's own memory, a compressed one is decompressed from it straight
 * into the vector's buffer. (Arrow's stream reader copies each body out of its channel
 * first.) The other columns' buffers are never decompressed: Arrow's reader loads every
 * column, and a query that needs 2 of 10 would pay for 10.
 */
final class ColumnReader extends ArrowReader {
  /** The object's bytes; owned, released when this reader closes. */
  private final ArrowBuf data;

  private final long start;
  private final BytesChannel channel;
  private final ReadChannel in;
  private final Set<String> wanted;
  private VectorSchemaRoot selected;

  /**
   * Reads the stream starting at byte {@code start} of {@code data} (whose reference it
   * takes); {@code wanted}: the columns to load, or null for all of them.
   */
  ColumnReader(ArrowBuf data, long start, BufferAllocator allocator, Set<String> wanted) {
    super(allocator, Codecs.INSTANCE);
    this.data = data;
    this.start = start;
    this.channel =
        new BytesChannel(data.nioBuffer(start, Math.toIntExact(data.capacity() - start)));
    this.in = new ReadChannel(channel);
    this.wanted = wanted;
  }

  /** The loaded columns (all of them when every one was wanted). */
  VectorSchemaRoot selected() throws IOException {
    return selected != null ? selected : getVectorSchemaRoot();
  }

  @Override
  protected Schema readSchema() throws IOException {
    MessageMetadataResult result = MessageSerializer.readMessage(in);
    if (result == null || result.getMessage().headerType() != MessageHeader.Schema) {
      throw new IOException("the stream does not start with a schema");
    }
    return MessageSerializer.deserializeSchema(result);
  }

  @Override
  public boolean loadNextBatch() throws IOException {
    prepareLoadNextBatch();
    while (true) {
      MessageMetadataResult result = MessageSerializer.readMessage(in);
      if (result == null) {
        return false;
      }
      byte type = result.getMessage().headerType();
      if (type != MessageHeader.RecordBatch && type != MessageHeader.DictionaryBatch) {
        throw new IOException("expected a record batch or a dictionary, found message " + type);
      }
      ArrowBuf body = body(result);
      if (type == MessageHeader.DictionaryBatch) {
        loadDictionary(MessageSerializer.deserializeDictionaryBatch(result.getMessage(), body));
      } else {
        loadRecordBatch(MessageSerializer.deserializeRecordBatch(result.getMessage(), body));
        return true;
      }
    }
  }

  /**
   * The message's body, a slice of the object with a reference of its own (deserializing
   * takes it), and the stream moved past it.
   */
  private ArrowBuf body(MessageMetadataResult result) throws IOException {
    long length = result.getMessageBodyLength();
    long at = start + channel.position();
    if (!channel.skip(length)) {
      throw new IOException("a message body of " + length + " bytes runs past the end");
    }
    ArrowBuf body = data.slice(at, length);
    body.getReferenceManager().retain();
    return body;
  }

  /** Bytes of the stream read so far. */
  @Override
  public long bytesRead() {
    return channel.position();
  }

  @Override
  protected void loadRecordBatch(ArrowRecordBatch batch) {
    if (wanted == null || !batch.getVariadicBufferCounts().isEmpty()) {
      super.loadRecordBatch(batch);
      return;
    }
    try {
      Schema schema = getVectorSchemaRoot().getSchema();
      List<Field> fields = new ArrayList<>();
      List<ArrowFieldNode> nodes = new ArrayList<>();
      List<ArrowBuf> buffers = new ArrayList<>();
      int node = 0;
      int buffer = 0;
      for (Field f : schema.getFields()) {
        int nodeCount = nodes(f);
        int bufferCount = ColumnRanges.bufferCount(f);
        if (wanted.contains(f.getName())) {
          fields.add(f);
          nodes.addAll(batch.getNodes().subList(node, node + nodeCount));
          buffers.addAll(batch.getBuffers().subList(buffer, buffer + bufferCount));
        }
        node += nodeCount;
        buffer += bufferCount;
      }
      if (selected != null) {
        selected.close();
      }
      selected = VectorSchemaRoot.create(new Schema(fields, schema.getCustomMetadata()), allocator);
      try (ArrowRecordBatch some =
          new ArrowRecordBatch(
              batch.getLength(), nodes, buffers, batch.getBodyCompression(), true, true)) {
        new VectorLoader(selected, Codecs.INSTANCE).load(some);
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    } finally {
      batch.close();
    }
  }

  private static int nodes(Field f) {
    int n = 1;
    for (Field child : f.getChildren()) {
      n += nodes(child);
    }
    return n;
  }

  @Override
  protected void closeReadSource() {
    if (selected != null) {
      selected.close();
      selected = null;
    }
    data.close();
  }
}
