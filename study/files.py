"""`python -m study files CONFIG [--drawn | --report | --make]`: the project files a study
config's results, figures or report are made from, one line, for the Makefile's prerequisites.

- default: the union of the plugin's `code_files` over the config's runs;
- `--drawn`: the project modules the figures command and the plugin's `FIGURES_MODULE` import,
  transitively (read with `ast`, never imported);
- `--report`: the same for the report builder and the plugin's `REPORT_MODULE`;
- `--make`: all three in one line, `NAME.measured=A,B NAME.drawn=... report=...`.
"""

from __future__ import annotations

import ast
import contextlib
import io
from pathlib import Path

from study.sweep.fingerprint import ROOT
from study.sweep.grid import load_study, read_config
from study.sweep.plugin import load_kind

PACKAGES = ("study", "datasets", "optimizers")  # the project's own top-level packages


def add_arguments(parser) -> None:
    parser.add_argument("configs", nargs="+", metavar="CONFIG", help="study config(s) (.toml)")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--drawn", action="store_true",
                      help="the files that draw the config's figures")
    what.add_argument("--report", action="store_true",
                      help="the files that write the config's report section")
    what.add_argument("--make", action="store_true",
                      help="every list of every config, in one line for the Makefile")


def module_file(name: str) -> str | None:
    """The project file of a module name (a package's __init__.py), or None outside it."""
    base = ROOT / name.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return str(path.relative_to(ROOT))
    return None


def imported_files(modules) -> list[str]:
    """The project files of `modules` and of every project module they import, at any depth."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        parts = name.split(".")
        if parts[0] not in PACKAGES:
            continue
        for depth in range(1, len(parts) + 1):  # importing a.b.c runs a and a.b first
            path = module_file(".".join(parts[:depth]))
            if path is None or path in seen:
                continue
            seen.add(path)
            for node in ast.walk(ast.parse((ROOT / path).read_text(), path)):
                if isinstance(node, ast.Import):
                    todo += [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    todo += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return sorted(seen)


def files(config: str, drawn: bool = False, report: bool = False) -> list[str]:
    if drawn or report:  # the study's kind is enough: its runs are not expanded
        plugin = load_kind(read_config(config).get("kind", "regression"))
        return imported_files(["study.figures" if drawn else "study.report.build",
                               plugin.FIGURES_MODULE if drawn else plugin.REPORT_MODULE])
    with contextlib.redirect_stderr(io.StringIO()):  # a sweep's notes ("not run: ...") are not
        study = load_study(config)                    # this listing's; errors still raise
    return sorted({path for spec in study.specs for path in load_kind(study.kind).code_files(spec)})


def main(args) -> int:
    if args.make:
        lists = {}
        for config in args.configs:
            name = Path(config).stem
            lists[f"{name}.measured"] = files(config)
            lists[f"{name}.drawn"] = files(config, drawn=True)
            lists.setdefault("report", set()).update(files(config, report=True))
        print(" ".join(f"{key}={','.join(sorted(paths))}" for key, paths in lists.items()))
        return 0
    found = {path for config in args.configs
             for path in files(config, drawn=args.drawn, report=args.report)}
    print(" ".join(sorted(found)))
    return 0
