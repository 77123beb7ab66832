# Two commands do everything on a fresh machine:
#   make demo   set up, then run the main job on a local-directory store
#   make test   set up, then run lint, type checks and the whole test suite
#   make soak   a long soak (SOAK_SECONDS per store, local and SeaweedFS) with the
#               history checker; SOAK_SEED=S replays a run's plan
# Setup is a virtualenv in .venv with the project installed; it is redone when
# pyproject.toml changes.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# pyproject.toml and this file decide the install: a change to either redoes it
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml Makefile | cksum | cut -d' ' -f1)

.PHONY: setup demo test lint bench soak clean

# editable_mode=compat puts the checkout on sys.path with a static .pth entry,
# which Spark's data source lookup (pkgutil.iter_modules) sees; setuptools'
# default editable finder hides pyspark_arrowlog from it, and the arrowlog format
# would be found only from the repository root.
$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]' --config-settings editable_mode=compat
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m arrowlog.jobs.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest

bench: $(STAMP)
	$(BIN)/python -m bench

SOAK_SECONDS ?= 300
SOAK_SEED ?=
SOAK_ARGS = --seconds $(SOAK_SECONDS) $(if $(SOAK_SEED),--seed $(SOAK_SEED))
soak: $(STAMP)
	$(BIN)/python -m tests.soak --store local $(SOAK_ARGS); local=$$?; \
	$(BIN)/python -m tests.soak --store s3 $(SOAK_ARGS); s3=$$?; \
	test $$local -eq 0 && test $$s3 -eq 0

clean:
	rm -rf demo-store demo-data bench/results .pytest_cache .mypy_cache .ruff_cache .hypothesis
