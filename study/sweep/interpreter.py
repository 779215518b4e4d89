"""How the toolkit starts another Python process: with its own packages first (`datasets` is
also Hugging Face's, and an installed toolkit keeps its packages out of site-packages' top
level: convergence_study/__init__.py), and OpenBLAS's idle threads spinning briefly. Light on
purpose: `study.sweep.head_start` starts a process before the command's heavy imports.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the folder holding datasets/, optimizers/, study/

# OpenBLAS's threads spin about 0.1 s after they last worked; a run forked from a warm process
# makes them anew when its thread count is set, and on 2 cores their spinning took the CPU from
# the run's first 0.1 s (a 1 ms L-BFGS run took 8 ms). Spinning 2**20 cycles (under 1 ms) ends
# that and still keeps them awake between a loop's products. Read when OpenBLAS loads: set before
# any run's process starts; a value in the environment is the user's and stays.
SPIN_VARIABLE = "OPENBLAS_THREAD_TIMEOUT"
SPIN_EXPONENT = "20"

# a helper process's environment that keeps TensorFlow's C++ messages (those it writes after
# reading the variable) off its stderr, should its Keras load TensorFlow
QUIET_LOGS = {"TF_CPP_MIN_LOG_LEVEL": "3"}


def short_spin() -> None:
    """Have the OpenBLAS of every process started from here on spin briefly (SPIN_VARIABLE)."""
    os.environ.setdefault(SPIN_VARIABLE, SPIN_EXPONENT)


def python_command(*args: str, python: str = sys.executable,
                   **variables: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment (os.environ plus `variables`) of `python ARGS` importing this
    toolkit's packages: ROOT first on PYTHONPATH, and -P, so that the working directory does
    not come before it."""
    env = {**os.environ, **variables}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return [python, "-P", *args], env
