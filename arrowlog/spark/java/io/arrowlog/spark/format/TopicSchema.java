package io.arrowlog.spark.format;

import io.arrowlog.spark.errors.ArrowLogException;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.arrow.vector.dictionary.Dictionary;
import org.apache.arrow.vector.dictionary.DictionaryProvider;
import org.apache.arrow.vector.ipc.ReadChannel;
import org.apache.arrow.vector.ipc.message.MessageSerializer;
import org.apache.arrow.vector.types.pojo.DictionaryEncoding;
import org.apache.arrow.vector.types.pojo.Field;
import org.apache.arrow.vector.types.pojo.FieldType;
import org.apache.arrow.vector.types.pojo.Schema;

/**
 * The topic's Arrow schema, as the plan carries it (an IPC schema message): a segment
 * whose columns are not exactly these (names, types, nullability, nested fields) is
 * refused, as the Python reader refuses it, before any value is read.
 */
public final class TopicSchema {
  private TopicSchema() {}

  public static Schema parse(byte[] message) {
    try {
      return MessageSerializer.deserializeSchema(
          new ReadChannel(new BytesChannel(message, 0, message.length)));
    } catch (IOException e) {
      throw new ArrowLogException("ArrowLogError", "unreadable topic schema in the plan: " + e, e);
    }
  }

  /**
   * Refuse a segment of {@code found} columns where the topic has {@code topic}'s (a
   * dictionary-encoded column compared by its dictionary's type, from {@code
   * dictionaries}).
   */
  static void check(Schema found, Schema topic, DictionaryProvider dictionaries, String key) {
    List<Field> decoded = new ArrayList<>();
    for (Field f : found.getFields()) {
      DictionaryEncoding encoding = f.getDictionary();
      Dictionary dictionary = encoding == null ? null : dictionaries.lookup(encoding.getId());
      decoded.add(
          dictionary == null
              ? f
              : new Field(
                  f.getName(),
                  new FieldType(f.isNullable(), dictionary.getVectorType(), null),
                  f.getChildren()));
    }
    if (!same(decoded, topic.getFields())) {
      throw SegmentFile.corrupt(
          "segment holds columns " + found.getFields() + " where the topic has "
              + topic.getFields(),
          key);
    }
  }

  /** Equal fields; a dictionary-encoded one (as segments store strings) by its values. */
  private static boolean same(List<Field> a, List<Field> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      Field x = a.get(i);
      Field y = b.get(i);
      if (!x.getName().equals(y.getName())
          || x.isNullable() != y.isNullable()
          || !x.getType().equals(y.getType())
          || !same(x.getChildren(), y.getChildren())) {
        return false;
      }
    }
    return true;
  }
}
