"""A user's own code in a file, named `path/to/file.py:Name` (an optimizer class, a data set's
loader): the name parsed, the path made absolute so that a run's fresh process finds the same
file, the module imported once per content (an edited file again), each failure one line
naming the file. Running a file is running its code."""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import sys
from pathlib import Path

from convergence_study.errors import InputError, first_line

SEPARATOR = ".py:"
# sys.modules holds each file's module under this prefix (a dataclass there needs its module)
MODULE_PREFIX = "convergence_study_user_"


def is_file_name(name) -> bool:
    """Whether a name names a file's object (`path.py:Name`), not a shipped one."""
    return isinstance(name, str) and SEPARATOR in name


def split(name: str) -> tuple[Path, str]:
    """(the file, the object's name) of `path.py:Name`; one line where either is missing."""
    head, _, attribute = name.rpartition(":")
    if not head.endswith(".py") or not attribute.isidentifier():
        raise InputError(f"'{name}': a file's object is named path/to/file.py:Name (Name a "
                         "Python identifier)")
    return Path(head), attribute


def absolute(name: str) -> str:
    """`path.py:Name` with the path resolved against the working directory, checked to exist."""
    path, attribute = split(name)
    path = path.expanduser().resolve()
    if not path.is_file():
        raise InputError(f"{path}: no such file (named by '{name}')")
    return f"{path}:{attribute}"


def content_hash(path) -> str:
    """The sha256 of the file's bytes (16 hex digits, as the code fingerprints')."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


_MODULES: dict[tuple[str, str], object] = {}  # (path, content hash) -> its module


def module(path: Path):
    """The module the file defines, imported once per content; a failing import is one line."""
    path = Path(path).resolve()
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    key = (str(path), content_hash(path))
    if key in _MODULES:
        return _MODULES[key]
    name = MODULE_PREFIX + hashlib.sha256(key[0].encode()).hexdigest()[:12] + "_" + (
        "".join(c if c.isalnum() else "_" for c in path.stem))
    spec = importlib.util.spec_from_file_location(name, path)
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except (Exception, SystemExit) as exc:
        del sys.modules[name]
        raise InputError(f"{path}: fails to import: {type(exc).__name__}: "
                         f"{first_line(exc)}") from None
    _MODULES[key] = loaded
    return loaded


def load(name: str, what: str):
    """The object `path.py:Name` names; `what` it should be, for the message where it lacks it."""
    path, attribute = split(name)
    found = getattr(module(path), attribute, None)
    if found is None:
        raise InputError(f"{path.resolve()}: defines no '{attribute}' (the {what} "
                         f"'{name}' names)")
    return found


def imported(path) -> set[str]:
    """The top-level packages a file imports, read, not run (which library's optimizer it holds
    is known before any framework starts)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        tree = ast.parse(path.read_bytes(), str(path))
    except (SyntaxError, ValueError) as exc:
        raise InputError(f"{path}: fails to import: SyntaxError: {first_line(exc)}") from None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.partition(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.partition(".")[0])
    return names

