package io.arrowlog.spark;

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

  SegmentReaderFactory(StructType schema, MetadataColumns meta) {
    this.schema = schema;
    this.meta = meta;
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
    return new SegmentReader((SegmentTask) partition, schema, meta);
  }
}
