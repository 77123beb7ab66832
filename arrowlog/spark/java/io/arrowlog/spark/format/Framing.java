package io.arrowlog.spark.format;

import io.arrowlog.spark.errors.ArrowLogException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.zip.CRC32C;
import org.apache.arrow.memory.ArrowBuf;

/**
 * A segment's framing: an Arrow IPC file whose whole-file CRC32C sits, as 8 hex digits
 * after a tag, in the schema message and in the footer; the CRC is computed with both
 * written as dashes (arrowlog/segment/framing.py holds the same rules).
 */
final class Framing {
  private static final byte[] MAGIC = "ARROW1".getBytes(StandardCharsets.US_ASCII);
  private static final byte[] TAG = "arrowlog-crc32c:".getBytes(StandardCharsets.US_ASCII);
  /** The CRC's 8 characters as they are when the CRC is taken. */
  static final byte[] PLACEHOLDER = "--------".getBytes(StandardCharsets.US_ASCII);

  private Framing() {}

  /**
   * The framing, and the CRC over the whole file (in Arrow memory: the CRC reads it
   * there; only the schema message and the footer, where the checksum fields are, are
   * copied out to be searched).
   */
  static void verify(ArrowBuf data, String key) {
    long size = data.capacity();
    if (size < 26 || size > Integer.MAX_VALUE) {
      throw corrupt("not an Arrow IPC file (" + size + " bytes; truncated?)", key);
    }
    int n = (int) size;
    byte[] head = bytes(data, 0, 16);
    byte[] tail = bytes(data, n - 10, n);
    if (!Arrays.equals(head, 0, 6, MAGIC, 0, 6) || !Arrays.equals(tail, 4, 10, MAGIC, 0, 6)) {
      throw corrupt("not an Arrow IPC file (" + n + " bytes; truncated?)", key);
    }
    int continuation = le32(head, 8);
    int schemaLength = le32(head, 12);
    int footerLength = le32(tail, 0);
    if (continuation != -1 || schemaLength <= 0 || footerLength <= 0) {
      throw corrupt("bad IPC framing", key);
    }
    long schemaEnd = 16L + schemaLength;
    long footerStart = (long) n - 10 - footerLength;
    if (!(schemaEnd <= footerStart && footerStart < n - 10)) {
      throw corrupt("bad IPC framing (overlapping regions)", key);
    }
    byte[] schema = bytes(data, 16, (int) schemaEnd);
    byte[] footer = bytes(data, (int) footerStart, n - 10);
    int a = 16 + slot(schema, 0, schema.length, key);
    int b = (int) footerStart + slot(footer, 0, footer.length, key);
    String stored = new String(schema, a - 16, 8, StandardCharsets.US_ASCII);
    if (!stored.equals(new String(footer, b - (int) footerStart, 8, StandardCharsets.US_ASCII))) {
      throw corrupt("checksum fields disagree", key);
    }
    CRC32C crc = new CRC32C();
    crc.update(data.nioBuffer(0, a));
    crc.update(PLACEHOLDER);
    crc.update(data.nioBuffer(a + 8, b - a - 8));
    crc.update(PLACEHOLDER);
    crc.update(data.nioBuffer(b + 8, n - b - 8));
    if (stored.equals("--------") || !stored.equals(String.format("%08x", crc.getValue()))) {
      throw corrupt("checksum mismatch", key);
    }
  }

  /** Bytes {@code [from, to)} of {@code data}, copied out. */
  private static byte[] bytes(ArrowBuf data, int from, int to) {
    byte[] out = new byte[to - from];
    data.getBytes(from, out);
    return out;
  }

  /** Where the CRC's 8 characters sit in {@code [lo, hi)}: exactly one tagged value. */
  static int slot(byte[] data, int lo, int hi, String key) {
    int found = -1;
    int count = 0;
    for (int i = lo; i + TAG.length + 8 <= hi; i++) {
      if (data[i] == TAG[0]
          && Arrays.equals(data, i, i + TAG.length, TAG, 0, TAG.length)
          && value(data, i + TAG.length)) {
        found = i + TAG.length;
        count++;
      }
    }
    if (count != 1) {
      throw corrupt("checksum field missing or repeated", key);
    }
    return found;
  }

  private static boolean value(byte[] data, int at) {
    boolean dashes = true;
    boolean hex = true;
    for (int i = at; i < at + 8; i++) {
      byte c = data[i];
      dashes &= c == '-';
      hex &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
    }
    return dashes || hex;
  }

  static int le32(byte[] b, int at) {
    return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16
        | (b[at + 3] & 0xff) << 24;
  }

  /** A {@code CorruptSegmentError} about the object at {@code key}. */
  static ArrowLogException corrupt(String message, String key) {
    return new ArrowLogException("CorruptSegmentError", key + ": " + message);
  }
}
