"""Two versions of the site export, so a test can tell "one export or the other" from "a mix of both"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable


def other_export(export: dict) -> dict:
    """A second valid version of a site export: a course fewer and the first retitled."""
    other = json.loads(json.dumps(export))
    other["courses"] = other["courses"][:-1]
    other["courses"][0]["title"] += " (revised)"
    kept = {course["id"] for course in other["courses"]}
    other["glossary"] = [
        entry for entry in other["glossary"] if not isinstance(entry.get("lesson"), dict) or entry["lesson"]["course"] in kept
    ]
    return other


def configs_for_both_exports(make_config: Callable[..., Path], folder: Path, export: dict, **overrides) -> tuple[Path, Path, dict]:
    """``folder/a.yml`` over ``export`` and ``folder/b.yml`` over :func:`other_export` of it, otherwise alike.

    ``make_config`` is the fixture of that name, ``overrides`` go to both configs.
    Returns the two config paths and the other export.
    """
    other = other_export(export)
    (folder / "export-b.json").write_text(json.dumps(other), encoding="utf-8")
    config_a = make_config(**overrides).rename(folder / "a.yml")
    config_b = make_config(**overrides, site_export={"source": str(folder / "export-b.json")}).rename(folder / "b.yml")
    return config_a, config_b, other
