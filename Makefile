# Two entry points for a fresh machine: `make demo` and `make test`. Each creates .venv and
# installs what it needs; nothing else has to be installed by hand (Java is checked, and installed
# from Debian's packages when run as root).

# Python writes its bytecode caches, whatever the environment says: the suite starts hundreds of
# interpreters (pytest's workers, the CLI's and the service's processes), and without them each
# compiles kraftlake again and pytest rewrites every test module's asserts again (5 s a worker).
unexport PYTHONDONTWRITEBYTECODE

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO := .demo/log
FIXTURE := fixtures/kraft/jbod-dir-failure.jsonl

.PHONY: demo test test-fast test-thorough lint format bench java chromium prometheus clean examples

$(VENV)/.installed: pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "kraftlake needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $@

# Spark needs Java 17 or newer.
java:
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9][0-9]*\).*/\1/p' | head -n 1); \
	if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "Spark needs Java 17+: installing Debian's openjdk-17-jre-headless"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless >/dev/null; \
	  else \
	    echo "Spark needs Java 17 or newer (found: $${v:-none})."; \
	    echo "  Debian/Ubuntu: sudo apt-get install openjdk-17-jre-headless"; \
	    echo "  macOS:         brew install openjdk@17, then export JAVA_HOME"; \
	    exit 1; \
	  fi; \
	fi

# The picture tests render the HTML report headless: Debian's chromium, installed when missing.
chromium:
	@if [ -z "$$KRAFTLAKE_CHROMIUM" ] && ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "the picture tests need a headless browser: installing Debian's chromium"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "the picture tests need chromium on PATH."; \
	    echo "  Debian/Ubuntu: sudo apt-get install chromium"; \
	    echo "  elsewhere:     any Chromium or Chrome, as 'chromium' on PATH (or KRAFTLAKE_CHROMIUM=/path)"; \
	    exit 1; \
	  fi; \
	fi

# The Prometheus tests check the metrics and the alerting rules with promtool and scrape
# `serve --audit` with a real server: Debian's prometheus (which ships promtool), installed when missing.
prometheus:
	@if [ -z "$$KRAFTLAKE_PROMETHEUS" ] && ! { command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; }; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "the Prometheus tests need prometheus and promtool: installing Debian's prometheus"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; \
	  else \
	    echo "the Prometheus tests need prometheus and promtool on PATH."; \
	    echo "  Debian/Ubuntu: sudo apt-get install prometheus"; \
	    echo "  elsewhere:     Prometheus's release (prometheus and promtool) on PATH, or KRAFTLAKE_PROMETHEUS=/dir/of/both"; \
	    exit 1; \
	  fi; \
	fi

