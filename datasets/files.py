"""What a file the toolkit reads must be: a regular file, said by kind where it is not.

A FIFO would hold the reader until a writer comes, `/dev/zero` never ends, and both stat as
size 0 (so "empty" was said of them): every data input (CSV/Parquet, .npz, model files,
configs, --initial) is checked here before it is opened.
"""

from __future__ import annotations

import stat
from pathlib import Path

from convergence_study.errors import InputError

KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
         (stat.S_ISSOCK, "a socket"), (stat.S_ISREG, "a file"))


def kind_of(mode: int) -> str:
    """A file's kind in words, from its st_mode."""
    return next((words for test, words in KINDS if test(mode)), "not a regular file")


def check_input_file(path, where: str) -> Path:
    """`path` is there and is a regular file (symlinks followed), or one line naming it."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{where}: file '{path}' does not exist") from None
    except OSError as exc:
        raise InputError(f"{where}: cannot read '{path}' ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise InputError(f"{where}: '{path}' is {kind_of(mode)}, not a regular file")
    return path
