package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.arrowlog.spark.errors.PythonErrors;
import java.io.IOException;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.Optional;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReportsSourceMetrics;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;

/**
 * The Python source's stream, as Spark's Kafka source reports it: each progress's source
 * {@code metrics} say how many offsets the micro-batch's end is behind the latest the
 * trigger saw ({@code minOffsetsBehindLatest}, {@code maxOffsetsBehindLatest},
 * {@code avgOffsetsBehindLatest}, over the partitions), and its arrowlog errors arrive in
 * one line. Everything else is the Python stream's.
 */
final class ArrowLogStream
    implements MicroBatchStream, SupportsTriggerAvailableNow, ReportsSourceMetrics {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final MicroBatchStream python;
  private final SupportsTriggerAvailableNow control;
  /** The latest offsets the last trigger saw (null: none yet). */
  private volatile Offset latest;

  private ArrowLogStream(MicroBatchStream python) {
    this.python = python;
    this.control = (SupportsTriggerAvailableNow) python;
  }

  /** {@code python} reporting as this class does; as it is if it takes no read limit. */
  static MicroBatchStream of(MicroBatchStream python) {
    return python instanceof SupportsTriggerAvailableNow ? new ArrowLogStream(python) : python;
  }

  @Override
  public Offset initialOffset() {
    return PythonErrors.oneLine(python::initialOffset);
  }

  @Override
  public Offset latestOffset() {
    return PythonErrors.oneLine(() -> python.latestOffset());
  }

  @Override
  public Offset latestOffset(Offset start, ReadLimit limit) {
    return PythonErrors.oneLine(() -> control.latestOffset(start, limit));
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return PythonErrors.oneLine(control::getDefaultReadLimit);
  }

  @Override
  public Offset reportLatestOffset() {
    Offset seen = PythonErrors.oneLine(control::reportLatestOffset);
    latest = seen;
    return seen;
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    PythonErrors.oneLine(control::prepareForTriggerAvailableNow);
  }

  @Override
  public InputPartition[] planInputPartitions(Offset start, Offset end) {
    return PythonErrors.oneLine(() -> python.planInputPartitions(start, end));
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return python.createReaderFactory();
  }

  @Override
  public Offset deserializeOffset(String json) {
    return python.deserializeOffset(json);
  }

  @Override
  public void commit(Offset end) {
    PythonErrors.oneLine(() -> python.commit(end));
  }

  @Override
  public void stop() {
    python.stop();
  }

  @Override
  public Map<String, String> metrics(Optional<Offset> consumed) {
    Offset seen = latest;
    if (consumed.isEmpty() || seen == null) {
      return Map.of();
    }
    return behindLatest(seen.json(), consumed.get().json());
  }

  /**
   * Kafka's source metrics of a stream whose latest offsets are {@code latestJson} and
   * whose micro-batch ended at {@code consumedJson} (both {@code {"topic": {"0": 42}}}):
   * the least, most and mean offsets behind, over the partitions in both. None when no
   * partition is in both.
   */
  static Map<String, String> behindLatest(String latestJson, String consumedJson) {
    Map<String, Long> latest = positions(latestJson);
    Map<String, Long> consumed = positions(consumedJson);
    long min = Long.MAX_VALUE;
    long max = Long.MIN_VALUE;
    long sum = 0;
    int n = 0;
    for (Map.Entry<String, Long> e : latest.entrySet()) {
      Long at = consumed.get(e.getKey());
      if (at == null) {
        continue; // a partition this query has not read yet
      }
      long behind = Math.max(0, e.getValue() - at);
      min = Math.min(min, behind);
      max = Math.max(max, behind);
      sum += behind;
      n++;
    }
    if (n == 0) {
      return Map.of();
    }
    Map<String, String> out = new HashMap<>();
    out.put("minOffsetsBehindLatest", Long.toString(min));
    out.put("maxOffsetsBehindLatest", Long.toString(max));
    out.put("avgOffsetsBehindLatest", Double.toString((double) sum / n));
    return out;
  }

  /** {@code "topic/partition"} to offset, of a stream offset's JSON (empty if not one). */
  private static Map<String, Long> positions(String json) {
    Map<String, Long> out = new HashMap<>();
    JsonNode root;
    try {
      root = JSON.readTree(json);
    } catch (IOException e) {
      return out;
    }
    for (Iterator<String> topics = root.fieldNames(); topics.hasNext(); ) {
      String topic = topics.next();
      JsonNode partitions = root.get(topic);
      for (Iterator<String> ps = partitions.fieldNames(); ps.hasNext(); ) {
        String p = ps.next();
        if (partitions.get(p).canConvertToLong()) {
          out.put(topic + "/" + p, partitions.get(p).asLong());
        }
      }
    }
    return out;
  }
}