# The main job on the embedded default: local Delta tables under .demo/.
demo: $(VENV)/.installed java
	@rm -rf .demo && mkdir -p .demo
	@echo "--- 1. Kafka's own KIP-858 story (fixtures/): a dir fails, the controller moves leadership off it"
	$(BIN)/kraftlake init $(DEMO)
	head -n 23 $(FIXTURE) | $(BIN)/kraftlake append $(DEMO) - --producer demo-controller --seq 0
	tail -n +24 $(FIXTURE) | $(BIN)/kraftlake append $(DEMO) - --producer demo-controller --seq 1
	tail -n +24 $(FIXTURE) | $(BIN)/kraftlake append $(DEMO) - --producer demo-controller --seq 1
	$(BIN)/kraftlake log $(DEMO) --from 19 --format table
	@echo "--- broker 101 as the controller saw it when dir A1 failed (offset 24), then after it acted:"
	$(BIN)/kraftlake view $(DEMO) --offset 24 --broker 101 --format table
	$(BIN)/kraftlake view $(DEMO) --broker 101 --format table
	$(BIN)/kraftlake history $(DEMO)
	@echo "--- 2. two simulated JBOD clusters (seed 7): a correct controller, and one that ignores offline dirs"
	$(BIN)/kraftlake simulate --seed 7 --records 20000 --out .demo/correct.jsonl
	$(BIN)/kraftlake simulate --seed 7 --records 20000 --bug ignore-offline-dirs --out .demo/buggy.jsonl
	$(BIN)/kraftlake init .demo/correct && $(BIN)/kraftlake append .demo/correct .demo/correct.jsonl
	$(BIN)/kraftlake init .demo/buggy && $(BIN)/kraftlake append .demo/buggy .demo/buggy.jsonl
	$(BIN)/kraftlake snapshot .demo/correct --every 5000
	@echo "--- 3. audits (exit 0 = pass, 1 = violations):"
	$(BIN)/kraftlake audit .demo/correct; echo "exit code $$?"
	$(BIN)/kraftlake audit .demo/buggy; echo "exit code $$?"
	@echo "--- the same audit on Spark (local session; --master URL for a cluster): the same report"
	$(BIN)/kraftlake spark-audit .demo/buggy; echo "exit code $$?"
	@$(BIN)/kraftlake audit .demo/correct --format html --out .demo/correct.html; \
	 $(BIN)/kraftlake audit .demo/buggy --format html --out .demo/buggy.html; \
	 echo "HTML reports: .demo/correct.html .demo/buggy.html"
	$(BIN)/kraftlake maintain $(DEMO)
	@echo "--- the brokers' side of KIP-858: two disks get their directory ids, then a broker that never places its replicas"
	$(BIN)/kraftlake format-dirs --cluster-id demo-cluster --node-id 1 .demo/disks/d1 .demo/disks/d2
	cat .demo/disks/d1/meta.properties
	$(BIN)/kraftlake simulate --seed 7 --records 3000 --bug broker-skip-assign --out .demo/lazy-broker.jsonl
	$(BIN)/kraftlake init .demo/lazy-broker && $(BIN)/kraftlake append .demo/lazy-broker .demo/lazy-broker.jsonl
	$(BIN)/kraftlake broker .demo/lazy-broker --broker 1
	$(BIN)/kraftlake audit .demo/lazy-broker; echo "exit code $$?"
	@echo "--- 4. a real Kafka metadata log (fixtures/kafka/codecrafters-single, MIT): dump, import, view, audit"
	$(BIN)/kraftlake dump fixtures/kafka/codecrafters-single
	$(BIN)/kraftlake import-kafka fixtures/kafka/codecrafters-single .demo/kafka
	$(BIN)/kraftlake view .demo/kafka --source-offset 35 --format table
	$(BIN)/kraftlake audit .demo/kafka; echo "exit code $$?"
	@echo "--- 5. AutoMQ's S3Stream metadata (automq.version V6): nodes upload WALs, compact, move streams, fail over"
	$(BIN)/kraftlake simulate --family s3stream --seed 7 --records 20000 --out .demo/s3.jsonl
	$(BIN)/kraftlake simulate --family s3stream --seed 7 --records 20000 --bug stale-epoch-commit --out .demo/s3-buggy.jsonl
	$(BIN)/kraftlake init .demo/s3 && $(BIN)/kraftlake append .demo/s3 .demo/s3.jsonl
	$(BIN)/kraftlake init .demo/s3-buggy && $(BIN)/kraftlake append .demo/s3-buggy .demo/s3-buggy.jsonl
	$(BIN)/kraftlake view .demo/s3 --streams --format table | head -n 12
	$(BIN)/kraftlake view .demo/s3 --format table --stream $$($(BIN)/kraftlake view .demo/s3 --streams | \
	  $(BIN)/python -c 'import json, sys; print(json.load(sys.stdin)["streams"][0]["stream_id"])')
	$(BIN)/kraftlake audit .demo/s3; echo "exit code $$?"
	$(BIN)/kraftlake audit .demo/s3-buggy; echo "exit code $$?"
	@echo "--- 6. BookKeeper: bookies fail, fill up and drain; the auditor marks, workers repair; data lost when two bookies of a write set go together"
	$(BIN)/kraftlake simulate --family bookkeeper --seed 4 --records 800 --correlated-faults --out .demo/bk.jsonl
	$(BIN)/kraftlake init .demo/bk && $(BIN)/kraftlake append .demo/bk .demo/bk.jsonl
	$(BIN)/kraftlake view .demo/bk --bookies --format table
	$(BIN)/kraftlake audit .demo/bk; echo "exit code $$?"

# Layout, lint and types first (seconds): the formatter decides layout, `make format` applies it;
# mypy checks the folders [tool.mypy] lists, under their kraftlake.* names (tools/typecheck.py),
# incrementally (.mypy_cache).
lint: $(VENV)/.installed
	$(BIN)/ruff format --check --quiet . || { echo "run 'make format'"; exit 1; }
	$(BIN)/ruff check --quiet .
	$(BIN)/python tools/typecheck.py

format: $(VENV)/.installed
	$(BIN)/ruff format --quiet .
	$(BIN)/ruff check --quiet --fix .

# The suite on every core (pytest-xdist): the Spark tests share one worker and its JVM. Tiers
# (tests/helpers/tiers.py): test-fast is the inner loop (no Spark, no multi-process loops, a
# quarter of the property tests' examples), test is CI's, test-thorough runs five times CI's
# examples and loop rounds, for a change to codecs, reducers or deciders.
PYTEST := $(BIN)/python -m pytest -q -n auto --dist loadgroup

test: $(VENV)/.installed java chromium prometheus lint
	KRAFTLAKE_TEST_TIER=default $(PYTEST)

test-fast: $(VENV)/.installed chromium prometheus lint
	KRAFTLAKE_TEST_TIER=fast $(PYTEST) -m "not spark and not slow"

test-thorough: $(VENV)/.installed java chromium prometheus lint
	KRAFTLAKE_TEST_TIER=thorough $(PYTEST)

bench: $(VENV)/.installed java
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	$(BIN)/python bench/append.py
	$(BIN)/python bench/replay.py
	$(BIN)/python bench/replay.py --family s3stream
	$(BIN)/python bench/audit.py
	$(BIN)/python bench/import.py
	$(BIN)/python bench/spark_audit.py

# The committed, executed notebook pages (readable on GitHub without running them), and the
# pictures a reviewer looks at: the HTML report and its screenshot, the text report at 80 and 200
# columns, the notebook's figures (tests/helpers/pictures.py, as the picture tests make them).
examples: $(VENV)/.installed chromium
	$(BIN)/jupyter nbconvert --execute --to html examples/incident.ipynb
	$(BIN)/python tests/helpers/pictures.py examples

clean:
	rm -rf $(VENV) .demo .pytest_cache .hypothesis .ruff_cache .mypy_cache
