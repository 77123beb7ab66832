package io.arrowlog.spark.format;

import io.arrowlog.spark.errors.ArrowLogException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.Arrays;
import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;

/**
 * The bytes of a segment, whole or a byte range of it, from a local path or a pre-signed
 * URL; a few retries.
 */
public final class Fetch {
  private static final HttpClient HTTP =
      HttpClient.newBuilder()
          .connectTimeout(Duration.ofSeconds(10))
          .followRedirects(HttpClient.Redirect.NORMAL)
          .build();
  private static final int ATTEMPTS = 5;

  private Fetch() {}

  /**
   * The whole object, in Arrow memory of {@code allocator} (the caller's to close): a
   * local file is read into it with no copy on the heap.
   */
  public static ArrowBuf object(Segment segment, BufferAllocator allocator) {
    if (isHttp(segment)) {
      return offHeap(retrying(segment, () -> get(segment, null)), allocator);
    }
    return retrying(segment, () -> readFile(segment, allocator));
  }

  /** {@code bytes} copied into Arrow memory of {@code allocator} (the caller's to close). */
  public static ArrowBuf offHeap(byte[] bytes, BufferAllocator allocator) {
    ArrowBuf out = exact(allocator, bytes.length);
    out.setBytes(0, bytes);
    return out;
  }

  /** A buffer of exactly {@code size} bytes (the allocator may round its own up). */
  private static ArrowBuf exact(BufferAllocator allocator, long size) {
    return allocator.buffer(size).slice(0, size);
  }

  private static ArrowBuf readFile(Segment segment, BufferAllocator allocator)
      throws IOException {
    Path path = Path.of(segment.location());
    try (FileChannel file = FileChannel.open(path, StandardOpenOption.READ)) {
      long size = file.size();
      if (size > Integer.MAX_VALUE) {
        throw new ArrowLogException(
            "CorruptSegmentError", segment.key() + ": " + size + " bytes: not a segment");
      }
      ArrowBuf out = exact(allocator, size);
      try {
        ByteBuffer into = out.nioBuffer(0, (int) size);
        while (into.hasRemaining()) {
          if (file.read(into, into.position()) < 0) {
            throw new IOException("ended at " + into.position() + " of " + size + " bytes");
          }
        }
        return out;
      } catch (IOException | RuntimeException e) {
        out.close();
        throw e;
      }
    }
  }

  /** The bytes {@code [lo, hi)} of the object; fewer where the object ends before hi. */
  static byte[] range(Segment segment, long lo, long hi) {
    return retrying(
        segment,
        () -> isHttp(segment) ? get(segment, new long[] {lo, hi}) : read(segment, lo, hi));
  }

  private interface Request<T> {
    T run() throws IOException;
  }

  private static <T> T retrying(Segment segment, Request<T> request) {
    IOException last = null;
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        return request.run();
      } catch (NoSuchFileException e) {
        throw missing(segment);
      } catch (IOException e) {
        last = e;
        sleep(attempt);
      }
    }
    throw new ArrowLogException("StoreError", segment.key() + ": cannot read: " + last, last);
  }

  private static boolean isHttp(Segment segment) {
    String location = segment.location();
    return location.startsWith("http://") || location.startsWith("https://");
  }

  private static byte[] read(Segment segment, long lo, long hi) throws IOException {
    try (FileChannel file = FileChannel.open(Path.of(segment.location()), StandardOpenOption.READ)) {
      ByteBuffer buffer = ByteBuffer.allocate(Math.toIntExact(hi - lo));
      long at = lo;
      while (buffer.hasRemaining()) {
        int n = file.read(buffer, at);
        if (n < 0) {
          break;
        }
        at += n;
      }
      return Arrays.copyOf(buffer.array(), buffer.position());
    }
  }

  /** A GET of the URL, of {@code range} ({lo, hi}) only unless null. */
  private static byte[] get(Segment segment, long[] range) throws IOException {
    HttpRequest.Builder request =
        HttpRequest.newBuilder(URI.create(segment.location())).timeout(Duration.ofSeconds(120));
    if (range != null) {
      request.header("Range", "bytes=" + range[0] + "-" + (range[1] - 1));
    }
    HttpResponse<byte[]> response;
    try {
      response = HTTP.send(request.GET().build(), HttpResponse.BodyHandlers.ofByteArray());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    }
    int status = response.statusCode();
    byte[] body = response.body();
    if (status == 206 && range != null) {
      return body;
    }
    if (status == 200) { // the whole object: a server that ignores ranges, or none asked
      if (range == null) {
        return body;
      }
      int lo = (int) Math.min(range[0], body.length);
      return Arrays.copyOfRange(body, lo, (int) Math.min(range[1], body.length));
    }
    if (status == 416) { // the range starts past the object's end
      return new byte[0];
    }
    if (status == 404) {
      throw missing(segment);
    }
    if (status == 403) {
      throw new ArrowLogException(
          "StoreError", segment.key() + ": GET refused (403): has its pre-signed URL expired?");
    }
    throw new IOException("GET " + segment.key() + ": HTTP " + status);
  }

  private static ArrowLogException missing(Segment segment) {
    return new ArrowLogException(
        "SegmentNotFoundError",
        segment.key() + ": segment missing: the log says it holds [" + segment.base() + ", "
            + segment.end() + "); its records are lost");
  }

  private static void sleep(int attempt) {
    try {
      Thread.sleep(Math.min(1000L, 50L << attempt));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
