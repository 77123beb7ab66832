package io.arrowlog.spark;

import com.fasterxml.jackson.databind.JsonNode;
import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.planning.PlanWire;
import io.arrowlog.spark.planning.Planner;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.types.StructType;

/**
 * A batch write on the JVM: executors encode and upload staged data objects ({@link
 * StagedDataWriter}), the driver's planner process begins the job's transaction and commits
 * what the task attempts Spark committed (arrowlog/spark/jvm_writing.py). Anything else a
 * builder is asked (an overwrite) is the Python source's to answer.
 */
final class ArrowLogWriteBuilder implements WriteBuilder, SupportsTruncate {
  private final Map<String, String> options;
  private final StructType schema;
  private final Planner planner;
  private final WriteBuilder python;

  ArrowLogWriteBuilder(
      Map<String, String> options, StructType schema, Planner planner, WriteBuilder python) {
    this.options = options;
    this.schema = schema;
    this.planner = planner;
    this.python = python;
  }

  @Override
  public WriteBuilder truncate() {
    if (python instanceof SupportsTruncate truncating) {
      return truncating.truncate();
    }
    throw new ArrowLogException("InvalidConfigError", "arrowlog appends: it cannot overwrite");
  }

  @Override
  public Write build() {
    return new Write() {
      @Override
      public String description() {
        return "arrowlog (JVM writer)";
      }

      @Override
      public BatchWrite toBatch() {
        return new JobWrite(options, schema, planner);
      }
    };
  }

  /** The job: begun when Spark asks for the writers, committed or aborted by the driver. */
  static final class JobWrite implements BatchWrite {
    private final Map<String, String> options;
    private final StructType schema;
    private final Planner planner;
    private JsonNode begun;
    private UploadSigner signer;

    JobWrite(Map<String, String> options, StructType schema, Planner planner) {
      this.options = new HashMap<>(options);
      this.schema = schema;
      this.planner = planner;
    }

    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      begun =
          planner.write(PlanWire.WRITE_BEGIN, options, r -> r.put("schema", schema.json()));
      if (!"presigned".equals(begun.path("upload").asText())) {
        return new StagedWriterFactory(begun, schema, null, null);
      }
      SparkConf conf = SparkSession.active().sparkContext().getConf();
      String host = conf.get("spark.driver.host", "127.0.0.1");
      signer = new UploadSigner(conf.get("spark.driver.bindAddress", host), host, planner, options, begun);
      return new StagedWriterFactory(begun, schema, signer.address(), signer.token());
    }

    @Override
    public boolean useCommitCoordinator() {
      // Spark hands commit() one message per partition (a speculative or
      // retried attempt's objects stay unnamed), so the coordinator adds
      // nothing; with it, a row refused in DataWriter.commit() (where the
      // last rows are encoded and checked) gets its retries denied, and Spark
      // reports "Commit denied" in place of the row's error
      return false;
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
      stopSigner();
      end(PlanWire.WRITE_COMMIT, messages);
    }

    /** Commits or aborts ({@code kind}) the job with the objects of {@code messages}. */
    private void end(String kind, WriterCommitMessage[] messages) {
      planner.write(
          kind,
          options,
          r -> {
            r.set("begun", begun);
            StagedCommit.refs(messages, r.putArray("refs"));
          });
    }

    /** No URL is signed once the tasks are done: a late attempt's upload fails. */
    private void stopSigner() {
      if (signer != null) {
        signer.close();
        signer = null;
      }
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      stopSigner();
      if (begun == null) {
        return; // nothing began
      }
      end(PlanWire.WRITE_ABORT, messages);
    }
  }
}
