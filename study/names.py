"""Short names for the files a reader meets in every sentence of a report (a data set's CSV, a
model's Python file): the full path is said once, then the file's stem. A long absolute path
repeated in every answer, table row and figure title hides what the sentence says."""

from __future__ import annotations

from pathlib import PurePath

FILE_SUFFIXES = (".csv", ".parquet", ".pq", ".npz", ".py")


def is_file_name(text: str) -> bool:
    """A path to a file, or `file.py:function` (a model), not a shipped name like `digits`."""
    path = str(text).rsplit(":", 1)[0] if str(text).count(":") == 1 else str(text)
    return "/" in path or path.lower().endswith(FILE_SUFFIXES)


def short_name(text: str) -> str:
    """`/data/harbour.csv` -> `harbour`; `models/net.py:build` -> `net`; `net.py:make` ->
    `net:make` (a function other than the usual `build` is kept); shipped names unchanged."""
    text = str(text)
    if not is_file_name(text):
        return text
    path, _, function = text.rpartition(":") if text.count(":") == 1 else (text, "", "")
    stem = PurePath(path).stem
    return f"{stem}:{function}" if function and function != "build" else stem


def short_names(values) -> dict[str, str]:
    """Each distinct value's short name, unique among them: two files of one stem keep their
    folder (`a/data`, `b/data`), and where that still collides, the full text."""
    values = list(dict.fromkeys(str(v) for v in values))
    names = {v: short_name(v) for v in values}
    for level in (1, None):
        taken: dict[str, list[str]] = {}
        for value, name in names.items():
            taken.setdefault(name, []).append(value)
        for owners in taken.values():
            if len(owners) > 1:
                for value in owners:
                    parent = PurePath(value.rsplit(":", 1)[0]).parent.name
                    names[value] = f"{parent}/{short_name(value)}" if level and parent else value
    return names


def named_once(values, what: str = "") -> str | None:
    """The sentence that says once what each short name stands for ('my is /tmp/my.npz'), or
    None where every name is already its full text."""
    pairs = [(name, value) for value, name in short_names(values).items() if name != value]
    if not pairs:
        return None
    lead = f"{what}: " if what else ""
    return lead + "; ".join(f"{name} is {value}" for name, value in pairs) + "."
