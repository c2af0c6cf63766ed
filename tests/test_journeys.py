"""docs/journeys.md names only functions that exist.

The page follows a request and a feed entry through the code, naming each step's module,
class, function or method in a code span (```qsite.service.api.routing.resolve```). Every such
name that starts with one of the product's packages is imported here: the longest prefix
that is a module, then each remaining part as an attribute of the one before. A function
moved or renamed without the page fails this test with its name.
"""

from __future__ import annotations

import importlib
import re

import pytest

from tests.support.paths import ROOT

PAGE = ROOT / "docs" / "journeys.md"
#: The product's top-level packages (the rooms of docs/development.md).
PACKAGES = ("service", "pipeline", "db", "config", "qsite")
NAME = re.compile(r"`((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)*)`" % "|".join(PACKAGES))


def named() -> list[str]:
    """Every dotted name in a code span of the page, in order, once each."""
    return list(dict.fromkeys(NAME.findall(PAGE.read_text(encoding="utf-8"))))


def find(name: str):
    """The object ``name`` names; raises ``LookupError`` saying which part is missing."""
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        module_name = ".".join(parts[:split])
        try:
            found = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is not None and not module_name.startswith(exc.name) and exc.name != module_name:
                raise  # the module exists but imports something missing: a real error, not a stale name
            continue
        for attribute in parts[split:]:
            if not hasattr(found, attribute):
                raise LookupError(f"{name}: {'.'.join(parts[:parts.index(attribute)])} has no {attribute!r}")
            found = getattr(found, attribute)
        return found
    raise LookupError(f"{name}: no module {parts[0]!r}")


def test_the_page_names_the_steps_of_both_journeys():
    names = named()
    assert len(names) > 60, names  # both journeys, step by step
    assert "qsite.service.api.routing.resolve" in names and "qsite.pipeline.ops.publish.publish" in names


@pytest.mark.parametrize("name", named())
def test_each_named_function_exists(name):
    try:
        find(name)
    except LookupError as exc:
        pytest.fail(f"docs/journeys.md names {name}, which no longer exists ({exc}); update the page")


def test_a_stale_name_is_caught():
    """The check itself: a name that is not there fails, a module prefix and methods are followed."""
    assert find("qsite.service.api.routing.cache_key").__name__ == "cache_key"
    assert callable(find("qsite.service.api.response_cache.ResponseCache.get_or_build"))
    with pytest.raises(LookupError, match="has no 'no_such_step'"):
        find("qsite.service.api.routing.no_such_step")
    with pytest.raises(LookupError, match="no module"):
        find("nowhere.at_all")
