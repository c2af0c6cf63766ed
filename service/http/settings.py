"""How the plugin finds the qsite config it serves under.

``qsite serve`` passes the config file and database to Datasette as plugin
settings (``plugins: qsite: {config: ..., database: ...}``); a plain
``datasette`` run falls back to ``QSITE_CONFIG`` / ``QSITE_DB`` and then the
bundled default.
"""

from __future__ import annotations

import os

from config import Config, load_config

PLUGIN_NAME = "qsite"


def qsite_config(datasette) -> Config:
    """The :class:`~config.Config` for this Datasette instance, loaded once."""
    config = getattr(datasette, "_qsite_config", None)
    if config is None:
        options = datasette.plugin_config(PLUGIN_NAME) or {}
        config = load_config(
            options.get("config") or os.environ.get("QSITE_CONFIG"),
            database=options.get("database") or os.environ.get("QSITE_DB"),
        )
        datasette._qsite_config = config
    return config
