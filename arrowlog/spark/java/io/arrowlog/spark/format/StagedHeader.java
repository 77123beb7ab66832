package io.arrowlog.spark.format;

import io.arrowlog.spark.errors.ArrowLogException;
import java.util.Locale;
import java.util.regex.Pattern;

/**
 * The header of a staged data object written by the Spark writer: a transactional batch
 * of {@code recordCount} records whose offsets (and producer sequence) the commit object
 * naming it assigns, so its header says base offset 0 and base sequence -1
 * (arrowlog/format/segment/header.py, {@code SegmentHeader} with {@code staged=True}).
 *
 * @param appendId 32 lowercase hex digits, the object's own
 * @param timestampMs the writer's clock when it staged the batch: the records' timestamp,
 *     and the folder the object is listed under
 */
public record StagedHeader(
    String appendId,
    long recordCount,
    long timestampMs,
    long producerId,
    int producerEpoch,
    String transactionalId) {
  private static final Pattern APPEND_ID = Pattern.compile("[0-9a-f]{32}");
  /** How much of the writer's clock one folder of staged objects covers (topic.py). */
  static final long STAGED_FOLDER_MS = 10_000;
  /** Names hold the writer's clock as 13 digits (parse_staged_name reads exactly 13). */
  private static final long NAMEABLE_MS = 10_000_000_000_000L;

  public StagedHeader {
    if (appendId == null || !APPEND_ID.matcher(appendId).matches()) {
      throw invalid("append id must be 32 lowercase hex digits, got " + appendId);
    }
    if (recordCount < 1) {
      throw invalid("a staged data object holds at least one record, got " + recordCount);
    }
    if (timestampMs < 0 || timestampMs >= NAMEABLE_MS) {
      throw invalid("timestamp " + timestampMs + " ms has no 13-digit name");
    }
  }

  /**
   * The header's JSON, byte for byte what Python's {@code SegmentHeader.to_json} gives
   * for it: one flat object, keys sorted, no spaces, non-ASCII escaped.
   */
  public String toJson() {
    StringBuilder out = new StringBuilder(320);
    out.append("{\"append_id\":\"").append(appendId)
        .append("\",\"base_offset\":0,\"base_sequence\":-1,\"control_type\":null")
        .append(",\"producer_epoch\":").append(producerEpoch)
        .append(",\"producer_id\":").append(producerId)
        .append(",\"record_count\":").append(recordCount)
        .append(",\"staged\":true,\"timestamp_ms\":").append(timestampMs)
        .append(",\"transactional\":true,\"transactional_id\":");
    if (transactionalId == null) {
      out.append("null");
    } else {
      PyJson.string(out, transactionalId);
    }
    out.append(",\"txn_bound\":-1,\"v\":").append(SegmentFile.STAGED_VERSION).append('}');
    return out.toString();
  }

  /**
   * The object's key relative to its partition's directory, as Python's {@code staged_at}
   * names a transactional batch with no producer in its name: {@code
   * staged/<ms / 10 s, 10 digits>/<ms, 13 digits>-<append id>-<count>-t.arrow}.
   */
  public String at() {
    return String.format(
        Locale.ROOT,
        "staged/%010d/%013d-%s-%d-t.arrow",
        Math.floorDiv(timestampMs, STAGED_FOLDER_MS), timestampMs, appendId, recordCount);
  }

  private static ArrowLogException invalid(String message) {
    return new ArrowLogException("InvalidConfigError", message);
  }
}
