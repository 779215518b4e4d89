"""Lines the toolkit rightly prints on top of a command's own output in some environments, each
by name, for the tests that count a command's lines.

A test that asserts "one line on stderr" (or "only the progress lines, then one") holds in any
shell only if it knows which lines the shell itself may add. Rather than strip every extra line,
a test names the warnings its command may rightly print; a line that is neither the command's
own nor one of the named warnings still fails it. tests/test_dask_executor.py checks that each
pattern matches the line the program prints, and only when the environment calls for it.
"""

from __future__ import annotations

import re

KNOWN = {
    # study/sweep/dask.py, at the start of a Dask sweep whose workers' runs inherit one BLAS
    # thread: OMP_NUM_THREADS=1 (or OPENBLAS_NUM_THREADS=1, MKL_NUM_THREADS=1) in the shell, as
    # on a cluster node or in a batch job, or a nanny's default on a cluster started elsewhere
    "dask one BLAS thread": re.compile(
        r"dask: warning: \d+ workers \(e\.g\. \S+\) give their runs one BLAS thread "
        r"\(OMP_NUM_THREADS=1 or alike, .*\); set these variables in the worker's shell .*"),
}


def named(line: str, warnings=()) -> str | None:
    """The name of the known warning among `warnings` that `line` is, or None."""
    unknown = set(warnings) - set(KNOWN)
    assert not unknown, f"no such known line: {sorted(unknown)}"
    return next((name for name in warnings if KNOWN[name].fullmatch(line.strip())), None)


def without(text: str, warnings=()) -> list[str]:
    """The lines of `text` (as `text.strip().splitlines()`) less the named known warnings."""
    return [line for line in text.strip().splitlines() if named(line, warnings) is None]
