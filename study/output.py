"""Writing result files so that a reader never sees a partial one: temporary name, then rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd

from datasets.errors import InputError


class ResultsWriteError(RuntimeError):
    """Results could not be written (disk full, read-only folder): what is done stays intact."""


def check_output_path(path) -> Path:
    """Fail before any work if `path` cannot become a file: a directory, or under a file."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"--out '{path}' is a directory; give a file name")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError(f"--out '{path}' is inside '{parent}', which is a file")
    existing = next((p for p in path.parents if p.exists()), Path("."))
    try:  # a real probe: permission bits say nothing for root or read-only mounts
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise InputError(f"--out '{path}': cannot write in '{existing}' ({exc.strerror})") \
            from None
    return path


def check_output_folder(path) -> Path:
    """Fail before any work if `path` cannot become (or is not) a writable folder."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"--out '{path}' is a file, not a folder")
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError(f"--out '{path}' is inside '{parent}', which is a file")
    existing = path if path.exists() else next((p for p in path.parents if p.exists()), Path("."))
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise InputError(f"--out '{path}': cannot write in '{existing}' ({exc.strerror})") \
            from None
    return path


def write_atomic(path, write) -> None:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it into place: a failed
    write leaves the old file or nothing, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_parquet_atomic(frame: pd.DataFrame, path) -> None:
    write_atomic(path, lambda tmp: frame.to_parquet(tmp, index=False))


def write_text_atomic(text: str, path) -> None:
    write_atomic(path, lambda tmp: Path(tmp).write_text(text))
