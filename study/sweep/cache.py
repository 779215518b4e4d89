"""Things a sweep makes once and its runs reuse (data sets and their reference optima), under a
key of their parameters and the code that makes them.

An entry is a folder filled under a temporary name and renamed into place, so a reader sees a
whole entry or none. Entries are read into memory by the run (no memory-mapping: page faults on
first touch would move reading the data into the timed loop).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from study.output import check_kind


def key_digest(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:20]


def entry(cache_dir: Path, key: dict, make: Callable[[Path], None]) -> Path:
    """The folder holding what `make(folder)` writes for `key`, made on first use."""
    cache_dir = check_kind(Path(cache_dir), folder=True, follow=True)  # train --cache: named
    path = check_kind(cache_dir / key_digest(key), folder=True)
    if check_kind(path / "key.json").is_file():
        return path
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache_dir / f".{path.name}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        make(tmp)
        (tmp / "key.json").write_text(json.dumps(key, sort_keys=True, default=str))
        os.rename(tmp, path)
    except OSError:
        if not (path / "key.json").is_file():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return path
