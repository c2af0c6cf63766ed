"""``qsite.yml`` files written into a test's folder (the ``make_config`` fixture writes them with this)."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.paths import SITE_EXPORT


def write_config(folder: Path, **overrides) -> Path:
    """Write ``folder/qsite.yml`` and return its path.

    Defaults: the database at ``folder/site.db``, the bundled sample export, no news
    sources. A dict override is merged into the default section of that name, any
    other value replaces it.
    """
    data = {
        "database": str(folder / "site.db"),
        "site_export": {"source": str(SITE_EXPORT), "every": "1h"},
        "news": {"every": "15m", "retention_days": None, "sources": []},
        "api": {"cache_max_age": 300},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    path = folder / "qsite.yml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path
