package io.arrowlog.spark;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;

/** The bytes of a segment, from a local path or a pre-signed URL; a few retries. */
final class Fetch {
  private static final HttpClient HTTP =
      HttpClient.newBuilder()
          .connectTimeout(Duration.ofSeconds(10))
          .followRedirects(HttpClient.Redirect.NORMAL)
          .build();
  private static final int ATTEMPTS = 5;

  private Fetch() {}

  static byte[] bytes(SegmentTask.Segment segment) {
    String location = segment.location();
    boolean http = location.startsWith("http://") || location.startsWith("https://");
    IOException last = null;
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
      try {
        return http ? get(location, segment) : Files.readAllBytes(Path.of(location));
      } catch (NoSuchFileException e) {
        throw missing(segment);
      } catch (IOException e) {
        last = e;
        sleep(attempt);
      }
    }
    throw new ArrowLogException(
        "StoreError", segment.key() + ": cannot read: " + last, last);
  }

  private static byte[] get(String url, SegmentTask.Segment segment) throws IOException {
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(120)).GET().build();
    HttpResponse<byte[]> response;
    try {
      response = HTTP.send(request, HttpResponse.BodyHandlers.ofByteArray());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("interrupted", e);
    }
    int status = response.statusCode();
    if (status == 200) {
      return response.body();
    }
    if (status == 404) {
      throw missing(segment);
    }
    if (status == 403) {
      throw new ArrowLogException(
          "StoreError",
          segment.key() + ": GET refused (403): has its pre-signed URL expired?");
    }
    throw new IOException("GET " + segment.key() + ": HTTP " + status);
  }

  private static ArrowLogException missing(SegmentTask.Segment segment) {
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
