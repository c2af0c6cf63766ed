"""README.md's config examples are the bundled config (config/qsite.yml): a newcomer copying one gets what `make up` runs.

A YAML block in the README whose top-level keys are config sections is a config
example. A whole config (it sets ``database``) must be the bundled file as it
is, comments included; a part of one must show the bundled values for every key
it shows (a list of sources matched by name). A value naming an environment
variable (``${NAME}``) is the credentials example, not a bundled value, and is
not compared.
"""

from __future__ import annotations

import re

import yaml

from qsite.config import load_config
from tests.support.paths import ROOT

README = ROOT / "README.md"
BUNDLED = ROOT / "config" / "qsite.yml"
SECTIONS = {"database", "site_export", "news", "api", "snapshots"}


def config_blocks(markdown: str) -> list[tuple[int, str, dict]]:
    """Each YAML block of ``markdown`` that is a config example: its line number, text and parsed mapping."""
    blocks = []
    for match in re.finditer(r"^```ya?ml\n(.*?)^```", markdown, flags=re.M | re.S):
        data = yaml.safe_load(match.group(1))
        if isinstance(data, dict) and data and set(data) <= SECTIONS:
            blocks.append((markdown.count("\n", 0, match.start()) + 1, match.group(1), data))
    return blocks


def differences(shown, bundled, where: str) -> list[str]:
    """Where ``shown`` (part of a config) says something else than ``bundled``."""
    if isinstance(shown, str) and "${" in shown:
        return []
    if isinstance(shown, dict):
        if not isinstance(bundled, dict):
            return [f"{where}: a mapping here, {bundled!r} in the bundled config"]
        return [
            problem
            for key, value in shown.items()
            for problem in (
                differences(value, bundled[key], f"{where}.{key}".lstrip("."))
                if key in bundled
                else [f"{where}.{key}".lstrip(".") + ": not in the bundled config"]
            )
        ]
    if isinstance(shown, list) and all(isinstance(item, dict) and "name" in item for item in shown):
        by_name = {item.get("name"): item for item in bundled or [] if isinstance(item, dict)}
        return [
            problem
            for item in shown
            for problem in (
                differences(item, by_name[item["name"]], f"{where}[{item['name']}]")
                if item["name"] in by_name
                else [f"{where}: source {item['name']!r} is not in the bundled config"]
            )
        ]
    return [] if shown == bundled else [f"{where}: {shown!r} here, {bundled!r} in the bundled config"]


def test_readme_config_examples_are_the_bundled_config():
    bundled_text = BUNDLED.read_text(encoding="utf-8")
    bundled = yaml.safe_load(bundled_text)
    problems = []
    for line, text, data in config_blocks(README.read_text(encoding="utf-8")):
        if "database" in data:
            if text.strip() != bundled_text.strip():
                problems.append(f"README.md:{line}: a whole config that is not config/qsite.yml as it is; paste the file")
        else:
            problems += [f"README.md:{line}: {problem}" for problem in differences(data, bundled, "")]
    assert not problems, "\n".join(problems)


def test_the_configuration_page_shows_the_bundled_file_itself():
    # the docs show the whole bundled config by including the file, so the two cannot differ
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "```{literalinclude} ../config/qsite.yml\n" in page


def test_the_checker_sees_a_drifted_value():
    # the comparison itself: a changed value, an unknown source and an unknown key are each found
    bundled = yaml.safe_load(BUNDLED.read_text(encoding="utf-8"))
    shown = {"api": {"rate_limit": "60/minute", "bogus": 1}, "news": {"sources": [{"name": "Elsewhere", "tag": "Science"}]}}
    assert len(differences(shown, bundled, "")) == 3
    assert differences({"site_export": {"source": "https://${USER}@x/export.json"}}, bundled, "") == []


def test_the_bundled_config_loads():
    assert load_config(BUNDLED).news.sources
