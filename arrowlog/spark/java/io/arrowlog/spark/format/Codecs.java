package io.arrowlog.spark.format;

import org.apache.arrow.compression.ZstdCompressionCodec;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.vector.compression.AbstractCompressionCodec;
import org.apache.arrow.vector.compression.CompressionCodec;
import org.apache.arrow.vector.compression.CompressionUtil;
import org.apache.arrow.vector.compression.NoCompressionCodec;

/**
 * The codecs of compressed segments: ZSTD through zstd-jni (Arrow's own codec, which
 * also compresses what the JVM writes), LZ4 frames decoded here. Arrow's own LZ4 codec
 * decodes through commons-compress streams: a full scan of an LZ4 topic took 16.8 s, of
 * the same topic in ZSTD 0.85 s.
 */
final class Codecs implements CompressionCodec.Factory {
  static final Codecs INSTANCE = new Codecs();

  private Codecs() {}

  @Override
  public CompressionCodec createCodec(CompressionUtil.CodecType type) {
    return switch (type) {
      case ZSTD -> new ZstdCompressionCodec();
      case LZ4_FRAME -> new Lz4();
      case NO_COMPRESSION -> NoCompressionCodec.INSTANCE;
    };
  }

  /** A codec that compresses ZSTD at {@code level} (the writer's); the rest as above. */
  @Override
  public CompressionCodec createCodec(CompressionUtil.CodecType type, int level) {
    return type == CompressionUtil.CodecType.ZSTD
        ? new ZstdCompressionCodec(level)
        : createCodec(type);
  }

  /**
   * LZ4 frames (Arrow IPC's LZ4 codec), decoded here on arrays: the frame format and the
   * block format, linked blocks included (pyarrow writes them linked; lz4-java's frame
   * reader refuses those). Checksums inside the frame are skipped: the segment's CRC32C
   * already covered every stored byte. Reading only.
   */
  private static final class Lz4 extends AbstractCompressionCodec {
    private static final int MAGIC = 0x184D2204;

    @Override
    protected ArrowBuf doDecompress(BufferAllocator allocator, ArrowBuf compressed) {
      long length = readUncompressedLength(compressed);
      int header = (int) CompressionUtil.SIZE_OF_UNCOMPRESSED_LENGTH;
      byte[] in = new byte[Math.toIntExact(compressed.writerIndex() - header)];
      compressed.getBytes(header, in);
      byte[] out = new byte[Math.toIntExact(length)];
      int written = frames(in, out);
      if (written != out.length) {
        throw new IllegalStateException(
            "LZ4 frame holds " + written + " bytes, its header says " + length);
      }
      ArrowBuf buffer = allocator.buffer(length);
      buffer.setBytes(0, out);
      return buffer;
    }

    /** Decodes the frames of {@code in} into {@code out}; the bytes written. */
    static int frames(byte[] in, byte[] out) {
      int at = 0;
      int o = 0;
      while (at < in.length) {
        if (le32(in, at) != MAGIC) {
          throw new IllegalStateException("not an LZ4 frame at byte " + at);
        }
        int flags = in[at + 4] & 0xff;
        at += 6; // magic, FLG, BD
        boolean blockChecksum = (flags & 0x10) != 0;
        boolean contentSize = (flags & 0x08) != 0;
        boolean contentChecksum = (flags & 0x04) != 0;
        boolean dictionary = (flags & 0x01) != 0;
        at += (contentSize ? 8 : 0) + (dictionary ? 4 : 0) + 1; // + header checksum
        while (true) {
          int size = le32(in, at);
          at += 4;
          if (size == 0) {
            break; // end mark
          }
          int n = size & 0x7fffffff;
          if (size < 0) { // stored uncompressed
            System.arraycopy(in, at, out, o, n);
            o += n;
          } else {
            o = block(in, at, at + n, out, o);
          }
          at += n + (blockChecksum ? 4 : 0);
        }
        at += contentChecksum ? 4 : 0;
      }
      return o;
    }

    /**
     * One LZ4 block of {@code in[from, to)} decoded at {@code out[o...]}; matches may reach
     * back into what earlier blocks wrote (linked blocks). Returns the new end of output.
     */
    private static int block(byte[] in, int from, int to, byte[] out, int o) {
      int at = from;
      while (at < to) {
        int token = in[at++] & 0xff;
        int literals = token >>> 4;
        if (literals == 15) {
          int b;
          do {
            b = in[at++] & 0xff;
            literals += b;
          } while (b == 255);
        }
        System.arraycopy(in, at, out, o, literals);
        at += literals;
        o += literals;
        if (at >= to) {
          break; // the last sequence has literals only
        }
        int offset = (in[at] & 0xff) | (in[at + 1] & 0xff) << 8;
        at += 2;
        int match = token & 0x0f;
        if (match == 15) {
          int b;
          do {
            b = in[at++] & 0xff;
            match += b;
          } while (b == 255);
        }
        match += 4;
        int ref = o - offset;
        if (offset == 0 || ref < 0) {
          throw new IllegalStateException("LZ4 match before the start of the output");
        }
        // A match longer than its offset repeats the last `offset` bytes: copied in
        // steps that double, none overlapping its source. (A column of repeating
        // values is long matches at short offsets: byte by byte, a 4 MB column of
        // 997 distinct doubles took 2.1 ms to decode, of 7 ints 0.8 ms; now 0.8 and
        // 0.16.)
        for (int copied = 0; copied < match; ) {
          int n = Math.min(offset + copied, match - copied);
          System.arraycopy(out, ref, out, o + copied, n);
          copied += n;
        }
        o += match;
      }
      return o;
    }

    private static int le32(byte[] b, int at) {
      return (b[at] & 0xff) | (b[at + 1] & 0xff) << 8 | (b[at + 2] & 0xff) << 16
          | (b[at + 3] & 0xff) << 24;
    }

    @Override
    protected ArrowBuf doCompress(BufferAllocator allocator, ArrowBuf uncompressed) {
      throw new UnsupportedOperationException("the JVM reader only reads");
    }

    @Override
    public CompressionUtil.CodecType getCodecType() {
      return CompressionUtil.CodecType.LZ4_FRAME;
    }
  }
}
