package io.arrowlog.spark;

import io.arrowlog.spark.errors.ArrowLogException;
import io.arrowlog.spark.errors.PythonErrors;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.connector.metric.CustomTaskMetric;
import org.apache.spark.sql.connector.write.BatchWrite;
import org.apache.spark.sql.connector.write.DataWriterFactory;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;

/**
 * The Python source's writes, batch and streaming, with their arrowlog errors in one line
 * ({@link PythonErrors}): the Python writer is made, and its options checked, when Spark
 * asks a write for its writer factory. Everything else is the Python write's.
 */
final class PythonWrites implements WriteBuilder, SupportsTruncate {
  private final WriteBuilder python;

  PythonWrites(WriteBuilder python) {
    this.python = python;
  }

  @Override
  public WriteBuilder truncate() {
    if (python instanceof SupportsTruncate truncating) {
      return new PythonWrites(truncating.truncate()); // the Python source refuses it
    }
    throw new ArrowLogException("InvalidConfigError", "arrowlog appends: it cannot overwrite");
  }

  @Override
  public Write build() {
    Write write = python.build();
    return new Write() {
      @Override
      public String description() {
        return write.description();
      }

      @Override
      public BatchWrite toBatch() {
        return new Batch(write.toBatch());
      }

      @Override
      public StreamingWrite toStreaming() {
        return new Streaming(write.toStreaming());
      }

      @Override
      public CustomMetric[] supportedCustomMetrics() {
        return write.supportedCustomMetrics();
      }

      @Override
      public CustomTaskMetric[] reportDriverMetrics() {
        return write.reportDriverMetrics();
      }
    };
  }

  private record Batch(BatchWrite python) implements BatchWrite {
    @Override
    public DataWriterFactory createBatchWriterFactory(PhysicalWriteInfo info) {
      return PythonErrors.oneLine(() -> python.createBatchWriterFactory(info));
    }

    @Override
    public boolean useCommitCoordinator() {
      return python.useCommitCoordinator();
    }

    @Override
    public void onDataWriterCommit(WriterCommitMessage message) {
      python.onDataWriterCommit(message);
    }

    @Override
    public void commit(WriterCommitMessage[] messages) {
      PythonErrors.oneLine(() -> python.commit(messages));
    }

    @Override
    public void abort(WriterCommitMessage[] messages) {
      python.abort(messages);
    }
  }

  private record Streaming(StreamingWrite python) implements StreamingWrite {
    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
      return PythonErrors.oneLine(() -> python.createStreamingWriterFactory(info));
    }

    @Override
    public boolean useCommitCoordinator() {
      return python.useCommitCoordinator();
    }

    @Override
    public void commit(long epoch, WriterCommitMessage[] messages) {
      PythonErrors.oneLine(() -> python.commit(epoch, messages));
    }

    @Override
    public void abort(long epoch, WriterCommitMessage[] messages) {
      python.abort(epoch, messages);
    }
  }
}
