"""``${NAME}`` in the config's values, taken from the environment.

So that a credential (a feed's ``?apikey=``, an export's ``user:password@``)
never needs to be written in the config file, any string value may name an
environment variable: ``url: https://feeds.example/rss?apikey=${FEED_API_KEY}``.
Only ``${NAME}`` with ``NAME`` a shell-style variable name is replaced; a
variable that is not set is an error naming the key and the variable, never
an empty string in a URL. What is replaced is never echoed back in errors.
"""

from __future__ import annotations

import os
import re
from typing import Mapping

_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _where(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def expand_environment(data, environ: Mapping[str, str] | None = None, path: tuple = ()) -> tuple[object, list[str]]:
    """``data`` (parsed YAML) with every ``${NAME}`` in its strings replaced; and one problem line per unset variable."""
    environ = os.environ if environ is None else environ
    problems: list[str] = []
    if isinstance(data, dict):
        expanded = {}
        for key, value in data.items():
            expanded[key], found = expand_environment(value, environ, (*path, key))
            problems += found
        return expanded, problems
    if isinstance(data, list):
        expanded_list = []
        for index, value in enumerate(data):
            value, found = expand_environment(value, environ, (*path, index))
            expanded_list.append(value)
            problems += found
        return expanded_list, problems
    if isinstance(data, str) and "${" in data:
        missing = [name for name in _REFERENCE.findall(data) if name not in environ]
        for name in dict.fromkeys(missing):
            problems.append(f"{_where(path)}: environment variable {name} is not set")
        return _REFERENCE.sub(lambda match: environ.get(match.group(1), ""), data), problems
    return data, problems
