# The README's commands. `make up` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install up test bench soak clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

up: install
	$(BIN)/qsite up

test: install
	$(BIN)/python -m pytest -q

# Benchmark: API vs raw ASGI and Datasette, ingestion vs feedparser, memory (see bench/run.py).
bench: install
	bench/run.sh

clean:
	rm -rf $(VENV) *.egg-info db/site.db db/site.db-wal db/site.db-shm
