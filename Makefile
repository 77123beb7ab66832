# Two commands do everything on a fresh machine:
#   make demo   set up, then run the main job on a local-directory store
#   make test   set up, then run lint, type checks and the whole test suite, and
#               test-spark-min
#   make test-fast   the inner loop: memory and local stores, no Spark session,
#               no S3 server, no processes started (docs/testing.md)
#   make test-spark-min   a Spark subset under the lowest pyspark the spark extra
#               allows (its own venv, .venv-spark-min; about 2 min, 5 on first run)
#   make test-spark-cluster   the Spark read tests in local-cluster mode
#   make soak   a long soak (SOAK_SECONDS per store, local and SeaweedFS) with the
#               history checker and the Spark writer; SOAK_SEED=S replays a run's plan
# Setup is a virtualenv in .venv with the project installed; it is redone when
# pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pyproject.toml and this file decide the install: a change to either redoes it
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)

.PHONY: setup demo test test-fast test-spark-min test-spark-cluster lint bench soak clean

# An editable install as a user's `pip install -e .` makes it (pyproject.toml's
# package-dir makes it a static .pth entry, which Spark's data source lookup sees).
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# The JVM reader (arrowlog/spark/java/, Java 17): compiled against the jars inside
# the installed pyspark wheel, no Maven and no network, by the same function that
# compiles it on first use where a wheel came without it (arrowlog.spark.jvm.build_jar;
# here javac's lint warnings are errors). The jar goes into the package, so a wheel
# built after setup carries it (arrowlog.spark.configure adds it to a session).
# jvm/src/test is the self-test that tests/jvm/test_golden_contract.py compiles and
# runs against the golden files; it is not in the jar.
JAR      := arrowlog/spark/jars/arrowlog-spark.jar
JAVA_SRC := $(shell find arrowlog/spark/java -type f 2>/dev/null)
$(JAR): $(STAMP) $(JAVA_SRC)
	$(BIN)/python -c 'from arrowlog.spark.jvm import build_jar; build_jar("$(JAR)", strict=True)'

setup: $(STAMP) $(JAR)

demo: setup
	$(BIN)/python -m arrowlog.jobs.demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Two workers, each test file on one of them (module fixtures stay whole): the
# main suite took 26 min on 2 cores alone and 16 with two workers. The wheel of a
# clean clone compiling its JVM reader on first use runs in test-spark-min alone
# (under the lowest pyspark; setup compiles the jar against the newest with the
# same build_jar): a minute of the suite's time, twice. The two Spark passes after
# the suite run at once, each printed whole as it ends (neither keeps both cores
# busy: 149 s together against 190 one after the other).
CLEAN_CLONE_TEST := \
	tests/spark/test_out_of_box.py::test_a_wheel_from_a_clean_clone_compiles_the_jvm_reader_on_first_use
test: lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=25 \
		--deselect $(CLEAN_CLONE_TEST)
	$(MAKE) -j2 --output-sync=target test-spark-min test-spark-cluster

# The inner loop: the tests marked neither s3 nor spark nor slow (slow: a test
# that starts processes, or takes more than a few seconds). No lint, no jar.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n 2 -m "not s3 and not azure and not gcs and not spark and not slow"

# The read tests (both readers, parity, S3) and the JVM writer's again with executors
# in JVMs and Python workers of their own: nothing read or written may depend on the
# driver's process, files or credentials. The rule: one run per path an executor
# takes, a path being a reader (jvm, python) on a store (local, s3) for a feature
# whose work is done in executors (visibility, offset ranges, pushed filters,
# columns, metadata columns, splits, several topics, credentials, registration,
# compressed buffers, compacted segments, errors raised in tasks, streams, writes).
# Left out, as repeats of a kept run:
# - what is decided while planning, on the driver in either mode: option errors,
#   offsets by timestamp, reads below the log start (failOnDataLoss), each query's
#   own snapshot, the memory store refused;
# - python-pushdown where the test pushes no filter (the flag changes nothing
#   then: the python run is the same run), and the python run of a filter test
#   (Spark filters the rows the python reader read, as in consumer_reads);
# - local-directory variants but the first read of each reader (the S3 ones carry
#   the same reads, and the credentials too);
# - the jvm run of the multi-topic and registration tests (the python one covers
#   the workers), LZ4 kept of the large buffers (ZSTD in every_type), the checks
#   made of the segment's own bytes (misplaced column, nanoseconds, a few columns
#   of a large segment: corrupt/missing segment and the columns option carry the
#   executors' part), and the keyed write but for its string keys (routing is
#   computed the same in any process).
CLUSTER_TESTS := not option_errors and not unknown_options and not offsets_by_timestamp \
	and not below_the_log_start and not each_query_of_a_read and not memory_store_is_refused \
	and not (python-pushdown and not (filter or consumer_reads)) \
	and not (filter and (python] or python-s3])) \
	and (not local] or consumer_reads) and not python-pushdown-local] and not local- \
	and not (assign_and_subscribe and not python]) and not (register_by_hand and not python]) \
	and not (large_compressed and zstd) and not misplaces_a_column and not nanoseconds \
	and not few_columns_of_a_large_segment and not (keyed_write and not s3-s])
