# The README's commands. `make up` and `make test` work on a fresh machine.
#
# Every Python package comes from uv.lock (exact versions with sha256 hashes),
# installed by uv; uv itself comes from PyPI, at the version below, into .tools/.
# `make install` (what `make up` serves from) syncs .venv to the runtime
# packages only, removing anything else; `make dev` and `make test` add the
# `test` extra. After changing dependencies in pyproject.toml: `make lock`.
PYTHON ?= python3
# Keep pyproject.toml's uv_build range in step: uv then builds qsite in-process.
UV_VERSION := 0.13.9
UV := .tools/uv-$(UV_VERSION)/bin/uv
VENV := .venv
BIN := $(VENV)/bin

# The machine's $(PYTHON), never an interpreter uv would download; .venv is the environment.
export UV_PYTHON := $(PYTHON)
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)
# --locked: fail, naming `uv lock`, when uv.lock no longer matches pyproject.toml.
# --compile-bytecode: .pyc files now (as pip does), not at every start where
# Python may not write them (PYTHONDONTWRITEBYTECODE): a second off each `qsite` start.
SYNC := $(UV) sync --locked --compile-bytecode --quiet

.PHONY: install dev lock up test bench profile soak cluster clean

$(UV):
	$(PYTHON) -m pip install --quiet --quiet --disable-pip-version-check --target $(dir $(@D)) uv==$(UV_VERSION)

install: $(UV)
	$(SYNC)

dev: $(UV)
	$(SYNC) --extra test

lock: $(UV)
	$(UV) lock

up: install
	$(BIN)/qsite up

test: dev
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m pytest -q

# Benchmark: API vs raw ASGI and Datasette, ingestion vs feedparser, memory (see bench/run.py);
# with the test extra, which has httptools for the uvicorn-httptools server.
bench: dev
	bench/run.sh

# Profiles of serving and of an ingest with py-spy (bench/profile.sh).
profile: $(UV)
	$(SYNC) --extra profile
	bench/profile.sh

# Longer reliability run: 200 kills, 5-minute load, more fuzzing and hostile input (tests/test_crash.py etc.).
soak: dev
	QSITE_SOAK=1 $(BIN)/python -m pytest -q tests/test_crash.py tests/test_load.py tests/test_fuzz_api.py \
		tests/test_properties.py tests/test_hostile_feeds.py tests/test_write_failures.py tests/test_secrets.py \
		tests/test_connections.py

# The production topology on loopback: SeaweedFS (S3), the publishing writer, two following replicas,
# redis-server and nginx with proxy_cache (deploy/cluster.py; STORE=folder for no S3). Ctrl-C stops it all.
STORE ?= s3
cluster: dev
	$(BIN)/python deploy/cluster.py --store $(STORE)

clean:
	rm -rf $(VENV) .tools *.egg-info db/site.db db/site.db-wal db/site.db-shm db/snapshots db/replica
