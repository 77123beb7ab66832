package io.arrowlog.spark;

import java.nio.channels.ReadableByteChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.TypeLayout;
import org.apache.arrow.vector.VectorLoader;
import org.apache.arrow.vector.VectorSchemaRoot;
import org.apache.arrow.vector.ipc.ArrowStreamReader;
import org.apache.arrow.vector.ipc.message.ArrowFieldNode;
import org.apache.arrow.vector.ipc.message.ArrowRecordBatch;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * An IPC stream reader that loads only some top-level columns of a record batch into
 * {@link #selected()}: the others' buffers are never decompressed nor copied. (Arrow's
 * reader loads every column; a query that needs 2 of 10 would pay for 10.)
 */
final class ColumnReader extends ArrowStreamReader {
  private final Set<String> wanted;
  private VectorSchemaRoot selected;

  /** {@code wanted}: the columns to load, or null for all of them. */
  ColumnReader(ReadableByteChannel in, BufferAllocator allocator, Set<String> wanted) {
    super(in, allocator, Codecs.INSTANCE);
    this.wanted = wanted;
  }

  /** The loaded columns (all of them when every one was wanted). */
  VectorSchemaRoot selected() throws java.io.IOException {
    return selected != null ? selected : getVectorSchemaRoot();
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
        int bufferCount = buffers(f);
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
    } catch (java.io.IOException e) {
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

  private static int buffers(Field f) {
    int n = TypeLayout.getTypeBufferCount(f.getType());
    for (Field child : f.getChildren()) {
      n += buffers(child);
    }
    return n;
  }

  @Override
  protected void closeReadSource() throws java.io.IOException {
    if (selected != null) {
      selected.close();
      selected = null;
    }
    super.closeReadSource();
  }
}
