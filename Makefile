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
# The CDK CLI and the Node it runs on (22, npm's node-<platform> package: the binary itself),
# pinned in package.json/package-lock.json and installed into node_modules/. node_modules/.bin
# comes first on PATH: the CLI, jsii (which the CDK app's Python starts; see stacks/node.py),
# npm and LocalStack's Node Lambda runtime run on it, not on the machine's Node.
NODE_STAMP := node_modules/.installed
CDK := node_modules/.bin/cdk
export PATH := $(CURDIR)/node_modules/.bin:$(PATH)

.PHONY: setup demo test check lint typecheck imports unit clean node synth rabbitmq lock localstack test-localstack scanners chromium console-screenshots

$(STAMP): requirements-dev.txt pyproject.toml setup.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) install -r requirements-dev.txt
	$(PIP) install --no-deps --no-build-isolation -e .
	touch $@

# The compaction job's Java half (glue_jobs/java/): compiled against the jars of the pinned
# pyspark, for Java 11 and later (Glue 5 runs 17); byte for byte the same on every build (a
# fixed entry date), so the CDK asset only changes with the code. javac comes from Debian when
# missing.
GLUE_LIB := glue_jobs/lib
GLUE_JAR := $(GLUE_LIB)/rdss-glue.jar
GLUE_JAVA := $(wildcard glue_jobs/java/rdss/glue/*.java)
# A class-data-sharing archive recorded from one small local Spark run: later runs map the
# classes instead of loading them (seconds of every local job's start-up on this machine).
SPARK_CDS := $(GLUE_LIB)/spark-classes.jsa

$(GLUE_JAR): $(GLUE_JAVA) $(STAMP)
	command -v javac >/dev/null || (apt-get update -qq && apt-get install -y -qq --no-install-recommends openjdk-17-jdk-headless)
	rm -rf build/glue-classes && mkdir -p build/glue-classes $(GLUE_LIB)
	javac -Xlint:all,-path -Werror --release 11 -d build/glue-classes \
	  -cp "$$($(BIN)/python -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent / "jars")')/*" $(GLUE_JAVA)
	jar --create --date=2000-01-01T00:00:00Z --file $@ -C build/glue-classes .

$(SPARK_CDS): $(GLUE_JAR) glue_jobs/audit_compaction.py
	$(BIN)/python -m tools.sparkcds $@

setup: $(STAMP) $(GLUE_JAR) $(SPARK_CDS)

# The one lock: requirements.lock pins everything pyproject.toml declares (all extras) for every
# Python and platform the project meets (3.11 here, 3.12 on Lambda). requirements.txt (the
# runtime: core, amqp, local, tracing, console), requirements-dev.txt (all extras: what `make test`
# installs) and lambdas/requirements.txt (what a Lambda asset installs) are generated from it.
# After changing a dependency in pyproject.toml: `make lock`, commit all four. Pinned versions
# are kept unless pyproject.toml rules them out; `make lock UPGRADE=--upgrade-package=NAME`.
UPGRADE ?=
UV_COMPILE = $(BIN)/uv pip compile --quiet --universal --no-emit-index-url --custom-compile-command "make lock"

lock: $(STAMP)
	$(UV_COMPILE) $(UPGRADE) --python-version 3.11 --all-extras pyproject.toml -o requirements.lock
	$(UV_COMPILE) -c requirements.lock --python-version 3.11 --extra amqp --extra local --extra tracing --extra console pyproject.toml -o requirements.txt
	$(UV_COMPILE) -c requirements.lock --python-version 3.11 --all-extras pyproject.toml -o requirements-dev.txt
	$(UV_COMPILE) -c requirements.lock --python-version 3.12 lambdas/requirements.in -o lambdas/requirements.txt
	@# LocalStack's own venv (make localstack): Python 3.13 on this machine's platform, a lock of its own
	$(BIN)/uv pip compile --quiet --no-emit-index-url --custom-compile-command "make lock" --python-version 3.13 \
	  --python-platform x86_64-unknown-linux-gnu tests/support/localstack/requirements.in -o tests/support/localstack/requirements.txt
	@# Lambda's python3.12 runtime as LocalStack's process executor runs it: boto3 held to the lock's pin
	$(BIN)/uv pip compile --quiet --no-emit-index-url --custom-compile-command "make lock" -c requirements.lock --python-version 3.12 \
	  --python-platform x86_64-unknown-linux-gnu tests/support/localstack/runtimes/python3.12.in -o tests/support/localstack/runtimes/python3.12.txt

$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

node: $(NODE_STAMP)

# RabbitMQ for the amqp:// tests: Debian's rabbitmq-server, installed once (needs root and
# apt-get). The tests start a private node of their own; the system service is never used.
RABBITMQ := /usr/lib/rabbitmq/bin/rabbitmq-server

$(RABBITMQ): | $(STAMP)
	$(BIN)/python -m tests.support.rabbitmq install

rabbitmq: $(RABBITMQ)

# Chromium and its WebDriver for the console's browser tests (tests/console): Debian's chromium
# and chromium-driver, installed once (needs root and apt-get); selenium drives them headless.
CHROMEDRIVER := /usr/bin/chromedriver

$(CHROMEDRIVER):
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium chromium-driver

chromium: $(CHROMEDRIVER)

# The docs' pictures of the console (docs/console.md): the screenshots the last run of
# tests/console (the pages) and tests/glue (the report, in the console and as a file) took under
# build/console/, each one the page shows copied beside it.
console-screenshots:
	mkdir -p docs/images
	for image in $$(grep -o 'images/[a-z-]*\.png' docs/console.md | sort -u); do cp build/console/$${image#images/} docs/$$image; done

# cfn-lint and checkov, which tests/cdk/test_scanners.py runs over every environment's
# template: a virtualenv of their own, because checkov pins libraries the project pins differently.
SCANNERS := .venv-scanners
SCANNERS_STAMP := $(SCANNERS)/.installed

$(SCANNERS_STAMP): requirements-scanners.txt
	test -x $(SCANNERS)/bin/python || $(PYTHON) -m venv $(SCANNERS)
	$(SCANNERS)/bin/pip --disable-pip-version-check --quiet install -r requirements-scanners.txt
	touch $@

scanners: $(SCANNERS_STAMP)

# `make synth ENV=prod`: the CloudFormation template, Lambda and Glue assets and cdk-nag's
# validation report (cdk.out/validation-report.json) of one environment. Needs no AWS
# credentials and no Docker; PyPI only the first time (the Lambda wheels are cached in .cache/).
synth: setup node
	CDK_DISABLE_VERSION_CHECK=1 $(CDK) synth -c env=$(ENV) --quiet --no-notices
	@$(BIN)/python -c 'import json; r = json.load(open("cdk.out/validation-report.json")); \
	  n = sum(len(v["violatingConstructs"]) for p in r["pluginReports"] for v in p["violations"]); \
	  print(f"cdk.out/rdss-$(ENV).template.json written; cdk-nag: {n} unacknowledged finding(s)")'

demo: setup
	$(BIN)/python -m rdss local demo

# LocalStack community in host mode, set up under .localstack/ from PyPI, npm and Debian alone
# (tests/support/localstack/install.py): needs a Python >= 3.13 (pyenv's) and says so if none.
# Its Lambda runs functions as local processes (a plugin of ours): Python 3.12 (pyenv's) with
# awslambdaric, and Node with aws-lambda-ric, whose native client npm builds (cmake, make, g++).
localstack: $(STAMP) node
	$(BIN)/python -m tests.support.localstack install

# The integration suite against a LocalStack of its own on a free loopback port, stopped after.
test-localstack: localstack
	$(BIN)/python -m tests.support.localstack run -- $(BIN)/python -m pytest -p no:cacheprovider -rs -n 3 --dist loadscope tests/integration

# Every suite, side by side (tests/support/suites.py): unit, cdk, glue, amqp, package, and the
# integration suite twice - on the embedded moto and on LocalStack. Each suite's time is printed.
test: setup node rabbitmq localstack scanners chromium lint typecheck imports
	$(BIN)/python -m tests.support.suites

# The quick loop, once set up: ruff, mypy, the import contracts and the unit and CDK suites side
# by side (no emulator, no Spark, no RabbitMQ, no LocalStack). `make test` runs everything.
check: setup node scanners lint typecheck imports
	$(BIN)/python -m tests.support.suites unit cdk

# The package's layers, no circle between sibling modules, nothing from tests/, tools/ or
# glue_jobs/ (.importlinter; ARCHITECTURE.md's code map says why).
imports: setup
	$(BIN)/lint-imports --no-cache

lint: setup
	$(BIN)/ruff check rdss tools tests glue_jobs app.py stacks
	$(BIN)/ruff format --check rdss tools tests glue_jobs app.py stacks

typecheck: setup
	$(BIN)/mypy

clean:
	rm -rf $(VENV) $(SCANNERS) .localstack build $(GLUE_LIB) *.egg-info rdss/*.so .pytest_cache .mypy_cache .ruff_cache .hypothesis
