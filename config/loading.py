"""Reading a config file: YAML to a validated :class:`~qsite.config.model.Config`, or one error naming what is wrong.

Promises: :func:`load_config` returns a config or raises :class:`~qsite.config.model.ConfigError`
whose message names the file and, one line each, every bad key (``key.path: message``, with
a "did you mean" for an unknown key); a key given twice in one mapping is refused, never
silently the last; ``${VAR}`` references are expanded (:mod:`qsite.config.environment`) and an
unset one is named.

Relies on :mod:`qsite.config.model` for what is valid.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from pydantic import ValidationError

from qsite.config.environment import expand_environment
from qsite.config.model import Config, ConfigError
from qsite.config.spelling import did_you_mean
from qsite.db.model import TAGS

#: The bundled default config, pointing at the bundled samples.
DEFAULT_CONFIG = Path(__file__).parent / "qsite.yml"


def _location(loc: tuple) -> str:
    text = ""
    for part in loc:
        # pydantic adds the name of the matching union member / literal; not a key
        if isinstance(part, str) and (part.startswith(("function-", "literal[")) or part in ("int", "str", "float")):
            continue
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def format_validation_error(error: ValidationError) -> list[str]:
    """One line per problem: ``key.path: message``."""
    lines = []
    for problem in error.errors():
        where = _location(problem["loc"])
        message = problem["msg"].removeprefix("Value error, ")
        if problem["type"] == "extra_forbidden":
            message = "unknown key" + did_you_mean(Config, problem["loc"])
        elif problem["type"] == "missing":
            message = "required key is missing"
        elif problem["type"] == "literal_error":
            message = f"must be one of {', '.join(TAGS)} (got {problem.get('input')!r})"
        lines.append(f"{where}: {message}")
    return lines


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key given twice in one mapping, instead of keeping the last."""

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first_lines: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # keys merged in by `<<: *base` may be overridden
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                try:
                    if key in first_lines:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"duplicate key {key!r} at line {line} (first at line {first_lines[key]})", key_node.start_mark
                        )
                    first_lines[key] = line
                except TypeError:
                    continue  # an unhashable key; SafeLoader reports that itself
        return super().construct_mapping(node, deep=deep)


def load_config(path: str | os.PathLike | None = None, database: str | None = None) -> Config:
    """Read and validate the config at ``path`` (default: the bundled one).

    :param database: overrides the ``database`` key (``--db`` / ``QSITE_DB``).
    :raises ConfigError: with the file's name and every bad key in the message.
    """
    config_path = Path(path).expanduser().resolve() if path else DEFAULT_CONFIG
    try:
        text = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{config_path}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{config_path}: cannot read config file: {exc}") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{config_path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{config_path}: must be a YAML mapping of keys such as database, site_export, news, api")
    if "path" in data:  # a model field for bookkeeping, never a key of the file
        raise ConfigError(f"{config_path}: invalid config\n  path: unknown key")
    data, unset = expand_environment(data)
    if unset:
        raise ConfigError(f"{config_path}: invalid config\n  " + "\n  ".join(unset))
    try:
        config = Config(**data, path=config_path)
    except ValidationError as exc:
        problems = "\n  ".join(format_validation_error(exc))
        raise ConfigError(f"{config_path}: invalid config\n  {problems}") from None
    if database:
        config = config.model_copy(update={"database": str(Path(database).expanduser().resolve())})
    return config
