package io.arrowlog.spark;

import io.arrowlog.spark.errors.PythonErrors;
import java.util.function.Supplier;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceReadInfo;
import org.apache.spark.sql.execution.datasources.v2.python.PythonFilterPushdownResult;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Option;
import scala.Some;

/**
 * A batch scan through the Python source, each with its own plan. Spark's Python scan
 * asks the provider (one per DataFrame, shared by every scan of it) for its read info, so
 * two scans of one query, or a cached query and a later one, would read one plan. Here
 * each scan keeps the filters Spark pushed into it, and its batch plans when Spark first
 * asks it for partitions (the query's action), pushing those filters again.
 */
final class PythonRead implements ScanBuilder, SupportsPushDownFilters {
  private final ScanBuilder python;
  private final ArrowLogProvider provider;
  private final CaseInsensitiveStringMap options;
  private final StructType schema;
  /** The filters of a pushdown that ran (null: none ran, the plain planner plans). */
  private Filter[] pushdown;

  PythonRead(
      ScanBuilder python,
      ArrowLogProvider provider,
      CaseInsensitiveStringMap options,
      StructType schema) {
    this.python = python;
    this.provider = provider;
    this.options = options;
    this.schema = schema;
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    if (!(python instanceof SupportsPushDownFilters p)) {
      return filters;
    }
    PythonDataSourceReadInfo[] planned = new PythonDataSourceReadInfo[1];
    // the Python source plans the read with the filters pushed: its errors are planning's
    Filter[] after =
        PythonErrors.oneLine(() -> provider.capturing(planned, () -> p.pushFilters(filters)));
    pushdown = planned[0] == null ? null : filters.clone();
    return after;
  }

  @Override
  public Filter[] pushedFilters() {
    return python instanceof SupportsPushDownFilters p ? p.pushedFilters() : new Filter[0];
  }

  @Override
  public Scan build() {
    Scan scan = python.build();
    Filter[] filters = pushdown;
    return new Scan() {
      @Override
      public StructType readSchema() {
        return scan.readSchema();
      }

      @Override
      public String description() {
        return scan.description();
      }

      @Override
      public CustomMetric[] supportedCustomMetrics() {
        return scan.supportedCustomMetrics();
      }

      @Override
      public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
        return ArrowLogStream.of(scan.toMicroBatchStream(checkpointLocation));
      }

      @Override
      public Batch toBatch() {
        return new PlannedBatch(scan.toBatch(), filters);
      }
    };
  }

  /** Spark's Python batch, given this scan's own plan, made at its first use. */
  private final class PlannedBatch implements Batch {
    private final Batch python;
    private final Filter[] filters;
    private PythonDataSourceReadInfo info;

    PlannedBatch(Batch python, Filter[] filters) {
      this.python = python;
      this.filters = filters;
    }

    private synchronized PythonDataSourceReadInfo info() {
      if (info == null && filters != null) {
        Option<PythonFilterPushdownResult> result =
            provider
                .source()
                .pushdownFiltersInPython(
                    provider.getOrCreateDataSourceInPython(
                        "arrowlog", options, new Some<>(schema)),
                    schema,
                    filters);
        info = result.isDefined() ? result.get().readInfo() : null;
      }
      return info; // null: the plain planner plans (the provider asks it)
    }

    private <T> T planned(Supplier<T> call) {
      return provider.reading(info(), call);
    }

    @Override
    public InputPartition[] planInputPartitions() {
      return PythonErrors.oneLine(() -> planned(python::planInputPartitions));
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return planned(python::createReaderFactory);
    }
  }
}
