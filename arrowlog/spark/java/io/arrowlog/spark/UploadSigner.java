package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.Planner;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/**
 * The driver's signer of a JVM write to a store executors have no credentials for: an
 * HTTP endpoint, for the job's lifetime, where a task asks for a pre-signed PUT URL of
 * each staged object it is about to upload (the planner signs it with the driver's
 * credentials, and only a staged object of a transaction under the topic's partitions).
 * Requests carry the job's random token; the executors learn the address and the token
 * from the writer factory, as they learn a read's pre-signed GET URLs from its plan.
 */
final class UploadSigner implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  private final HttpServer server;
  private final ExecutorService threads;
  private final byte[] token;
  private final String address;

  UploadSigner(String bind, String host, Planner planner, Map<String, String> options, JsonNode begun) {
    byte[] secret = new byte[16];
    new SecureRandom().nextBytes(secret);
    token = HexFormat.of().formatHex(secret).getBytes(StandardCharsets.US_ASCII);
    try {
      server = HttpServer.create(new InetSocketAddress(bind, 0), 0);
    } catch (IOException e) {
      throw new ArrowLogException("StoreError", "cannot start the upload signer on " + bind, e);
    }
    threads =
        Executors.newFixedThreadPool(
            4,
            r -> {
              Thread t = new Thread(r, "arrowlog-upload-signer");
              t.setDaemon(true);
              return t;
            });
    server.setExecutor(threads);
    server.createContext("/sign", exchange -> answer(exchange, planner, options, begun));
    server.start();
    address = "http://" + host + ":" + server.getAddress().getPort() + "/sign";
  }

  /** Where tasks ask. */
  String address() {
    return address;
  }

  /** The job's token, which every request must carry. */
  String token() {
    return new String(token, StandardCharsets.US_ASCII);
  }

  private void answer(
      HttpExchange exchange, Planner planner, Map<String, String> options, JsonNode begun)
      throws IOException {
    try (exchange) {
      JsonNode request;
      try (InputStream in = exchange.getRequestBody()) {
        request = JSON.readTree(in);
      } catch (IOException e) {
        reply(exchange, 400, "{\"error\":\"not JSON\"}");
        return;
      }
      byte[] sent = request.path("token").asText().getBytes(StandardCharsets.US_ASCII);
      if (!MessageDigest.isEqual(sent, token)) {
        reply(exchange, 403, "{\"error\":\"wrong token\"}");
        return;
      }
      JsonNode keys = request.path("keys");
      try {
        JsonNode signed =
            planner.write(
                PlanWire.WRITE_SIGN,
                options,
                r -> {
                  r.set("begun", begun);
                  r.set("keys", keys.isArray() ? keys : JSON.createArrayNode());
                });
        ArrayNode urls = (ArrayNode) signed.path("urls");
        reply(exchange, 200, JSON.createObjectNode().set("urls", urls).toString());
      } catch (ArrowLogException e) {
        reply(exchange, 400, JSON.createObjectNode().put("error", e.getMessage()).toString());
      }
    }
  }

  private static void reply(HttpExchange exchange, int status, String body) throws IOException {
    byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    exchange.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }

  @Override
  public void close() {
    server.stop(0);
    threads.shutdownNow();
  }
}
