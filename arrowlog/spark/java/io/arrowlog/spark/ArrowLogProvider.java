package io.arrowlog.spark;

import io.arrowlog.spark.errors.PythonErrors;
import io.arrowlog.spark.planning.Planner;
import io.arrowlog.spark.planning.PlannerProcess;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.spark.sql.SparkSession;
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
 * <p>A batch read through the Python source ({@code reader=python}) is planned for each
 * scan, when Spark first asks it for partitions (see {@link PythonRead}). Spark's own
 * {@code PythonDataSourceV2} keeps the first plan of a DataFrame (one instance serves every
 * query of it) for every later query, and under filter pushdown the last pushdown's plan
 * for every scan of it.
 *
 * <p>A JVM read is planned by the Python planner: this source's {@link Planner} runs the
 * session's interpreter in the JVM's planner process ({@link PlannerProcess#shared()}),
 * which outlives the source (one per DataFrame) and serves every query of the JVM.
 */
public class ArrowLogProvider extends PythonDataSourceV2 implements DataSourceRegister {
  /** Where a pushdown on this thread puts the read info it planned. */
  private final ThreadLocal<PythonDataSourceReadInfo[]> capture = new ThreadLocal<>();

  /** The read info of the batch planning on this thread (null: plan anew). */
  private final ThreadLocal<PythonDataSourceReadInfo> planned = new ThreadLocal<>();

  private final Planner planner =
      new Planner(() -> plannerPython(SparkSession.active()), PlannerProcess.shared());

  @Override
  public String shortName() {
    return "arrowlog";
  }

  /** The Python source's schema; its arrowlog errors (options, topic) in one line. */
  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return PythonErrors.oneLine(() -> super.inferSchema(options));
  }

  @Override
  public Table getTable(
      StructType schema, Transform[] partitioning, Map<String, String> properties) {
    Table python = super.getTable(schema, partitioning, properties);
    return new ArrowLogTable((SupportsRead) python, schema, this, planner);
  }

  /** Runs a pushdown, the read info it plans put in {@code into[0]}. */
  <T> T capturing(PythonDataSourceReadInfo[] into, Supplier<T> call) {
    capture.set(into);
    try {
      return call.get();
    } finally {
      capture.remove();
    }
  }

  /** Runs {@code call} of a batch, which reads {@code info} (null: a plan made anew). */
  <T> T reading(PythonDataSourceReadInfo info, Supplier<T> call) {
    planned.set(info);
    try {
      return call.get();
    } finally {
      planned.remove();
    }
  }

  /** The interpreter that plans: as PySpark picks its own, with arrowlog's setting first. */
  static String plannerPython(SparkSession session) {
    String own = session.conf().get(OptionNames.PYTHON_CONF, "");
    if (!own.isEmpty()) {
      return own;
    }
    for (String key : OptionNames.PYSPARK_PYTHON_CONFS) {
      String value = session.conf().get(key, "");
      if (!value.isEmpty()) {
        return value;
      }
    }
    for (String env : OptionNames.PYSPARK_PYTHON_ENV) {
      String value = System.getenv(env);
      if (value != null && !value.isEmpty()) {
        return value;
      }
    }
    return "python3";
  }

  @Override
  public void setReadInfo(PythonDataSourceReadInfo info) {
    PythonDataSourceReadInfo[] into = capture.get();
    if (into != null) {
      into[0] = info;
    }
  }

  @Override
  public PythonDataSourceReadInfo getOrCreateReadInfo(
      String shortName, CaseInsensitiveStringMap options, StructType schema, boolean streaming) {
    if (streaming) {
      return super.getOrCreateReadInfo(shortName, options, schema, streaming);
    }
    PythonDataSourceReadInfo info = planned.get();
    if (info != null) {
      return info; // this scan's pushdown planned it
    }
    return source()
        .createReadInfoInPython(
            getOrCreateDataSourceInPython(shortName, options, new Some<>(schema)),
            schema,
            false);
  }
}
