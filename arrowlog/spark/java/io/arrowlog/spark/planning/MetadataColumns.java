package io.arrowlog.spark.planning;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The names of a read's metadata columns, by role: {@code topic}, {@code partition},
 * {@code offset}, {@code timestamp}. The planner names them (a role's name takes a {@code
 * _} prefix where a topic column has it: arrowlog.scan.metadata_names) and sends them in
 * its answers ({@link PlanWire#METADATA_COLUMNS}, keyed by {@link #ROLES}); the reader
 * finds each column by its name.
 */
public record MetadataColumns(String topic, String partition, String offset, String timestamp)
    implements Serializable {
  /** The roles, as the plan wire keys the names (arrowlog.scan.METADATA_COLUMNS). */
  public static final List<String> ROLES = List.of("topic", "partition", "offset", "timestamp");

  /** The names an answer gives ({@code names}: its metadata_columns object); null if none. */
  static MetadataColumns of(JsonNode names) {
    if (names == null || !names.isObject()) {
      return null;
    }
    String[] by = new String[ROLES.size()];
    for (int i = 0; i < by.length; i++) {
      JsonNode name = names.get(ROLES.get(i));
      if (name == null || !name.isTextual()) {
        return null;
      }
      by[i] = name.asText();
    }
    return new MetadataColumns(by[0], by[1], by[2], by[3]);
  }

  public boolean contains(String name) {
    return name.equals(topic) || name.equals(partition) || name.equals(offset)
        || name.equals(timestamp);
  }

  /** Whether {@code schema} has every one of these columns. */
  public boolean in(StructType schema) {
    List<String> names = List.of(schema.fieldNames());
    return names.contains(topic) && names.contains(partition) && names.contains(offset)
        && names.contains(timestamp);
  }

  /** The names of {@code schema}'s other columns (the topic's), in its order. */
  public List<String> dataColumns(StructType schema) {
    List<String> out = new ArrayList<>();
    for (StructField f : schema.fields()) {
      if (!contains(f.name())) {
        out.add(f.name());
      }
    }
    return out;
  }
}
