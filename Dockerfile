# qsite: one image for every role (docs/operating.md#containers, docs/deploy.md).
#   one machine: qsite up --host 0.0.0.0 --port 8001   (the default command: migrates, ingests
#                once, then runs qsite schedule in the background and qsite serve in the
#                foreground, over /data/site.db with deploy/one-machine.yml, the default
#                QSITE_CONFIG; needs nothing else. `qsite serve` alone ingests nothing: every
#                endpoint, health too, answers 503 until something ingests into /data/site.db)
#   the writer:  qsite schedule   (ingests, and publishes snapshots when snapshots.store is set)
#   a replica:   qsite serve --follow --data-dir /data/replica --host 0.0.0.0 --port 8001
#   The writer and replicas read deploy/qsite.yml (QSITE_CONFIG=/app/deploy/qsite.yml, as
#   docker-compose.yml sets it): its Redis (redis:6379) and store (store:8333) are compose's services.
FROM python:3.11-slim

# uv: the same version as the Makefile's UV_VERSION
ARG UV_VERSION=0.13.9

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_NO_CACHE=1 \
    PATH=/app/.venv/bin:$PATH \
    QSITE_CONFIG=/app/deploy/one-machine.yml \
    QSITE_PORT=8001

WORKDIR /app
COPY pyproject.toml uv.lock README.md metadata.yml datasette.yaml ./
COPY qsite ./qsite
COPY config ./config
COPY pipeline ./pipeline
COPY service ./service
COPY db ./db
COPY deploy ./deploy
# The runtime packages only, at the versions and hashes of uv.lock, into
# /app/.venv (first on PATH). Editable, so the code runs from /app: service/
# reads metadata.yml and datasette.yaml from the project root beside it (a wheel
# carries its own copies inside the package), and qsite/'s symlinks (qsite/service
# -> ../service and so on) point at the folders copied beside it.
RUN pip install --quiet --target /tmp/uv "uv==$UV_VERSION" \
    && /tmp/uv/bin/uv sync --locked --compile-bytecode --quiet \
    && rm -rf /tmp/uv \
    && useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin qsite \
    && mkdir -p /data \
    && chown qsite:qsite /data

# A named volume created from this image starts out owned by qsite.
VOLUME /data
USER qsite
EXPOSE 8001

# Healthy = /api/v1/health answers 2xx: there is data, no older than
# api.health_max_data_age (a 503 before the first ingest or snapshot, or once
# the data is stale, is unhealthy). Python's urllib, because slim has no curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/api/v1/health' % os.environ.get('QSITE_PORT', '8001'), timeout=4)"]

# On SIGTERM (docker stop) qsite up stops the server, then the scheduler (a running ingest
# gets 5 s to commit), waiting up to 10 s for each: `docker run --stop-timeout 20` covers both.
# A SIGKILL before that loses nothing committed: SQLite rolls the open transaction back.
CMD ["sh", "-c", "exec qsite up --host 0.0.0.0 --port \"$QSITE_PORT\""]
