package io.arrowlog.spark;

import io.arrowlog.spark.planning.Filters;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.Planner;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * Column pruning and filter pushdown for a JVM read. Filters go to the planner, which
 * applies them as the Python source does: on {@code partition} (equality, IN), and on
 * {@code offset} and {@code timestamp} (comparisons) exactly, so Spark need not apply
 * those again; on data columns only to leave out segments, so Spark still filters the rows.
 */
final class ArrowLogScanBuilder
    implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters {
  private final ScanBuilder python;
  private final CaseInsensitiveStringMap options;
  private final StructType schema;
  /** The names of the metadata columns (null: unknown, no filter is exact). */
  private final MetadataColumns meta;

  private final Planner planner;
  private StructType required;
  private Filter[] pushed = new Filter[0];

  ArrowLogScanBuilder(
      ScanBuilder python,
      CaseInsensitiveStringMap options,
      StructType schema,
      MetadataColumns meta,
      Planner planner) {
    this.python = python;
    this.options = options;
    this.schema = schema;
    this.meta = meta;
    this.planner = planner;
    this.required = schema;
  }

  /**
   * Top-level columns only: a struct Spark pruned to some of its fields is read whole
   * (Spark then picks the fields), since a segment's struct vector holds them all and
   * {@code ArrowColumnVector} reads children by position.
   */
  @Override
  public void pruneColumns(StructType requiredSchema) {
    StructType whole = new StructType();
    for (StructField f : requiredSchema.fields()) {
      whole = whole.add(schema.apply(f.name()));
    }
    this.required = whole;
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    List<Filter> after = new ArrayList<>();
    for (Filter f : filters) {
      if (!exact(f, meta)) {
        after.add(f);
      }
    }
    pushed = filters.clone();
    return after.toArray(new Filter[0]);
  }

  @Override
  public Filter[] pushedFilters() {
    return pushed.clone();
  }

  /**
   * Whether the plan applies {@code f} exactly (see the Python source's pushFilters):
   * only a filter the planner is sent, on a metadata column.
   */
  private static boolean exact(Filter f, MetadataColumns meta) {
    if (meta == null || Filters.spec(f) == null) {
      return false;
    }
    if (f instanceof EqualTo e && e.attribute().equals(meta.partition())) {
      return true;
    }
    if (f instanceof In i && i.attribute().equals(meta.partition())) {
      return true;
    }
    String attribute = comparedAttribute(f);
    return attribute != null
        && (attribute.equals(meta.offset()) || attribute.equals(meta.timestamp()));
  }

  private static String comparedAttribute(Filter f) {
    if (f instanceof EqualTo e) {
      return e.attribute();
    }
    if (f instanceof GreaterThan g) {
      return g.attribute();
    }
    if (f instanceof GreaterThanOrEqual g) {
      return g.attribute();
    }
    if (f instanceof LessThan l) {
      return l.attribute();
    }
    if (f instanceof LessThanOrEqual l) {
      return l.attribute();
    }
    return null;
  }

  @Override
  public Scan build() {
    return new ArrowLogScan(
        python, options, new ArrowLogBatch(options, schema, required, pushed, meta, planner));
  }
}
