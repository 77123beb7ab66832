package io.arrowlog.spark.planning;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.arrowlog.spark.errors.ArrowLogException;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;

/**
 * A Python planner process ({@code python -m arrowlog.spark.jvm_planner}) and its pipes:
 * one request line in, one answer line out, one exchange at a time. It is started at the
 * first exchange, kept between queries (a query pays for a plan, not for starting Python
 * and importing pyarrow), started again once if it died, and replaced when an exchange
 * names another interpreter.
 *
 * <p>A JVM has one, {@link #shared()}: the driver's scans and an executor's readers
 * (which ask it where a segment removed since the plan lies) all use their JVM's.
 */
public final class PlannerProcess {
  private static final PlannerProcess JVM = new PlannerProcess();
  private static final ObjectMapper JSON = new ObjectMapper();

  private Process process;
  private String python;
  private BufferedReader answers;
  private volatile double lastMillis;
  private volatile double lastPlannerMillis;

  /** This JVM's planner process. */
  public static PlannerProcess shared() {
    return JVM;
  }

  /** A planner process of its own (the JVM's is {@link #shared()}). */
  public PlannerProcess() {}

  /** Sends {@code request} to the planner run by {@code python}; its answer. */
  synchronized JsonNode exchange(String python, ObjectNode request) {
    byte[] line = (request.toString() + "\n").getBytes(StandardCharsets.UTF_8);
    for (int attempt = 0; ; attempt++) {
      try {
        Process p = started(python);
        OutputStream in = p.getOutputStream();
        in.write(line);
        in.flush();
        String answer = answers.readLine();
        if (answer == null) {
          throw new IOException("the planner exited with " + p.waitFor());
        }
        return JSON.readTree(answer);
      } catch (IOException e) {
        close();
        if (attempt >= 1) { // a planner that died between queries is started again, once
          throw new ArrowLogException(
              "ArrowLogError",
              "the arrowlog planner (" + python + " -m arrowlog.spark.jvm_planner) failed: "
                  + e.getMessage() + "; is arrowlog installed for that interpreter?",
              e);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        close();
        throw new ArrowLogException("ArrowLogError", "interrupted while planning", e);
      }
    }
  }

  private Process started(String python) throws IOException {
    if (process != null && process.isAlive() && python.equals(this.python)) {
      return process;
    }
    close();
    ProcessBuilder builder = new ProcessBuilder(python, "-m", "arrowlog.spark.jvm_planner");
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new ArrowLogException(
          "MissingDependencyError",
          "cannot run the arrowlog planner with " + python
              + " (set spark.arrowlog.python, or build the session with"
              + " arrowlog.spark.configure)",
          e);
    }
    this.python = python;
    answers =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    return process;
  }

  /** Stops the process (the next exchange starts another). */
  public synchronized void close() {
    if (process != null) {
      process.destroy();
      process = null;
      answers = null;
    }
  }

  void planned(double millis, double plannerMillis) {
    lastMillis = millis;
    lastPlannerMillis = plannerMillis;
  }

  /** Milliseconds the last plan took, as the driver waited for it (the bench reads it). */
  public double lastMillis() {
    return lastMillis;
  }

  /** Of {@link #lastMillis}, those the planner spent planning (the rest: the round trip). */
  public double lastPlannerMillis() {
    return lastPlannerMillis;
  }
}
