package io.arrowlog.spark;

import static io.arrowlog.spark.GoldenSelfTest.expect;

import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.Planner;
import io.arrowlog.spark.planning.PlannerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.apache.spark.sql.sources.Filter;

/** The reader's refusal of plan-wire answers of a version it does not speak. */
final class Versions {
  private Versions() {}

  /**
   * Runs {@code call}, which must refuse its answer: an {@code UnsupportedVersionError}
   * naming the answer's version ({@code other}) and this reader's.
   */
  static void refused(Runnable call, String other) {
    try {
      call.run();
    } catch (ArrowLogException e) {
      expect(e.type().equals("UnsupportedVersionError"), "refused as " + e.type());
      expect(e.getMessage().contains(other), "the message names " + other + ": " + e);
      expect(
          e.getMessage().contains("speaks version " + PlanWire.VERSION),
          "the message names this reader's version: " + e);
      return;
    }
    throw new AssertionError("an answer of " + other + " was taken");
  }

  /**
   * A planner process whose interpreter answers every request in version 99 (a shell
   * script in {@code out}): the planner client refuses its plan and its check.
   */
  static void planner(Path out) throws IOException {
    Path fake = out.resolve("planner-of-another-version");
    Files.writeString(
        fake,
        "#!/bin/sh\nwhile IFS= read -r line; do\n  echo '{\"version\":99,\"tasks\":[]}'\ndone\n");
    expect(fake.toFile().setExecutable(true), "cannot make " + fake + " executable");
    PlannerProcess process = new PlannerProcess();
    try {
      Planner planner = new Planner(fake::toString, process);
      Map<String, String> options = Map.of("path", "/nowhere", "topic", "t");
      refused(() -> planner.plan(options, null, new Filter[0]), "version 99");
      refused(() -> planner.check(options), "version 99");
    } finally {
      process.close();
    }
  }
}
