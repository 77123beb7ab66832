package io.arrowlog.spark;

import java.io.Serializable;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One task of a plan: consecutive visible segments of one partition, and the topic's
 * schema (an Arrow IPC schema message) they must hold.
 */
record SegmentTask(
    String topic, int partition, long rows, long bytes, Segment[] segments, byte[] schema)
    implements InputPartition {

  /**
   * A segment, where an executor fetches it ({@code location}: a path or a pre-signed
   * URL), the offsets it holds {@code [base, end)} and those to keep {@code [lo, hi)}. When
   * {@code compactedStart >= 0}, {@code key} is the compacted object of the offsets
   * {@code [compactedStart, compactedEnd)} that holds the segment's records (docs/protocol.md,
   * "Compacting small segments"), and {@code size} is the object's; {@code droppable}: the
   * object may leave the segment's records out (aborted, read_uncommitted). {@code appendId}
   * is the append id the index gives the segment (null: unknown): an object at the key with
   * another is not the planned segment but a late write into a key freed since.
   */
  record Segment(
      String location,
      String key,
      long base,
      long end,
      long lo,
      long hi,
      long size,
      long compactedStart,
      long compactedEnd,
      String appendId,
      boolean droppable)
      implements Serializable {
    boolean compacted() {
      return compactedStart >= 0;
    }
  }
}
