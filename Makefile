# The project's entry points. Every target sets up what it needs first, idempotently:
# a second run with nothing changed skips straight to the work.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ENV ?= dev
PIP := $(BIN)/pip --disable-pip-version-check --quiet

.PHONY: setup demo test lint typecheck unit clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml setup.py rdss/_fastcheck.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements-dev.txt
	$(PIP) install --no-deps --no-build-isolation -e .
	$(BIN)/python -c "import rdss.fastpath as f; assert f.available(), 'the C fast path did not build'"
	touch $@

setup: $(STAMP)

demo: setup
	$(BIN)/python -m rdss tour

test: setup lint typecheck
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check rdss tests glue_jobs
	$(BIN)/ruff format --check rdss tests glue_jobs

typecheck: setup
	$(BIN)/mypy

clean:
	rm -rf $(VENV) build *.egg-info rdss/*.so .pytest_cache .mypy_cache .ruff_cache .hypothesis
