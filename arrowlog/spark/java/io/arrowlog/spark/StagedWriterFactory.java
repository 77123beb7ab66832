package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.format.SegmentWriter;
import java.util.Base64;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;

/**
 * What every task of a JVM write needs, from the driver's {@code write_begin} answer: the
 * topic's Arrow schema, how to cut and encode segments, how to route rows, where to upload,
 * and the job's transaction. No credentials: executors write to the directories named.
 */
final class StagedWriterFactory implements DataWriterFactory {
  private static final long serialVersionUID = 1L;

  /** How a key column's values become the text that routes them (as Python's str()). */
  enum KeyKind {
    STRING,
    LONG,
    INT,
    SHORT,
    BYTE,
    BOOLEAN
  }

  final boolean skip;
  final byte[] schema;
  final SegmentWriter.Codec codec;
  final long budget;
  final long maxBytes;
  final long rowsPerBatch;
  final int keyOrdinal;
  final KeyKind keyKind;
  /** Where no key routes rows: the ordinal of a read's {@code partition} column, or -1. */
  final int partitionOrdinal;

  final KeyKind partitionKind;
  final String partitionName;
  final int partitions;
  final boolean[] nullable;
  final String[] names;
  final String[] directories;
  final String temporary;
  final boolean fsync;
  final long producerId;
  final int epoch;
  final String transactionalId;
  /** Pre-signed uploads: where the driver signs them, and the job's token (else null). */
  final String signer;

  final String token;

  StagedWriterFactory(JsonNode begun, StructType sparkSchema, String signer, String token) {
    this.signer = signer;
    this.token = token;
    skip = begun.path("skip").asBoolean();
    schema = Base64.getDecoder().decode(begun.path("schema").asText());
    codec =
        "zstd".equals(begun.path("codec").asText())
            ? SegmentWriter.Codec.ZSTD
            : SegmentWriter.Codec.NONE;
    budget = begun.path("budget").asLong();
    maxBytes = begun.path("max_bytes").asLong();
    rowsPerBatch = begun.path("rows_per_batch").asLong();
    partitions = begun.path("partitions").asInt();
    JsonNode key = begun.path("key");
    if (key.isNull() || key.isMissingNode()) {
      keyOrdinal = -1;
      keyKind = null;
    } else {
      keyOrdinal = sparkSchema.fieldIndex(key.asText());
      keyKind = kindOf(sparkSchema.fields()[keyOrdinal].dataType(), key.asText());
    }
    JsonNode column = begun.path("partition_column");
    if (column.isNull() || column.isMissingNode()) {
      partitionOrdinal = -1;
      partitionKind = null;
      partitionName = null;
    } else {
      partitionName = column.asText();
      partitionOrdinal = sparkSchema.fieldIndex(partitionName);
      partitionKind = kindOf(sparkSchema.fields()[partitionOrdinal].dataType(), partitionName);
    }
    names = sparkSchema.fieldNames();
    nullable = new boolean[begun.path("nullable").size()]; // the topic's columns
    for (int i = 0; i < nullable.length; i++) {
      nullable[i] = begun.path("nullable").path(i).asBoolean(true);
    }
    JsonNode dirs = begun.path("directories"); // a local directory store's partitions
    directories = new String[dirs.size()];
    for (int i = 0; i < directories.length; i++) {
      directories[i] = dirs.get(i).asText();
    }
    temporary = begun.path("temporary").asText(null);
    fsync = begun.path("fsync").asBoolean();
    producerId = begun.path("producer_id").asLong();
    epoch = begun.path("epoch").asInt();
    transactionalId = begun.path("transactional_id").asText();
  }

  private static KeyKind kindOf(DataType type, String name) {
    if (type instanceof StringType) {
      return KeyKind.STRING;
    }
    if (type instanceof LongType) {
      return KeyKind.LONG;
    }
    if (type instanceof IntegerType) {
      return KeyKind.INT;
    }
    if (type instanceof ShortType) {
      return KeyKind.SHORT;
    }
    if (type instanceof ByteType) {
      return KeyKind.BYTE;
    }
    if (type instanceof BooleanType) {
      return KeyKind.BOOLEAN;
    }
    throw new ArrowLogException(
        "InvalidConfigError", "keyColumn '" + name + "' of type " + type.simpleString());
  }

  @Override
  public DataWriter<InternalRow> createWriter(int partitionId, long taskId) {
    return new StagedDataWriter(this, Math.floorMod(partitionId, partitions));
  }
}
