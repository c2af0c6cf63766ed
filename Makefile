# The README's commands. `make up` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install up test bench soak cluster clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

up: install
	$(BIN)/qsite up

test: install
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q

# Benchmark: API vs raw ASGI and Datasette, ingestion vs feedparser, memory (see bench/run.py).
bench: install
	bench/run.sh

# Longer reliability run: 200 kills, 5-minute load, more fuzzing and hostile input (tests/test_crash.py etc.).
soak: install
	QSITE_SOAK=1 $(BIN)/python -m pytest -q tests/test_crash.py tests/test_load.py tests/test_fuzz_api.py \
		tests/test_properties.py tests/test_hostile_feeds.py tests/test_write_failures.py tests/test_secrets.py \
		tests/test_connections.py

# The production topology on loopback: SeaweedFS (S3), the publishing writer, two following replicas,
# redis-server and nginx with proxy_cache (deploy/cluster.py; STORE=folder for no S3). Ctrl-C stops it all.
STORE ?= s3
cluster: install
	$(BIN)/python deploy/cluster.py --store $(STORE)

clean:
	rm -rf $(VENV) *.egg-info db/site.db db/site.db-wal db/site.db-shm db/snapshots db/replica
