"""No import cycles, function-level imports included (the layer contract itself is `lint-imports`, run by `make test`)."""

from __future__ import annotations

import grimp

PACKAGES = ("qsite", "pipeline", "service", "config", "db")


def import_cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of modules larger than one: each holds an import cycle."""
    # Tarjan's algorithm; grimp answers chains between two modules, not cycles.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return groups


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

