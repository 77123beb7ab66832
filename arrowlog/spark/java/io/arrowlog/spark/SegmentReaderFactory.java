package io.arrowlog.spark;

import io.arrowlog.spark.format.Segment;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.Planner;
import io.arrowlog.spark.planning.PlannerProcess;
import io.arrowlog.spark.planning.SegmentTask;
import java.io.Serializable;
import java.util.HashMap;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Sent to the executors: reads a task's segments as columnar batches. */
final class SegmentReaderFactory implements PartitionReaderFactory {
  private final StructType schema;
  private final MetadataColumns meta;
  private final Relocation relocation;

  SegmentReaderFactory(StructType schema, MetadataColumns meta, Relocation relocation) {
    this.schema = schema;
    this.meta = meta;
    this.relocation = relocation;
  }

  /**
   * What an executor needs to find a planned segment removed since the plan: the read's
   * options and the driver's planner interpreter.
   */
  record Relocation(HashMap<String, String> options, String python) implements Serializable {
    /**
     * Where the records of {@code segment} lie now, asked of this JVM's planner process;
     * null if no compacted object holds them.
     */
    Segment find(Segment segment) {
      return new Planner(this::python, PlannerProcess.shared()).relocate(options, segment);
    }
  }

  @Override
  public boolean supportColumnarReads(InputPartition partition) {
    return true;
  }

  @Override
  public PartitionReader<InternalRow> createReader(InputPartition partition) {
    throw new UnsupportedOperationException("the arrowlog JVM reader reads columnar batches");
  }

  @Override
  public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
    return new SegmentReader((SegmentTask) partition, schema, meta, relocation);
  }
}
