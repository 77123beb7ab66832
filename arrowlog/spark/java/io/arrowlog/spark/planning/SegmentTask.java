package io.arrowlog.spark.planning;

import io.arrowlog.spark.format.Segment;
import org.apache.spark.sql.connector.read.InputPartition;

/**
 * One task of a plan: consecutive visible segments of one partition, and the topic's
 * schema (an Arrow IPC schema message) they must hold.
 */
public record SegmentTask(
    String topic, int partition, long rows, long bytes, Segment[] segments, byte[] schema)
    implements InputPartition {}
