package io.arrowlog.spark;

import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;

/**
 * A channel over bytes already in memory that hands them out in bulk. (Arrow's reader
 * over an {@code InputStream} goes through {@code Channels.newChannel}, which copies in
 * 8 KiB steps: most of the time of reading a large segment.)
 */
final class BytesChannel implements ReadableByteChannel {
  private final ByteBuffer source;
  private boolean open = true;

  BytesChannel(byte[] data, int offset, int length) {
    this.source = ByteBuffer.wrap(data, offset, length);
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

  @Override
  public boolean isOpen() {
    return open;
  }

  @Override
  public void close() {
    open = false;
  }
}
