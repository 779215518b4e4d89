"""How the toolkit starts another Python process: with its own packages first.

`study`, `optimizers` and `datasets` are common names (Hugging Face's `datasets` is in most ML
environments), and an installed toolkit keeps its packages out of site-packages' top level (see
convergence_study/__init__.py). Every process the toolkit starts (fork servers, GPU probes)
must still import them, and the toolkit's own copies, from any working directory.
"""

from __future__ import annotations

import os
import sys

from study.sweep.fingerprint import ROOT

# a helper process's environment that keeps TensorFlow's C++ messages (those it writes after
# reading the variable) off its stderr, should its Keras load TensorFlow
QUIET_LOGS = {"TF_CPP_MIN_LOG_LEVEL": "3"}


def python_command(*args: str, python: str = sys.executable,
                   **variables: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment (os.environ plus `variables`) of `python ARGS` such that the
    child imports this toolkit's packages, those of the code now running: ROOT first on
    PYTHONPATH, and -P, so that `-m` and `-c` do not put the working directory (which may hold
    a `datasets` package of its own) before it."""
    env = {**os.environ, **variables}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return [python, "-P", *args], env
