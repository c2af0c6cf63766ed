"""A pytest plugin: qsite's Datasette entry points loaded into Datasette's own test run.

Datasette's ``tests/conftest.py`` sets ``sys._called_from_test`` in its
``pytest_configure``, and ``datasette/plugins.py`` then skips
``pm.load_setuptools_entrypoints("datasette")``: installed plugins stay out of
its tests. This plugin (``pytest -p load_qsite``) loads qsite's entry points
only, each by its name, the way that call would have (pluggy's
``load_setuptools_entrypoints(group, name)``, so ``datasette plugins`` lists
them with their distribution as for any installed plugin), after that flag is
set, so no other installed plugin comes in with them.
"""

from __future__ import annotations

import sys
from importlib.metadata import distribution

import pytest

#: The distribution whose ``datasette`` entry points are loaded.
DISTRIBUTION = "qsite"


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    if not getattr(sys, "_called_from_test", False):
        raise pytest.UsageError("load_qsite: Datasette's conftest did not run first (run from its source folder)")
    from datasette.plugins import pm

    names = [ep.name for ep in distribution(DISTRIBUTION).entry_points if ep.group == "datasette"]
    if not names:
        raise pytest.UsageError(f"load_qsite: {DISTRIBUTION} declares no datasette entry points")
    for name in names:
        if pm.get_plugin(name) is None:
            pm.load_setuptools_entrypoints("datasette", name=name)
    loaded = [name for name in names if pm.get_plugin(name) is not None]
    if loaded != names:
        raise pytest.UsageError(f"load_qsite: loaded {loaded}, expected {names}")


def pytest_report_header(config):
    return f"{DISTRIBUTION}'s Datasette entry points loaded (tools/datasette-suite/load_qsite.py)"
