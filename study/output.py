"""Writing result files so that a reader never sees a partial one: temporary name, then rename.

A failed write (disk full, read-only folder) leaves the old file or nothing, and says which file
in one line. Once the command has been interrupted (`study.interrupts`), nothing more is
written, even where a library swallowed the interrupt.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from convergence_study.errors import InputError
from datasets.files import kind_of
from study import interrupts

files_written = 0  # by this process: what an interrupted command says it leaves
# Every file and folder the command reads, noted by `reading`: no output may replace one.
inputs: list[Path] = []


def reading(*paths) -> None:
    """Note files or folders this command reads (None or a name not there is skipped)."""
    inputs.extend(Path(os.path.abspath(p)) for p in paths  # a later chdir changes nothing
                  if p is not None and os.path.exists(p))


class ResultsWriteError(OSError):
    """Results could not be written (disk full, read-only folder): what is done stays intact."""


# What marks a study's results folder: its study.json beside its runs. Only the sweep that owns
# the folder writes there, so no output flag of any command may point into one.
RESULTS_MARKER = "study.json"
RUNS_MARKERS = ("runs", "runs.parquet")


def check_output_path(path, flag: str = "--out") -> Path:
    """Fail before any work if `path` cannot become a regular file, would replace a file the
    command reads (`inputs`) or lies inside a results folder."""
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{flag} '{path}' is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise InputError(f"{flag} '{path}' is {_kind(path)}, not a regular file; give a file "
                         "name")
    _check_parents(path, flag)
    check_not_kept(path, flag)
    _probe(next((p for p in path.parents if p.exists()), Path(".")), path, flag)
    return path


def check_output_folder(path, flag: str = "--out", writes=(), own_results: bool = False) -> Path:
    """Fail before any work if `path` cannot become a writable folder, is or lies in a results
    folder (unless `own_results`: a sweep's own), or one of the files it `writes` is an input."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise InputError(f"{flag} '{path}' is {_kind(path)}, not a folder")
    _check_parents(path, flag)
    check_not_kept(path, flag, start=1 if own_results else 0)
    for name in writes:  # a file or a whole folder that the command writes
        check_not_kept(path / name, flag, start=2 if own_results else 1, holds=True)
    _probe(path if path.exists() else next((p for p in path.parents if p.exists()), Path(".")),
           path, flag)
    return path


def check_not_kept(path, flag: str, start: int = 1, holds: bool = False) -> None:
    """The one check behind every output flag: writing `path` must replace neither a file the
    command reads (by any name or link), nor anything in a folder it reads or in a results
    folder. `start=0` counts `path` itself as a possible results folder; `holds`: `path` is a
    folder written whole, so no input may lie in it."""
    path = Path(path)
    for read in inputs:
        if read.is_dir() and _inside(path, read):
            raise InputError(f"{flag} '{path}' is inside '{read}', which this command reads; "
                             "give a path outside it")
        if _same_file(path, read) or (holds and _inside(read, path)):
            raise InputError(f"{flag} '{path}' would replace '{read}', which this command "
                             "reads; give another file name")
    folder = results_folder_of(path, start)
    if folder is not None:
        raise InputError(f"{flag} '{path}' is inside the results folder '{folder}', which only "
                         "its own sweep (`study run`) writes; give a path outside it")


def results_folder_of(path, start: int = 1) -> Path | None:
    """The results folder holding `path` (by its own name or with symlinks resolved), if any."""
    for candidate in _names(path):
        for folder in (candidate, *candidate.parents)[start:]:
            if os.path.lexists(folder / RESULTS_MARKER) and \
                    any(os.path.lexists(folder / name) for name in RUNS_MARKERS):
                return folder
    return None


def _names(path) -> tuple[Path, Path]:
    """A path as given (made absolute) and with its symlinks resolved."""
    return Path(os.path.abspath(path)), Path(os.path.realpath(path))


def _inside(path: Path, folder: Path) -> bool:
    return any(f == p or f in p.parents for p in _names(path) for f in _names(folder))


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one is not there: nothing read is written over
        return False


def _check_parents(path: Path, flag: str) -> None:
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError(f"{flag} '{path}' is inside '{parent}', which is a file")


def _probe(folder: Path, path: Path, flag: str) -> None:
    """A real write: permission bits say nothing for root or read-only mounts."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise InputError(f"{flag} '{path}': cannot write in '{folder}' ({exc.strerror})") \
            from None


def check_kind(path, folder: bool = False, follow: bool = False) -> Path:
    """A name the toolkit opens by itself inside a folder must be a regular file (or a folder,
    `folder`) or absent: a FIFO would hang the open, and a symlink in a downloaded results folder
    would have the toolkit write through it (`follow` where the user named the path)."""
    path = Path(path)
    if not os.path.lexists(path):
        return path
    want = "a folder" if folder else "a regular file"
    if not follow and path.is_symlink():
        raise InputError(f"'{path}' is a symlink (to '{os.readlink(path)}'), not {want}: nothing "
                         "in a results folder is read or written through a link; remove it")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"'{path}' is a dangling symlink (to '{os.readlink(path)}'), not "
                         f"{want}; remove it") from None
    except OSError as exc:
        raise InputError(f"'{path}' cannot be used ({exc.strerror}); remove it") from None
    if not (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)):
        raise InputError(f"'{path}' is {_kind(path)}, not {want}; remove it")
    if not os.access(path, os.R_OK | (os.X_OK if folder else 0)):
        raise InputError(f"'{path}' cannot be read by this user; fix its permissions or "
                         "remove it")
    return path


def _kind(path: Path) -> str:
    return kind_of(path.stat().st_mode)


def write_files_atomic(writes: dict) -> None:
    """Write several files as one (`writes`: path -> `write(tmp)`): all go to temporary names
    first and are renamed only once all are complete, so a failure or an interrupt leaves the
    old files, never a mix or a part."""
    global files_written
    interrupts.check_before_writing()
    targets = {Path(path): write for path, write in writes.items()}
    for path in targets:  # whatever flag or name led here, an input is never replaced
        read = next((r for r in inputs if _same_file(path, r)), None)
        if read is not None:
            raise InputError(f"'{path}' is '{read}', which this command reads; nothing was "
                             "written: give another output name")
    created, temporaries, current = [], {}, None
    try:
        for path, write in targets.items():
            current = path
            if path.exists() and not path.is_file():
                raise ResultsWriteError(f"cannot write '{path}': it is {_kind(path)}, not a "
                                        "regular file")
            # the folders made for it, outermost first
            created += [p for p in (path.parent, *path.parent.parents) if not p.exists()][::-1]
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
            tmp.unlink(missing_ok=True)  # a link left there is not written through
            temporaries[path] = tmp
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            write(tmp)
        interrupts.check_before_writing()
        for path, tmp in temporaries.items():
            current = path
            os.replace(tmp, path)
            files_written += 1
    except ResultsWriteError:
        raise
    except OSError as exc:
        raise ResultsWriteError(f"cannot write '{current}': {exc.strerror or exc}") from None
    finally:
        for tmp in temporaries.values():
            tmp.unlink(missing_ok=True)
        for folder in reversed(created):  # folders made for files that were not written
            if not any(p.exists() for p in targets if folder in p.parents):
                with contextlib.suppress(OSError):  # not empty: something else is there
                    folder.rmdir()


def write_atomic(path, write) -> None:
    write_files_atomic({path: write})


def parquet_writer(table: pd.DataFrame | pa.Table):
    if isinstance(table, pa.Table):
        return lambda tmp: pq.write_table(table, tmp)
    return lambda tmp: table.to_parquet(tmp, index=False)


def text_writer(text: str):
    return lambda tmp: Path(tmp).write_text(text)


def write_parquet_atomic(frame: pd.DataFrame, path) -> None:
    write_atomic(path, parquet_writer(frame))


def write_text_atomic(text: str, path) -> None:
    write_atomic(path, text_writer(text))


def trace_path(out) -> str:
    """The trace table written beside a one-run command's `--out` table."""
    out = str(out)
    return (out[: -len(".parquet")] if out.endswith(".parquet") else out) + ".trace.parquet"


def no_follow(path, flags: int) -> int:
    """open()'s opener that never follows a symlink (closing check_kind's gap until the open)."""
    return os.open(path, flags | os.O_NOFOLLOW, 0o666)
