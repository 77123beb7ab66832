package io.arrowlog.spark;

import org.apache.spark.sql.types.StructType;

/**
 * The names of the metadata columns, the last four of a read's schema: {@code topic},
 * {@code partition}, {@code offset}, {@code timestamp}, each with a {@code _} prefix
 * where a topic column already has the name.
 */
record MetadataColumns(String topic, String partition, String offset, String timestamp)
    implements java.io.Serializable {
  static MetadataColumns of(StructType schema) {
    String[] names = schema.fieldNames();
    int n = names.length;
    return new MetadataColumns(names[n - 4], names[n - 3], names[n - 2], names[n - 1]);
  }

  boolean contains(String name) {
    return name.equals(topic) || name.equals(partition) || name.equals(offset)
        || name.equals(timestamp);
  }

  /** How many of a read schema's columns are the topic's own. */
  static int dataColumns(StructType schema) {
    return schema.fields().length - 4;
  }
}