test-spark-cluster: setup
	ARROWLOG_SPARK_MASTER='local-cluster[2,1,1024]' $(BIN)/python -m pytest -p no:cacheprovider \
		-k '$(CLUSTER_TESTS)' \
		tests/spark/test_spark_read.py tests/spark/test_jvm_reader.py tests/spark/test_jvm_writer.py

# The lower bound of the spark extra, read from pyproject.toml (its one source):
# test-spark-min runs a read, a filtered read, a batch write and streaming reads
# under exactly that pyspark, in a venv of its own (the dev extra pins the newest),
# and a wheel of a clean clone whose JVM reader compiles against it on first use.
SPARK_MIN  := $(shell sed -n 's/^spark = \["pyspark>=\([0-9.]*\),.*/\1/p' pyproject.toml)
MIN_VENV   := .venv-spark-min
MIN_STAMP  := $(MIN_VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)
SPARK_MIN_TESTS := \
	tests/spark/test_pyspark_bound.py \
	tests/spark/test_spark_read.py::test_spark_reads_what_the_consumer_reads \
	tests/spark/test_spark_read.py::test_filters_are_exact_with_and_without_pushdown \
	tests/spark/test_spark_write.py::test_a_job_commits_once_across_partitions \
	tests/spark/test_spark_idempotence.py::test_without_the_jar_session_keys_df_write_cannot_see_refuse_the_job \
	tests/spark/test_spark_streaming.py::test_stream_offsets_take_kafkas_shape_and_old_checkpoints_still_read \
	tests/spark/test_spark_streaming.py::test_streaming_progress_shows_kafka_offsets_and_the_latest \
	$(CLEAN_CLONE_TEST)

# The test runners of the dev extra, without it: it pins the newest pyspark.
$(MIN_STAMP): pyproject.toml Makefile
	test -n "$(SPARK_MIN)" || { echo "no pyspark>= bound in pyproject's spark extra" >&2; exit 1; }
	test -x $(MIN_VENV)/bin/python || $(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -e '.[spark,s3-server]' 'pyspark==$(SPARK_MIN)' \
		pytest pytest-timeout build
	rm -f $(MIN_VENV)/.installed-*
	touch $(MIN_STAMP)

test-spark-min: $(MIN_STAMP)
	ARROWLOG_SPARK_MIN=$(SPARK_MIN) $(MIN_VENV)/bin/python -m pytest -p no:cacheprovider $(SPARK_MIN_TESTS)

# Every suite, then the writers suite (about 5 minutes of its own) and the
# README's plot of it (docs/writers.svg) from the results just measured.
bench: setup
	$(BIN)/python -m bench
	$(BIN)/python -m bench --suite writers
	$(BIN)/python tools/plot_bench.py

SOAK_SECONDS ?= 300
SOAK_SEED ?=
SOAK_ARGS = --seconds $(SOAK_SECONDS) --spark $(if $(SOAK_SEED),--seed $(SOAK_SEED))
soak: $(STAMP)
	$(BIN)/python -m tests.soak --store local $(SOAK_ARGS); local=$$?; \
	$(BIN)/python -m tests.soak --store s3 $(SOAK_ARGS); s3=$$?; \
	test $$local -eq 0 && test $$s3 -eq 0

clean:
	rm -rf demo-store demo-data bench/results .pytest_cache .mypy_cache .ruff_cache .hypothesis \
		arrowlog/spark/jars
