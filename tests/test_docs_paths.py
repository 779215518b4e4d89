"""Every project path the documentation names in backticks exists: a file or folder written as
`study/...`, `optimizers/...`, `datasets/...`, `tests/...`, `configs/...`, `scripts/...` or
`examples/...` in README.md or docs/*.md (not the generated docs/reference-report/) is in the
checkout, so a move that forgets a page fails here. A placeholder component (`<name>`,
`twin_<backend>.py`) and a shell wildcard are globbed and must match something; `{a,b}` is
expanded; a `:function` suffix (`path.py:Name`) is the file's."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

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
