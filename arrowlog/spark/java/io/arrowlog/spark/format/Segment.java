package io.arrowlog.spark.format;

import java.io.Serializable;

/**
 * A segment as a plan names it: where an executor fetches it ({@code location}: a path or
 * a pre-signed URL), the offsets it holds {@code [base, end)} and those to keep {@code
 * [lo, hi)}. When {@code compactedStart >= 0}, {@code key} is the compacted object of the
 * offsets {@code [compactedStart, compactedEnd)} that holds the segment's records
 * (docs/protocol.md, "Compacting small segments"), and {@code size} is the object's;
 * {@code droppable}: the object may leave the segment's records out (aborted,
 * read_uncommitted). {@code appendId} is the append id the index gives the segment (null:
 * unknown): an object at the key with another is not the planned segment but a late write
 * into a key freed since. A batch a commit object committed is read from the staged data
 * object the commit names ({@code key} under {@code staged/}, {@code appendId} the one the
 * commit gives it): its offsets are the plan's, its header says none (docs/plan-wire.md).
 */
public record Segment(
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
  public boolean compacted() {
    return compactedStart >= 0;
  }

  /** This segment fetched from {@code location} instead (the same records). */
  public Segment at(String location) {
    return new Segment(
        location, key, base, end, lo, hi, size, compactedStart, compactedEnd, appendId,
        droppable);
  }
}
