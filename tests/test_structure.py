"""The code's structure: no import cycles (function-level imports included: a cycle hidden in
one is still a cycle), and every registered study plugin provides what the engine calls."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("datasets", "optimizers", "study", "convergence_study")


def module_graph() -> dict[str, set[str]]:
    """Project module -> the project modules it imports, anywhere in its source."""
    def name_of(path: Path) -> str:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)

    modules = {name_of(p): p for package in PACKAGES for p in (ROOT / package).rglob("*.py")}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets |= {resolve(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets |= {resolve(f"{node.module}.{alias.name}") or resolve(node.module)
                            for alias in node.names}
        graph[name] = targets - {None, name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    graph = module_graph()
    assert len(graph) > 80 and "optimizers.driver" in graph["optimizers.backends.numpy"]
    assert cycles(graph) == []


@pytest.mark.parametrize("kind", ["regression", "feedmode"])
def test_every_study_plugin_provides_what_the_engine_calls(kind):
    import importlib

    from study.sweep.plugin import STUDIES, StudyPlugin, load_kind

    plugin = load_kind(kind)
    assert isinstance(plugin, StudyPlugin) and plugin.KIND == kind and STUDIES[kind]
    for module in (plugin.MEASURE_MODULE, plugin.FIGURES_MODULE, plugin.REPORT_MODULE):
        assert importlib.util.find_spec(module) is not None, module


def test_a_plugin_lacking_a_member_is_named(monkeypatch):
    from study.sweep import plugin as registry

    monkeypatch.setitem(registry.STUDIES, "broken", "json")  # a module that is no plugin
    with pytest.raises(TypeError, match="study plugin json lacks KIND, CONFIG_KEYS"):
        registry.load_kind("broken")
