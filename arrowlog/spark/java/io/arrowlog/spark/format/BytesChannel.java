package io.arrowlog.spark.format;

import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;

/**
 * A channel over bytes already in memory that hands them out in bulk, and can skip.
 * (Arrow's reader over an {@code InputStream} goes through {@code Channels.newChannel},
 * which copies in 8 KiB steps: most of the time of reading a large segment.)
 */
final class BytesChannel implements ReadableByteChannel {
  private final ByteBuffer source;
  private final int origin;
  private boolean open = true;

  BytesChannel(byte[] data, int offset, int length) {
    this(ByteBuffer.wrap(data, offset, length));
  }

  /** The bytes of {@code source} from its position to its limit. */
  BytesChannel(ByteBuffer source) {
    this.source = source;
    this.origin = source.position();
  }

  @Override
  public int read(ByteBuffer dst) {
    if (!source.hasRemaining()) {
      return -1;
    }
    int n = Math.min(dst.remaining(), source.remaining());
    ByteBuffer slice = source.slice();
    slice.limit(n);
    dst.put(slice);
    source.position(source.position() + n);
    return n;
  }

  /** The bytes handed out or skipped so far. */
  long position() {
    return source.position() - origin;
  }

  /** Passes over {@code n} bytes; false (and no move) if fewer are left. */
  boolean skip(long n) {
    if (n < 0 || n > source.remaining()) {
      return false;
    }
    source.position(source.position() + (int) n);
    return true;
  }

  @Override
  public boolean isOpen() {
    return open;
  }

  @Override
  public void close() {
    open = false;
  }
}
