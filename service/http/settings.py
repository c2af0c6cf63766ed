"""How the plugin finds the qsite config it serves under.

``qsite serve`` passes the config file and database to Datasette as plugin
settings (``plugins: qsite: {config: ..., database: ...}``); a plain
``datasette`` run falls back to ``QSITE_CONFIG`` / ``QSITE_DB`` and then the
bundled default.

Two ways to run, told apart by :func:`is_own_server`: ``qsite serve`` (its own server,
which may harden the whole instance) and the plugin inside anyone's Datasette, where
qsite changes nothing outside ``/api/v1`` and its own database
(:func:`is_qsite_database`, :func:`is_qsite_path`).
"""

from __future__ import annotations

import os
import weakref

from qsite.config import Config, ConfigError, load_config

from qsite.service.http.problems import API_PREFIX

PLUGIN_NAME = "qsite"
#: The plugin setting ``qsite serve`` sets: this Datasette is qsite's own server.
OWN_SERVER = "own_server"

#: The deployer's datasette.yaml (``qsite serve --datasette-config``), read by every worker and by the
#: plugin under a plain Datasette 0.65, which has no ``-c``.
DATASETTE_CONFIG_ENV = "QSITE_DATASETTE_CONFIG"

#: Each Datasette instance's config, kept as long as the instance lives (nothing is set on the Datasette object).
_CONFIGS: "weakref.WeakKeyDictionary[object, Config]" = weakref.WeakKeyDictionary()


def qsite_config(datasette) -> Config:
    """The :class:`~config.Config` for this Datasette instance, loaded once."""
    config = _CONFIGS.get(datasette)
    if config is None:
        options = datasette.plugin_config(PLUGIN_NAME) or {}
        config = load_config(
            options.get("config") or os.environ.get("QSITE_CONFIG"),
            database=options.get("database") or os.environ.get("QSITE_DB"),
        )
        _CONFIGS[datasette] = config
    return config


def is_own_server(datasette) -> bool:
    """Whether ``datasette`` is ``qsite serve``'s own instance (the plugin setting :data:`OWN_SERVER`).

    Only there does qsite harden the whole instance (fair use and request limits on every
    page, CORS everywhere, its introspection pages and error answers); as a plugin in
    someone else's Datasette it keeps to :func:`is_qsite_path` and :func:`is_qsite_database`.
    """
    return bool((datasette.plugin_config(PLUGIN_NAME) or {}).get(OWN_SERVER))


def qsite_database_name(datasette) -> str | None:
    """The Datasette name of the database qsite serves (its file stem); None when the config cannot be read."""
    try:
        return qsite_config(datasette).database_path.stem
    except ConfigError:  # a config problem: the API says so itself (qsite.service.datasette.state)
        return None


def is_qsite_database(datasette, name: str | None) -> bool:
    """Whether the database Datasette calls ``name`` is the one qsite serves."""
    return name is not None and name == qsite_database_name(datasette)


def is_qsite_path(path: str | bytes) -> bool:
    """Whether ``path`` (raw or decoded) is under the API's prefix."""
    prefix = API_PREFIX.encode() if isinstance(path, bytes) else API_PREFIX
    return path == prefix or path.startswith(prefix + (b"/" if isinstance(path, bytes) else "/"))


def path_database(path: str | bytes) -> str | None:
    """The database a Datasette page path names (``/site``, ``/site.json``, ``/site/news.csv``): its first
    segment without a format extension; None for ``/``, ``/-/...`` and the API."""
    if isinstance(path, bytes):
        path = path.decode("latin-1")
    first = path.lstrip("/").split("/", 1)[0]
    if not first or first == "-" or not path.startswith("/") or is_qsite_path(path):
        return None
    return first.split(".", 1)[0]
