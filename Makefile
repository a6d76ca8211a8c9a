# Two entry points for a fresh machine: `make demo` and `make test`. Each creates .venv and
# installs what it needs; nothing else has to be installed by hand (Java is checked, and installed
# from Debian's packages when run as root).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO := .demo/log
FIXTURE := fixtures/kraft/jbod-dir-failure.jsonl

.PHONY: demo test bench java clean

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

# The main job on the embedded default: a local Delta table under .demo/.
demo: $(VENV)/.installed java
	@rm -rf .demo && mkdir -p .demo
	$(BIN)/kraftlake init $(DEMO)
	head -n 23 $(FIXTURE) | $(BIN)/kraftlake append $(DEMO) - --producer demo-controller --seq 0
	tail -n +24 $(FIXTURE) | $(BIN)/kraftlake append $(DEMO) - --producer demo-controller --seq 1
	tail -n +24 $(FIXTURE) | $(BIN)/kraftlake append $(DEMO) - --producer demo-controller --seq 1
	$(BIN)/kraftlake log $(DEMO) --format table
	@echo "--- the log before log dir A1 of broker 101 failed (Delta version 1):"
	$(BIN)/kraftlake log $(DEMO) --version 1 --type PartitionChange --from 19 --format table
	$(BIN)/kraftlake history $(DEMO)
	@echo "--- broker 101 as the controller saw it when dir A1 failed (offset 24), then after it acted:"
	$(BIN)/kraftlake view $(DEMO) --offset 24 --broker 101 --format table
	$(BIN)/kraftlake view $(DEMO) --broker 101 --format table
	$(BIN)/kraftlake view $(DEMO) --format table
	$(BIN)/kraftlake snapshot $(DEMO) --every 10
	$(BIN)/kraftlake maintain $(DEMO)

test: $(VENV)/.installed java
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed
	$(BIN)/python bench/append.py
	$(BIN)/python bench/replay.py

clean:
	rm -rf $(VENV) .demo .pytest_cache .hypothesis
