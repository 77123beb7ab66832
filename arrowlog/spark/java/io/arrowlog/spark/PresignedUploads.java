package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.arrowlog.spark.errors.ArrowLogException;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

/**
 * A task's uploads to a store it has no credentials for: for each staged object it asks
 * the driver's {@link UploadSigner} for a pre-signed PUT URL, then PUTs the bytes there.
 * The key is the object's own (its append id is in it), so a retried PUT writes the same
 * bytes again: failures and throttling are retried, an expired URL is signed again.
 */
final class PresignedUploads {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final int ATTEMPTS = 6;

  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
  private final String signer;
  private final String token;

  PresignedUploads(String signer, String token) {
    this.signer = signer;
    this.token = token;
  }

  /** PUTs {@code data} as the staged object {@code at} of {@code partition}. */
  void put(int partition, String at, byte[] data) {
    String url = null;
    String last = "";
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
      if (attempt > 0) {
        pause(100L << attempt);
      }
      try {
        if (url == null) {
          url = sign(partition, at);
        }
        HttpRequest request =
            HttpRequest.newBuilder(URI.create(url))
                .timeout(Duration.ofSeconds(120))
                .PUT(HttpRequest.BodyPublishers.ofByteArray(data))
                .build();
        HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
        int status = response.statusCode();
        if (status / 100 == 2) {
          return;
        }
        last = "HTTP " + status + " " + firstLine(response.body());
        if (status == 403) {
          url = null; // expired, or signed for another moment: sign again
        } else if (status < 500 && status != 429) {
          throw new ArrowLogException("StoreError", "upload of " + at + " refused: " + last);
        }
      } catch (IOException e) {
        last = e.toString();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new ArrowLogException("StoreError", "interrupted while uploading " + at, e);
      }
    }
    throw new ArrowLogException(
        "TransientStoreError", "upload of " + at + " failed " + ATTEMPTS + " times: " + last);
  }

  private String sign(int partition, String at) throws IOException, InterruptedException {
    ObjectNode body = JSON.createObjectNode().put("token", token);
    body.putArray("keys").addArray().add(partition).add(at);
    HttpRequest request =
        HttpRequest.newBuilder(URI.create(signer))
            .timeout(Duration.ofSeconds(60))
            .POST(HttpRequest.BodyPublishers.ofString(body.toString()))
            .build();
    HttpResponse<String> response = http.send(request, HttpResponse.BodyHandlers.ofString());
    JsonNode answer = JSON.readTree(response.body());
    if (response.statusCode() != 200) {
      throw new ArrowLogException(
          "InvalidConfigError",
          "the driver did not sign the upload of " + at + ": " + answer.path("error").asText());
    }
    return answer.path("urls").path(0).asText();
  }

  private static String firstLine(String body) {
    String line = body == null ? "" : body.strip();
    int end = line.indexOf('\n');
    line = end < 0 ? line : line.substring(0, end);
    return line.length() > 200 ? line.substring(0, 200) : line;
  }

  private static void pause(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new ArrowLogException("StoreError", "interrupted while uploading", e);
    }
  }
}
