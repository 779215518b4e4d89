"""Which code measured a row: a hash of the contents of the source (and input data) files a spec
ran through, as the study's `code_files` lists them, so that editing `optimizers/gd.py` makes
the GD rows stale and leaves the L-BFGS rows alone. A folder keeps the file list behind each
fingerprint (`fingerprints/<hash>.json`), so a stale row can be explained file by file.
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from study.output import check_kind, write_text_atomic
from study.sweep.interpreter import ROOT

# The engine's own files that take part in a measurement (the rest only schedules and stores).
ENGINE_FILES = ("study/sweep/child.py", "study/sweep/noise.py", "study/sweep/forkserver.py",
                "study/sweep/cache.py")


def python_files(folder: str) -> list[str]:
    """The .py files under a folder of the project, as project-relative paths."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*.py"))


def relative(path) -> str:
    return str(Path(path).resolve().relative_to(ROOT))


@lru_cache(maxsize=4096)
def _file_hash(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256((ROOT / path).read_bytes()).hexdigest()[:16]


def manifest(paths) -> dict[str, str]:
    out = {}
    for path in sorted(set(paths)):
        stat = (ROOT / path).stat()
        out[path] = _file_hash(path, stat.st_mtime_ns, stat.st_size)
    return out


def fingerprint_of(files: dict[str, str]) -> str:
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def save(folder: Path, files: dict[str, str]) -> str:
    """Store the file list behind a fingerprint; returns the hash."""
    fingerprint = fingerprint_of(files)
    path = folder / f"{fingerprint}.json"
    if not path.exists():
        write_text_atomic(json.dumps(files, indent=1, sort_keys=True) + "\n", path)
    return fingerprint


def explain(folder: Path, old: str | None, new: dict[str, str]) -> str:
    """Which files changed between a stored fingerprint and the current files."""
    if not old:
        return "no code fingerprint recorded"
    try:
        before = json.loads(check_kind(folder / f"{old}.json").read_text())
    except (OSError, ValueError):  # InputError included: a FIFO there is said, not waited on
        return f"code fingerprint {old} (its file list is not stored)"
    changed = sorted(p for p in new if p in before and before[p] != new[p])
    added = sorted(set(new) - set(before))
    removed = sorted(set(before) - set(new))
    parts = [f"changed {', '.join(changed)}" if changed else "",
             f"new {', '.join(added)}" if added else "",
             f"gone {', '.join(removed)}" if removed else ""]
    return "; ".join(p for p in parts if p) or "the same files"
