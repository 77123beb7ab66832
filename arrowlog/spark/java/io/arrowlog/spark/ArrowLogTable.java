package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.planning.MetadataColumns;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.Planner;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.SparkSession;
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
  private final SupportsRead python;
  private final StructType schema;
  private final ArrowLogProvider provider;
  private final Planner planner;

  ArrowLogTable(
      SupportsRead python, StructType schema, ArrowLogProvider provider, Planner planner) {
    this.python = python;
    this.schema = schema;
    this.provider = provider;
    this.planner = planner;
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

  /**
   * A JVM read, unless option {@link OptionNames#READER} says {@code python} (for
   * comparison, or a store whose objects have no URL) or the topic has a column type the
   * JVM reader does not convert as Spark's Python reader does.
   */
  @Override
  public ScanBuilder newScanBuilder(CaseInsensitiveStringMap options) {
    ScanBuilder delegate = python.newScanBuilder(options);
    String reader = options.getOrDefault(OptionNames.READER, OptionNames.READER_JVM);
    if (reader.equalsIgnoreCase(OptionNames.READER_PYTHON)) {
      return new PythonRead(delegate, provider, options, schema);
    }
    if (!reader.equalsIgnoreCase(OptionNames.READER_JVM)) {
      throw new ArrowLogException(
          "InvalidConfigError",
          "option " + OptionNames.READER + ": expected " + OptionNames.READER_JVM + " or "
              + OptionNames.READER_PYTHON + ", got '" + reader + "'");
    }
    PlanWire.Check check = planner.check(options.asCaseSensitiveMap());
    if (check.unreadable() != null) {
      return new PythonRead(delegate, provider, options, schema);
    }
    // null (names unknown: the planner could not open the read, whose plan then fails):
    // no filter is taken as applied exactly, and every topic column is planned
    MetadataColumns meta = check.metadata();
    if (meta != null && !meta.in(schema)) {
      meta = null;
    }
    return new ArrowLogScanBuilder(delegate, options, schema, meta, planner);
  }

  /** {@code info} with {@code options} in place of its own. */
  private static LogicalWriteInfo withOptions(LogicalWriteInfo info, Map<String, String> options) {
    CaseInsensitiveStringMap merged = new CaseInsensitiveStringMap(options);
    return new LogicalWriteInfo() {
      @Override
      public CaseInsensitiveStringMap options() {
        return merged;
      }

      @Override
      public String queryId() {
        return info.queryId();
      }

      @Override
      public StructType schema() {
        return info.schema();
      }

      @Override
      public java.util.Optional<StructType> rowIdSchema() {
        return info.rowIdSchema();
      }

      @Override
      public java.util.Optional<StructType> metadataSchema() {
        return info.metadataSchema();
      }
    };
  }

  /**
   * A JVM write, unless option {@link OptionNames#WRITER} says {@code python} or the
   * planner says the JVM cannot write this DataFrame to this topic (then the Python source
   * writes it, and raises its errors). The session's idempotence keys are options here too:
   * the JVM can read them, where the Python source cannot.
   */
  @Override
  public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
    Map<String, String> options = new HashMap<>(info.options().asCaseSensitiveMap());
    SparkSession session = SparkSession.active();
    for (String key : OptionNames.SESSION_WRITE_KEYS) {
      String value = session.conf().get(key, null);
      if (value != null && !info.options().containsKey(key)) {
        options.put(key, value);
      }
    }
    // the Python source gets them too, whoever writes
    WriteBuilder delegate =
        new PythonWrites(((SupportsWrite) python).newWriteBuilder(withOptions(info, options)));
    String writer = info.options().getOrDefault(OptionNames.WRITER, OptionNames.READER_JVM);
    if (!writer.equalsIgnoreCase(OptionNames.READER_JVM)) {
      return delegate;
    }
    JsonNode check =
        planner.write(PlanWire.WRITE_CHECK, options, r -> r.put("schema", info.schema().json()));
    if (!check.path("jvm").asBoolean()) {
      return delegate;
    }
    return new ArrowLogWriteBuilder(options, info.schema(), planner, delegate);
  }
}
