package io.arrowlog.spark.planning;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.errors.PythonErrors;
import io.arrowlog.spark.format.Segment;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Supplier;
import org.apache.spark.sql.errors.QueryCompilationErrors;
import org.apache.spark.sql.sources.Filter;

/**
 * Plans a read with the library's own rules: sends it to the Python planner (a {@link
 * PlannerProcess} run by the interpreter {@code python} names when asked) as a plan-wire
 * request, and takes the answer.
 */
public final class Planner {
  private final Supplier<String> python;
  private final PlannerProcess process;

  public Planner(Supplier<String> python, PlannerProcess process) {
    this.python = python;
    this.process = process;
  }

  /** The interpreter that plans. */
  public String python() {
    return python.get();
  }

  /**
   * The tasks of a read with {@code options}, of the topic columns {@code columns} (null:
   * all) and with Spark's {@code filters}. A planning error is raised as Spark raises the
   * Python source's.
   */
  public PlanWire.Plan plan(Map<String, String> options, List<String> columns, Filter[] filters) {
    long started = System.nanoTime();
    JsonNode answer = process.exchange(python(), PlanWire.planRequest(options, columns, filters));
    PlanWire.Failure e = PlanWire.failure(answer);
    process.planned(
        (System.nanoTime() - started) / 1e6, answer.path(PlanWire.PLAN_MS).asDouble());
    if (e != null) {
      // the class Spark raises for the Python source's planning errors
      throw PythonErrors.<RuntimeException>sneaky(
          QueryCompilationErrors.pythonDataSourceError(
              "plan", "arrowlog", e.type() + ": " + e.message()));
    }
    return PlanWire.plan(answer);
  }

  /**
   * Whether the JVM reader can read the topic of a read with {@code options} (a column
   * type it does not convert as Spark's Python reader does), and its metadata columns.
   */
  public PlanWire.Check check(Map<String, String> options) {
    return PlanWire.check(process.exchange(python(), PlanWire.checkRequest(options)));
  }

  /**
   * Where the records of {@code segment}, planned but removed since (compacted, then
   * vacuumed), lie now: the segment as read from the compacted object holding them, or
   * null if none does.
   */
  public Segment relocate(Map<String, String> options, Segment segment) {
    JsonNode answer = process.exchange(python(), PlanWire.relocateRequest(options, segment));
    return PlanWire.relocated(answer, segment);
  }

  /**
   * A batch write's step {@code kind} (a {@code PlanWire.WRITE_*}) with {@code options},
   * the request's other fields set by {@code fields}; the answer. An error answer is raised
   * as the Python error, in one line.
   */
  public JsonNode write(String kind, Map<String, String> options, Consumer<ObjectNode> fields) {
    ObjectNode request = PlanWire.writeRequest(kind, options);
    fields.accept(request);
    JsonNode answer = process.exchange(python(), request);
    PlanWire.Failure e = PlanWire.failure(answer);
    if (e != null) {
      throw new ArrowLogException(e.type(), e.message());
    }
    return answer;
  }
}
