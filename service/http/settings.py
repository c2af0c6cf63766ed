"""How the plugin finds the qsite config it serves under.

``qsite serve`` passes the config file and database to Datasette as plugin
settings (``plugins: qsite: {config: ..., database: ...}``); a plain
``datasette`` run falls back to ``QSITE_CONFIG`` / ``QSITE_DB`` and then the
bundled default.
"""

from __future__ import annotations

import os
import weakref

from config import Config, load_config

PLUGIN_NAME = "qsite"
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
