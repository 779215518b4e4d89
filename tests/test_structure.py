"""The code's structure: no import cycles (function-level imports included: a cycle hidden in
one is still a cycle), no study importing another, studies reaching a framework's backend only
through the registry, and every registered study plugin provides what the engine calls."""

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
    assert len(graph) > 80 and "optimizers.driver" in graph["study.frameworks.numpy.backend"]
    assert cycles(graph) == []


STUDY_PACKAGES = ("study.regression", "study.feedmode", "study.train")


def package_of(module: str, packages) -> str | None:
    return next((p for p in packages if module == p or module.startswith(p + ".")), None)


def test_no_study_imports_another():
    """What two studies share lives in a shared module (study.sweep, study.cli, study.output),
    so a study can change, or go, without breaking another."""
    crossings = sorted(f"{module} -> {target}" for module, targets in module_graph().items()
                       for target in targets
                       if package_of(module, STUDY_PACKAGES)
                       and package_of(target, STUDY_PACKAGES) not in (None,
                                                                      package_of(module,
                                                                                 STUDY_PACKAGES)))
    assert crossings == []


def test_studies_reach_a_backend_only_through_the_registry():
    """A study names a backend and asks study.frameworks.registry for it; importing a backend
    module directly would tie the study to that framework. The exceptions are the study's own
    framework modules, which the registry's framework entry names (a feed-mode module, a train
    adapter): they are that framework's part of the study. (study.bench is no study: it measures
    the backends themselves against hand-written loops.)"""
    from study.frameworks.registry import BACKENDS, FRAMEWORKS

    backend_modules = {b.module for b in BACKENDS.values()} | {"study.frameworks.tensorflow.tf1"}
    framework_modules = {m for f in FRAMEWORKS.values() for m in (f.feedmode, f.train) if m}
    direct = sorted(f"{module} -> {target}" for module, targets in module_graph().items()
                    if package_of(module, STUDY_PACKAGES) and module not in framework_modules
                    for target in targets & backend_modules)
    assert direct == []


def test_the_structure_tests_find_what_they_look_for(monkeypatch):
    graph = {"study.train.a": {"study.regression.b", "study.frameworks.torch.backend"},
             "study.regression.b": set()}
    monkeypatch.setattr(__import__(__name__), "module_graph", lambda: graph)
    with pytest.raises(AssertionError):
        test_no_study_imports_another()
    with pytest.raises(AssertionError):
        test_studies_reach_a_backend_only_through_the_registry()


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
    with pytest.raises(TypeError, match="study plugin json defines no PLUGIN"):
        registry.load_kind("broken")


ENGINE_MODULES = ("study.sweep", "study.report", "study.compare", "study.results",
                  "study.conclusions")
STUDY_NAMES = {"regression", "feedmode", "logistic", "train"}


def test_the_engine_imports_no_study_and_names_none():
    """The engine reaches a study only through its plugin (study.sweep.plugin.StudyPlugin),
    loaded by name from the registry: it imports no study's module and never branches on a
    study's name (docstrings aside), so a new study is a folder, not an edit of the engine."""
    upward = sorted(f"{module} -> {target}" for module, targets in module_graph().items()
                    if package_of(module, ENGINE_MODULES)
                    for target in targets if package_of(target, STUDY_PACKAGES))
    assert upward == []
    named = []
    paths = [p for package in ("study/sweep", "study/report") for p in (ROOT / package).rglob(
        "*.py")] + [ROOT / "study" / f"{m}.py" for m in ("compare", "results", "conclusions")]
    for path in paths:
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
                      and node.body and isinstance(node.body[0], ast.Expr)}
        named += [f"{path.relative_to(ROOT)}:{node.lineno}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and node.value in STUDY_NAMES
                  and id(node) not in docstrings]
    assert named == []
