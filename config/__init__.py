"""The qsite YAML configuration: its model (:mod:`qsite.config.model`) and its loading (:mod:`qsite.config.loading`).

One YAML file configures everything: the database, the site export, the news sources, the
API, snapshots, metrics and logs. This package's public surface is re-exported here:
``from qsite.config import load_config, Config, ConfigError``.
"""

from qsite.config.loading import DEFAULT_CONFIG, load_config
from qsite.config.model import (
    ApiConfig,
    Config,
    ConfigError,
    NewsConfig,
    RuleConfig,
    SiteExportConfig,
    SnapshotsConfig,
    SourceConfig,
    serving_workers,
)
from qsite.config.values import is_url, parse_duration, parse_rate_limit

__all__ = [
    "DEFAULT_CONFIG",
    "ApiConfig",
    "Config",
    "ConfigError",
    "NewsConfig",
    "RuleConfig",
    "SiteExportConfig",
    "SnapshotsConfig",
    "SourceConfig",
    "is_url",
    "load_config",
    "parse_duration",
    "parse_rate_limit",
    "serving_workers",
]
