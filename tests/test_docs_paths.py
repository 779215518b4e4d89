"""What the docs say of the code's shape holds.

Every project path they name in backticks exists: a file or folder written as `study/...`,
`optimizers/...`, `datasets/...`, `tests/...`, `configs/...`, `scripts/...` or `examples/...` in
README.md or docs/*.md (not the generated docs/reference-report/) is in the checkout, so a move
that forgets a page fails here. A placeholder component (`<name>`, `twin_<backend>.py`) and a
shell wildcard are globbed and must match something; `{a,b}` is expanded; a `:function` suffix
(`path.py:Name`) is the file's. A dotted name (`study.train.frameworks.adapter`) is a module and
a name it defines. And the layers docs/layout.md draws are the imports' direction:
each layer imports only those below it, and a framework folder's part of a study (feedmode,
train, twin, examples) is loaded by the name its registry entry gives, never imported."""

from __future__ import annotations

import ast
import itertools
import re
from pathlib import Path

from test_structure import module_graph

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PREFIXES = ("study/", "optimizers/", "datasets/", "tests/", "configs/", "scripts/", "examples/")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")


def named_paths(text: str) -> list[str]:
    """The project paths in a page's inline code spans (fenced blocks are commands, not names)."""
    found = []
    for span in SPAN.findall(FENCE.sub("", text)):
        for token in span.split():
            token = token.strip("()[],;.").split(":")[0]
            if token.startswith(PREFIXES):
                found.append(token)
    return found


def expanded(path: str) -> list[str]:
    """`a/{b,c}.py` as its alternatives; a path without braces as itself."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def exists(path: str) -> bool:
    pattern = re.sub(r"<[^<>/]+>", "*", path).rstrip("/")
    if any(c in pattern for c in "*?["):
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


def test_the_helpers_read_a_page_as_written():
    text = ("a `study/frameworks/<name>/train.py` and `optimizers/from_file.py:checked`, "
            "`study/frameworks/{jax,torch}/examples.py`,\n```\npython scripts/none.py\n```\n"
            "`python -m study` and (`configs/`).")
    paths = named_paths(text)
    assert paths == ["study/frameworks/<name>/train.py", "optimizers/from_file.py",
                     "study/frameworks/{jax,torch}/examples.py", "configs/"]
    assert all(exists(p) for path in paths for p in expanded(path))
    assert not exists("study/frameworks/<name>/nothing.py")
    assert not exists("study/train/adapters/")


def test_every_path_the_docs_name_exists():
    missing = [f"{page.relative_to(ROOT)}: `{path}`" for page in PAGES
               for path in named_paths(page.read_text())
               if not all(exists(p) for p in expanded(path))]
    assert not missing, "paths named in the docs that are not in the checkout:\n" + \
        "\n".join(missing)


DOTTED = re.compile(r"\b(?:study|optimizers|datasets)(?:\.[A-Za-z_]\w*)+")


def module_file(parts: list[str]) -> Path | None:
    path = ROOT.joinpath(*parts)
    return next((f for f in (path.with_suffix(".py"), path / "__init__.py") if f.exists()), None)


def defined(path: Path) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def unresolved(name: str) -> bool:
    """A dotted project name whose module is missing, or whose module lacks the next name."""
    parts = name.split(".")
    if parts[-1] in ("py", "toml", "md"):
        return False  # a file name such as `optimizers.py`
    found = next((i for i in range(len(parts), 0, -1) if module_file(parts[:i])), 0)
    if found == 0:
        return True
    rest = parts[found:]
    return bool(rest) and rest[0] not in defined(module_file(parts[:found]))


def test_a_dotted_name_is_checked_against_the_module():
    assert not unresolved("study.train.frameworks.adapter")
    assert not unresolved("study.sweep.plugin.StudyPlugin") and not unresolved("optimizers.py")
    assert unresolved("study.train.adapters") and unresolved("study.bench.plan.nothing_here")


def test_every_dotted_name_the_docs_give_resolves():
    missing = [f"{page.relative_to(ROOT)}: `{name}`" for page in PAGES
               for span in SPAN.findall(FENCE.sub("", page.read_text()))
               for name in DOTTED.findall(span) if unresolved(name)]
    assert not missing, "dotted names in the docs the code does not define:\n" + \
        "\n".join(missing)

STUDIES = ("study.regression", "study.feedmode", "study.train", "study.bench")
PARTS = {"feedmode": "study.feedmode", "train": "study.train", "twin": "study.bench",
         "examples": "study.train"}  # a framework folder's module -> the study it is part of


def layer(module: str) -> int | str | None:
    """docs/layout.md's layer of a project module, bottom (0) to top (5); a framework folder's
    part of a study is "part"."""
    parts = module.split(".")
    if module == "convergence_study.errors":
        return -1  # the error types, below everything
    if parts[0] in ("datasets", "optimizers"):
        return ("datasets", "optimizers").index(parts[0])
    if parts[0] != "study":
        return None  # convergence_study: the installed name, outside the layers
    if parts[:2] == ["study", "frameworks"]:
        return "part" if len(parts) == 4 and parts[3] in PARTS else 2
    if module == "study.__main__":
        return 5
    return 4 if any(module == s or module.startswith(s + ".") for s in STUDIES) else 3


def against_the_layers(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer(module), layer(target)
            if None in (low, high):
                continue
            if high == "part":  # loaded by name; only its own folder may import it
                if module.rpartition(".")[0] != target.rpartition(".")[0]:
                    wrong.append(f"{module} -> {target} (loaded by name, never imported)")
            elif low == "part":
                study = PARTS[module.split(".")[3]]
                if high == 5 or high == 4 and not (target == study or
                                                   target.startswith(study + ".")):
                    wrong.append(f"{module} -> {target} (not its own study)")
            elif low < high:
                wrong.append(f"{module} -> {target} (upward)")
    return wrong


def test_the_layer_check_finds_what_it_looks_for():
    assert [layer(m) for m in ("convergence_study.errors", "datasets.problem", "optimizers.ops",
                               "study.frameworks.registry", "study.frameworks.jax.backend",
                               "study.frameworks.jax.train", "study.sweep.runner",
                               "study.bench.twins", "study.__main__")] \
        == [-1, 0, 1, 2, 2, "part", 3, 4, 5]
    assert against_the_layers({
        "optimizers.gd": {"study.results", "convergence_study.errors"},
        "convergence_study.errors": {"datasets.values"},
        "study.sweep.runner": {"study.frameworks.torch.twin"},
        "study.frameworks.torch.train": {"study.bench.runs", "study.train.models.model"},
    }) == ["convergence_study.errors -> datasets.values (upward)",
           "optimizers.gd -> study.results (upward)",
           "study.frameworks.torch.train -> study.bench.runs (not its own study)",
           "study.sweep.runner -> study.frameworks.torch.twin (loaded by name, never imported)"]


def test_imports_go_down_the_layers_layout_md_draws():
    graph = module_graph()
    assert "study.frameworks.jax.train" in graph and "study.__main__" in graph
    assert against_the_layers(graph) == []
