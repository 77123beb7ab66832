package io.arrowlog.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceReadInfo;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import scala.Some;

/**
 * The {@code arrowlog} format on the JVM. Spark picks a JVM source over a Python one of
 * the same name, so this one serves everything: batch reads itself (Arrow vectors, no
 * Python on the executors), and writes and streams through the Python source, which it
 * extends. The schema comes from the Python source too, so both readers agree on it.
 *
 * <p>A batch read through the Python source ({@code reader=python}) is planned again for
 * each query, as the JVM reader plans it. Spark's own {@code PythonDataSourceV2} keeps the
 * first plan of a DataFrame (one instance serves every query of it) for every later query:
 * one after an append reads what the log held at the first, and with filter pushdown on,
 * an unfiltered query after a filtered one reads the filtered plan (too few rows).
 */
public class ArrowLogProvider extends PythonDataSourceV2 implements DataSourceRegister {
  /** What the filter pushdown of the scan being planned now decided, if it ran. */
  private volatile PythonDataSourceReadInfo pushed;

  @Override
  public String shortName() {
    return "arrowlog";
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Table python = super.getTable(schema, partitioning, properties);
    return new ArrowLogTable((SupportsRead) python, schema, this);
  }

  /** A Python batch scan is being built: no pushdown of an earlier query counts for it. */
  void scanStarts() {
    pushed = null;
  }

  @Override
  public void setReadInfo(PythonDataSourceReadInfo info) {
    pushed = info;
  }

  @Override
  public PythonDataSourceReadInfo getOrCreateReadInfo(
      String shortName, CaseInsensitiveStringMap options, StructType schema, boolean streaming) {
    if (streaming) {
      return super.getOrCreateReadInfo(shortName, options, schema, streaming);
    }
    PythonDataSourceReadInfo planned = pushed;
    if (planned != null) {
      return planned; // this query's pushdown planned it
    }
    return source()
        .createReadInfoInPython(
            getOrCreateDataSourceInPython(shortName, options, new Some<>(schema)),
            schema,
            false);
  }
}
