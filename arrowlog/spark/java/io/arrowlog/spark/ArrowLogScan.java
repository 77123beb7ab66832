package io.arrowlog.spark;

import io.arrowlog.spark.planning.SegmentTask;
import java.util.OptionalLong;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A JVM scan: its batch ({@link ArrowLogBatch}), planned once, gives Spark the scan's size
 * too. A stream built from the same scan is the Python source's.
 */
final class ArrowLogScan implements Scan, SupportsReportStatistics {
  private final ScanBuilder python;
  private final CaseInsensitiveStringMap options;
  private final ArrowLogBatch batch;

  ArrowLogScan(ScanBuilder python, CaseInsensitiveStringMap options, ArrowLogBatch batch) {
    this.python = python;
    this.options = options;
    this.batch = batch;
  }

  @Override
  public StructType readSchema() {
    return batch.readSchema();
  }

  @Override
  public String description() {
    return "arrowlog (JVM reader) "
        + options.getOrDefault(
            OptionNames.TOPIC, options.getOrDefault(OptionNames.SUBSCRIBE, ""));
  }

  /** The one batch of this scan: its plan is the one {@link #estimateStatistics} made. */
  @Override
  public Batch toBatch() {
    return batch;
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return ArrowLogStream.of(python.build().toMicroBatchStream(checkpointLocation));
  }

  @Override
  public Statistics estimateStatistics() {
    long bytes = 0;
    long rows = 0;
    for (SegmentTask t : batch.plan().tasks()) {
      bytes += t.bytes();
      rows += t.rows();
    }
    long size = bytes;
    long count = rows;
    return new Statistics() {
      @Override
      public OptionalLong sizeInBytes() {
        return OptionalLong.of(size);
      }

      @Override
      public OptionalLong numRows() {
        return OptionalLong.of(count);
      }
    };
  }
}
