"""How the toolkit starts another Python process: with its own packages first (`datasets` is
also Hugging Face's, and an installed toolkit keeps its packages out of site-packages' top
level: convergence_study/__init__.py).
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
    """The argv and environment (os.environ plus `variables`) of `python ARGS` importing this
    toolkit's packages: ROOT first on PYTHONPATH, and -P, so that the working directory does
    not come before it."""
    env = {**os.environ, **variables}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return [python, "-P", *args], env
