package io.arrowlog.spark;

import java.util.Map;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.StructType;

/**
 * The {@code arrowlog} format on the JVM. Spark picks a JVM source over a Python one of
 * the same name, so this one serves everything: batch reads itself (Arrow vectors, no
 * Python on the executors), and writes and streams through the Python source, which it
 * extends. The schema comes from the Python source too, so both readers agree on it.
 */
public class ArrowLogProvider extends PythonDataSourceV2 implements DataSourceRegister {
  @Override
  public String shortName() {
    return "arrowlog";
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Table python = super.getTable(schema, partitioning, properties);
    return new ArrowLogTable((SupportsRead) python, schema);
  }
}
