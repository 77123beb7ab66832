package io.arrowlog.spark;

import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/** The Python source's table, with batch scans read on the JVM. */
final class ArrowLogTable implements SupportsRead, SupportsWrite {
  /** {@code reader=python} reads through the Python source (for comparison, or a store
   * whose objects have no URL). */
  static final String READER_OPTION = "reader";

  private final SupportsRead python;
  private final StructType schema;
  private final ArrowLogProvider provider;

  ArrowLogTable(SupportsRead python, StructType schema, ArrowLogProvider provider) {
    this.python = python;
    this.schema = schema;
    this.provider = provider;
  }

  @Override
  public String name() {
    return python.name();
  }

  @Override
  @SuppressWarnings("deprecation")
  public StructType schema() {
    return schema;
  }

  @Override
  public Set<TableCapability> capabilities() {
    return python.capabilities();
  }

  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    ScanBuilder delegate = python.newScanBuilder(options);
    String reader = options.getOrDefault(READER_OPTION, "jvm");
    if (reader.equalsIgnoreCase("python")) {
      return new PythonRead(delegate, provider, options, schema);
    }
    if (!reader.equalsIgnoreCase("jvm")) {
      throw new ArrowLogException(
          "InvalidConfigError", "option reader: expected jvm or python, got '" + reader + "'");
    }
    if (Planner.unreadable(options.asCaseSensitiveMap()) != null) {
      // a column type the JVM reader does not convert as Spark's does
      return new PythonRead(delegate, provider, options, schema);
    }
    return new ArrowLogScanBuilder(delegate, options, schema);
  }

  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    return ((SupportsWrite) python).newWriteBuilder(info);
  }
}
