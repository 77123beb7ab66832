package io.arrowlog.spark;

import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.format.ColumnRanges;
import io.arrowlog.spark.format.Fetch;
import io.arrowlog.spark.format.Segment;
import io.arrowlog.spark.format.SegmentFile;
import io.arrowlog.spark.format.TopicSchema;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.SegmentTask;
import io.arrowlog.spark.vectors.FixedWidthColumnVector;
import io.arrowlog.spark.vectors.OffsetColumnVector;
import io.arrowlog.spark.vectors.Vectors;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
import org.apache.arrow.vector.FieldVector;
import org.apache.arrow.vector.ValueVector;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.dictionary.DictionaryEncoder;
import org.apache.arrow.vector.types.pojo.DictionaryEncoding;
import org.apache.arrow.vector.types.pojo.Schema;
import org.apache.arrow.vector.util.TransferPair;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ArrowColumnVector;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Reads one task: each segment becomes one batch of Arrow vectors (the record batch's
 * own buffers, no row-by-row work), with the metadata columns generated per segment.
 */
final class SegmentReader implements PartitionReader<ColumnarBatch> {
  private final SegmentTask task;
  private final StructType schema;
  private final MetadataColumns meta;
  private final BufferAllocator allocator = new RootAllocator();
  private int next;
  private ColumnarBatch current;
  private SegmentFile file;
  private final List<ValueVector> owned = new ArrayList<>();

  /** Dictionary-encoded columns of the open file, decoded (once per file). */
  private final Map<String, ValueVector> decoded = new HashMap<>();

  /** The topic columns to load: those of the read schema. */
  private final Set<String> wanted = new HashSet<>();

  /** What every segment must hold (null: a plan from before it was sent). */
  private final Schema topic;

  /** How to find a segment removed since the plan. */
  private final SegmentReaderFactory.Relocation relocation;

  SegmentReader(
      SegmentTask task,
      StructType schema,
      MetadataColumns meta,
      SegmentReaderFactory.Relocation relocation) {
    this.task = task;
    this.relocation = relocation;
    this.schema = schema;
    this.meta = meta;
    this.topic = task.schema() == null ? null : TopicSchema.parse(task.schema());
    for (StructField f : schema.fields()) {
      if (!meta.contains(f.name())) {
        wanted.add(f.name());
      }
    }
  }

  @Override
  public boolean next() throws IOException {
    release();
    Segment segment;
    long[] at;
    do {
      if (next >= task.segments().length) {
        return false;
      }
      segment = task.segments()[next++];
      try {
        at = rowsOf(segment);
      } catch (ArrowLogException e) {
        // removed since the plan, once compacted: read it from its compacted object, as
        // the Python reader does (a plan outlives compaction and vacuum: a query run again)
        if (!e.type().equals("SegmentNotFoundError") || segment.compacted()) {
          throw e;
        }
        Segment moved = relocation.find(segment);
        if (moved == null) {
          throw e;
        }
        segment = moved;
        at = rowsOf(segment);
      }
    } while (at == null);
    return read(segment, at);
  }

  /** Where the segment's records lie in its (open, or now opened) file; null: none. */
  private long[] rowsOf(Segment segment) throws IOException {
    // the segments of one compacted object follow each other in a task: one fetch
    if (file == null || !segment.compacted() || !file.key().equals(segment.key())) {
      closeFile();
      // a few columns of a large segment: only their bytes; otherwise the whole object
      // (every column wanted: no head to read first)
      boolean all = topic != null && wanted.size() >= topic.getFields().size();
      byte[] some = all ? null : ColumnRanges.fetch(segment, wanted);
      ArrowBuf data =
          some != null ? Fetch.offHeap(some, allocator) : Fetch.object(segment, allocator);
      file = SegmentFile.open(data, some == null, segment, allocator, wanted, topic);
    }
    return file.rows(segment);
  }

  private boolean read(Segment segment, long[] at) throws IOException {
    int from = Math.toIntExact(at[0] + segment.lo() - segment.base());
    int rows = Math.toIntExact(segment.hi() - segment.lo());
    boolean whole = from == 0 && rows == file.root().getRowCount();
    StructField[] fields = schema.fields();
    ColumnVector[] columns = new ColumnVector[fields.length];
    for (int i = 0; i < fields.length; i++) {
      String name = fields[i].name();
      if (name.equals(meta.topic())) {
        ConstantColumnVector c = new ConstantColumnVector(rows, DataTypes.StringType);
        c.setUtf8String(UTF8String.fromString(task.topic()));
        columns[i] = c;
      } else if (name.equals(meta.partition())) {
        ConstantColumnVector c = new ConstantColumnVector(rows, DataTypes.IntegerType);
        c.setInt(task.partition());
        columns[i] = c;
      } else if (name.equals(meta.offset())) {
        columns[i] = new OffsetColumnVector(segment.lo());
      } else if (name.equals(meta.timestamp())) {
        ConstantColumnVector c = new ConstantColumnVector(rows, DataTypes.TimestampType);
        c.setLong(Math.multiplyExact(at[1], 1000L));
        columns[i] = c;
      } else {
        ValueVector v = column(name, segment);
        if (!whole) {
          TransferPair pair = v.getTransferPair(allocator);
          pair.splitAndTransfer(from, rows);
          v = own(pair.getTo());
        }
        v = Vectors.forSpark(v, fields[i], allocator, owned);
        ColumnVector fixed = FixedWidthColumnVector.of(v, fields[i].dataType());
        columns[i] = fixed != null ? fixed : new ArrowColumnVector(v);
      }
    }
    current = new ColumnarBatch(columns, rows);
    return true;
  }

  private ValueVector column(String name, Segment segment) throws IOException {
    FieldVector v = file.root().getVector(name);
    if (v == null) {
      throw SegmentFile.corrupt("no column " + name + " in the segment", segment.key());
    }
    DictionaryEncoding encoding = v.getField().getDictionary();
    if (encoding == null) {
      return v;
    }
    ValueVector done = decoded.get(name);
    if (done != null) {
      return done;
    }
    Dictionary dictionary = file.dictionary(encoding.getId());
    if (dictionary == null) {
      throw SegmentFile.corrupt("column " + name + " has no dictionary", segment.key());
    }
    // kept while the file is open: a compacted object's segments share it
    done = DictionaryEncoder.decode(v, dictionary);
    decoded.put(name, done);
    return done;
  }

  private ValueVector own(ValueVector v) {
    owned.add(v);
    return v;
  }

  @Override
  public ColumnarBatch get() {
    return current;
  }

  private void release() throws IOException {
    if (current != null) {
      current.close();
      current = null;
    }
    for (ValueVector v : owned) {
      v.close();
    }
    owned.clear();
  }

  private void closeFile() throws IOException {
    for (ValueVector v : decoded.values()) {
      v.close();
    }
    decoded.clear();
    if (file != null) {
      file.close();
      file = null;
    }
  }

  @Override
  public void close() throws IOException {
    release();
    closeFile();
    allocator.close();
  }
}
