package io.arrowlog.spark;

import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.Planner;
import java.util.HashMap;
import java.util.List;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * A batch read planned once by the Python planner (see {@link Planner}), when Spark first
 * asks for its size or its partitions, and read by the executors as Arrow vectors.
 */
final class ArrowLogBatch implements Batch {
  private final CaseInsensitiveStringMap options;
  private final StructType schema;
  private final StructType required;
  private final Filter[] filters;
  /** The metadata columns' names as the scan was built with them (null: unknown). */
  private final MetadataColumns meta;

  private final Planner planner;
  private PlanWire.Plan plan;

  ArrowLogBatch(
      CaseInsensitiveStringMap options,
      StructType schema,
      StructType required,
      Filter[] filters,
      MetadataColumns meta,
      Planner planner) {
    this.options = options;
    this.schema = schema;
    this.required = required;
    this.filters = filters;
    this.meta = meta;
    this.planner = planner;
  }

  StructType readSchema() {
    return required;
  }

  @Override
  public InputPartition[] planInputPartitions() {
    return plan().tasks().toArray(new InputPartition[0]);
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    MetadataColumns planned = plan().metadata();
    if (!planned.in(schema)) {
      throw new ArrowLogException(
          "SchemaMismatchError",
          "the planner names the metadata columns " + planned + ", the read's schema has "
              + List.of(schema.fieldNames())
              + ": the topic's columns changed since the read was loaded; load it again");
    }
    return new SegmentReaderFactory(
        required,
        planned,
        new SegmentReaderFactory.Relocation(
            new HashMap<>(options.asCaseSensitiveMap()), planner.python()));
  }

  synchronized PlanWire.Plan plan() {
    if (plan == null) {
      plan = planner.plan(options.asCaseSensitiveMap(), dataColumns(), filters);
    }
    return plan;
  }

  /** The topic columns Spark needs, in its order; null for all of them in the topic's. */
  private List<String> dataColumns() {
    if (meta == null) {
      return null;
    }
    List<String> wanted = meta.dataColumns(required);
    return wanted.equals(meta.dataColumns(schema)) || wanted.isEmpty() ? null : wanted;
  }
}
