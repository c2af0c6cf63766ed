"""The Datasette a worker serves, and the check of ``datasette.yaml`` before any worker starts.

Promises: :func:`make_datasette` builds the same Datasette on 0.65 and 1.0 (through
:func:`qsite.service.compat.datasette_kwargs`), over the database served mutable (never ``-i``:
the pipeline writes while it is served; Datasette's read connections are read-only anyway),
with the plugin's settings marking it as qsite's own server. :func:`check_datasette_config`
refuses, naming the file, a ``datasette.yaml`` that lacks a canned query the API runs.

Relies on: :mod:`qsite.service.datasette.metadata` to read both files; ``DATASETTE_SECRET`` set
once for all workers by :func:`qsite.service.serve.runner.serve`, so signed cursors hold from one
worker (or replica) to the next.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from datasette.app import Datasette

from qsite.config import Config
from qsite.service.compat import datasette_kwargs
from qsite.service.datasette.metadata import (
    CONFIG_PATH,
    MetadataError,
    load_datasette_config,
    load_metadata,
    query_sql,
)
from qsite.service.http.settings import DATASETTE_CONFIG_ENV, OWN_SERVER, PLUGIN_NAME

#: Datasette's signing secret, as ``datasette serve --secret`` reads it from the environment.
SECRET_ENV = "DATASETTE_SECRET"


def check_datasette_config(path: str | Path | None = None) -> None:
    """Check, before any worker starts, that the ``datasette.yaml`` to be served has what the API runs.

    Every worker reads the canned queries of this file (:func:`make_datasette`); one the API needs
    left out of a deployer's copy used to start a server whose every endpoint answered 503 (and
    health "no-data" over a full database), with only a log line to say why.

    :param path: the file (``--datasette-config``); default ``QSITE_DATASETTE_CONFIG``, else the bundled one.
    :raises MetadataError: naming the file and what it lacks (the missing queries), or why it cannot be read.
    """
    path = path or os.environ.get(DATASETTE_CONFIG_ENV) or CONFIG_PATH
    try:
        config = load_datasette_config("served", path)
        (entry,) = config["databases"].values()
        if not isinstance(entry, dict) or not isinstance(entry.get("queries") or {}, dict):
            raise MetadataError("databases: the database's entry and its queries must be mappings")
        query_sql(entry.get("queries"))
    except MetadataError as exc:
        # query_sql's message names datasette.yaml; say which file instead
        raise MetadataError(f"{path}: {str(exc).removeprefix('datasette.yaml: ')}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise MetadataError(f"{path}: cannot be read: {exc}") from None


def make_datasette(
    config: Config, settings: dict | None = None, files: list[str] | None = None, datasette_yaml: str | Path | None = None
) -> Datasette:
    """A Datasette serving ``config``'s database with ``metadata.yml``, ``datasette.yaml`` and the plugin settings.

    Loaded the same way on Datasette 0.65 and 1.0 (:func:`qsite.service.compat.datasette_kwargs`).
    Datasette's ``sql_time_limit_ms`` is the config's ``api.sql_time_limit_ms``
    unless ``datasette.yaml`` or ``settings`` say otherwise.

    :param files: the database files instead (``[]`` for a follower, which adds its snapshots itself).
    :param datasette_yaml: the deployer's ``datasette.yaml`` (its queries, ``allow`` blocks, settings);
        default ``QSITE_DATASETTE_CONFIG`` (``qsite serve --datasette-config``), else the bundled one.
    """
    database = config.database_path
    metadata = load_metadata(database.stem)
    datasette_yaml = datasette_yaml or os.environ.get(DATASETTE_CONFIG_ENV) or CONFIG_PATH
    datasette_config = load_datasette_config(database.stem, datasette_yaml)
    # datasette_config: Datasette has the whole file (the plugin need not check, on 0.65, what it lacks)
    datasette_config.setdefault("plugins", {})[PLUGIN_NAME] = {
        "config": str(config.path), "database": str(database), "datasette_config": str(datasette_yaml),
        OWN_SERVER: True,  # qsite's own server: hardened as a whole (qsite.service.http.settings.is_own_server)
    }
    datasette_config["settings"] = {
        "sql_time_limit_ms": config.api.sql_time_limit_ms, **(datasette_config.get("settings") or {}), **(settings or {}),
    }
    # DATASETTE_SECRET as `datasette serve` reads it: what Datasette signs, and the counts cursors carry
    # (qsite.service.datasette.state.cursor_key), then hold from one worker or replica to the next
    secret = os.environ.get(SECRET_ENV) or None
    files = [str(database)] if files is None else files
    return Datasette(files, secret=secret, **datasette_kwargs(metadata, datasette_config))
