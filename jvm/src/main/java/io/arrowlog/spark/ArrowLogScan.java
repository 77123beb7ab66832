package io.arrowlog.spark;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.OptionalLong;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.Statistics;
import org.apache.spark.sql.connector.read.SupportsReportStatistics;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A batch read planned once by the Python planner (see {@link Planner}) and read by the
 * executors as Arrow vectors. A stream built from the same scan is the Python source's.
 */
final class ArrowLogScan implements Scan, Batch, SupportsReportStatistics {
  private final ScanBuilder python;
  private final CaseInsensitiveStringMap options;
  private final StructType schema;
  private final StructType required;
  private final Filter[] filters;
  private Planner.Plan plan;

  ArrowLogScan(
      ScanBuilder python,
      CaseInsensitiveStringMap options,
      StructType schema,
      StructType required,
      Filter[] filters) {
    this.python = python;
    this.options = options;
    this.schema = schema;
    this.required = required;
    this.filters = filters;
  }

  @Override
  public StructType readSchema() {
    return required;
  }

  @Override
  public String description() {
    return "arrowlog (JVM reader) " + options.getOrDefault("topic", options.getOrDefault("subscribe", ""));
  }

  @Override
  public Batch toBatch() {
    return this;
  }

  @Override
  public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
    return python.build().toMicroBatchStream(checkpointLocation);
  }

  @Override
  public InputPartition[] planInputPartitions() {
    return plan().tasks().toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new SegmentReaderFactory(
        required,
        MetadataColumns.of(schema),
        new SegmentReaderFactory.Relocation(
            new HashMap<>(options.asCaseSensitiveMap()), Planner.python()));
  }

  @Override
  public Statistics estimateStatistics() {
    Planner.Plan p = plan();
    long bytes = 0;
    long rows = 0;
    for (SegmentTask t : p.tasks()) {
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

  private synchronized Planner.Plan plan() {
    if (plan == null) {
      plan = Planner.plan(options.asCaseSensitiveMap(), dataColumns(), filters);
    }
    return plan;
  }

  /** The topic columns Spark needs, in its order; null for all of them in the topic's. */
  private List<String> dataColumns() {
    MetadataColumns meta = MetadataColumns.of(schema);
    List<String> wanted = new ArrayList<>();
    for (StructField f : required.fields()) {
      if (!meta.contains(f.name())) {
        wanted.add(f.name());
      }
    }
    List<String> all = new ArrayList<>();
    StructField[] fields = schema.fields();
    for (int i = 0; i < MetadataColumns.dataColumns(schema); i++) {
      all.add(fields[i].name());
    }
    return wanted.equals(all) || wanted.isEmpty() ? null : wanted;
  }
}
