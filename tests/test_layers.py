"""No import cycles, function-level imports included (the layer contract itself is `lint-imports`, run by `make test`)."""

from __future__ import annotations

import graphlib

import grimp

PACKAGES = ("qsite",)


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """An import cycle among the modules, sorted, or ``[]`` when there is none (the first the standard library's
    :mod:`graphlib` meets: fix it and the next one shows)."""
    # grimp answers chains between two modules, not cycles; graphlib's topological sort names one.
    sorter = graphlib.TopologicalSorter({module: graph.find_modules_directly_imported_by(module) for module in sorted(graph.modules)})
    try:
        sorter.prepare()
    except graphlib.CycleError as exc:
        return [sorted(set(exc.args[1]))]
    return []


def test_no_import_cycles_function_level_imports_included():
    graph = grimp.build_graph(*PACKAGES)
    assert import_cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle(tmp_path, monkeypatch):
    for name, body in {"a": "from cyc import b\n", "b": "def f():\n    from cyc import a\n", "c": "from cyc import a\n"}.items():
        (tmp_path / "cyc").mkdir(exist_ok=True)
        (tmp_path / "cyc" / "__init__.py").write_text("")
        (tmp_path / "cyc" / f"{name}.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("cyc", cache_dir=None)
    assert import_cycles(graph) == [["cyc.a", "cyc.b"]]

