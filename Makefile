# The README's commands. `make up` and `make test` work on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NODE_STAMP := tools/node_modules/.installed
LOCALES := service/locales
POT := $(LOCALES)/qsite.pot

.PHONY: install tools up test bench soak clean messages i18n-extract i18n-update i18n-compile

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

# The OpenAPI linters the tests run (Spectral, Redocly), pinned in tools/package-lock.json.
$(NODE_STAMP): tools/package.json tools/package-lock.json
	cd tools && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error
	touch $(NODE_STAMP)

install: $(STAMP)

# Only the tests need Node.js: serving does not.
tools: $(NODE_STAMP)

up: install
	$(BIN)/qsite up

test: install tools
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

# Interface languages (service/i18n.py). The service reads the .po files directly;
# `make messages` = extract the English texts, merge them into every catalog, check by compiling.
messages: i18n-update i18n-compile

i18n-extract: install
	$(BIN)/pybabel extract -F pyproject.toml -o $(POT) --project=qsite --version=v1 \
		--msgid-bugs-address= --copyright-holder=qsite --add-comments=TRANSLATORS: --no-wrap \
		--ignore-dirs='.* _* node_modules' .

# Adds new texts to every catalog (a new language: add it to service/i18n.py LANGUAGES first);
# English is the source language, so its catalog is the texts themselves.
i18n-update: i18n-extract
	for dir in $$($(BIN)/python -c 'from service.i18n import LANGUAGES; print(*(l.catalog_dir for l in LANGUAGES))'); do \
		$(BIN)/pybabel update --init-missing -D qsite -i $(POT) -d $(LOCALES) -l $$dir --ignore-obsolete --no-wrap || exit 1; \
	done
	$(BIN)/python tools/po_source_language.py $(LOCALES)/en/LC_MESSAGES/qsite.po

# .mo files are only a check here (gettext's syntax and format checks), never served; see .gitignore.
i18n-compile: install
	$(BIN)/pybabel compile -D qsite -d $(LOCALES) --statistics

clean:
	rm -rf $(VENV) tools/node_modules $(LOCALES)/*/LC_MESSAGES/*.mo *.egg-info db/site.db db/site.db-wal db/site.db-shm
