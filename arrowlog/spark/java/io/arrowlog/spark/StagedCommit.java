package io.arrowlog.spark;

import com.fasterxml.jackson.databind.node.ArrayNode;
import java.io.Serializable;
import java.util.List;
import org.apache.spark.sql.connector.write.WriterCommitMessage;

/** What a task attempt of a JVM write uploaded: the staged objects, in the order written. */
record StagedCommit(List<StagedCommit.Ref> refs) implements WriterCommitMessage {
  private static final long serialVersionUID = 1L;

  /**
   * One staged object: its partition, its key under the partition, its size and identity,
   * and its column statistics as a commit's ref carries them (JSON, or null: none).
   */
  record Ref(
      int partition,
      String at,
      long records,
      long bytes,
      long timestampMs,
      String appendId,
      String stats)
      implements Serializable {
    private static final long serialVersionUID = 1L;
  }

  /** The refs of {@code messages} (those of attempts Spark committed), into {@code into}. */
  static void refs(WriterCommitMessage[] messages, ArrayNode into) {
    for (WriterCommitMessage m : messages) {
      if (m instanceof StagedCommit commit) {
        for (Ref r : commit.refs()) {
          into.addArray()
              .add(r.partition())
              .add(r.at())
              .add(r.records())
              .add(r.bytes())
              .add(r.timestampMs())
              .add(r.appendId())
              .add(r.stats());
        }
      }
    }
  }
}
