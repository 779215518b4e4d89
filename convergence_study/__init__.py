"""The installed `convergence-study` command, and the only package the toolkit installs.

The toolkit's own packages have common names (`datasets` is also Hugging Face's), so they never
go to the top of site-packages: a regular install puts them inside this package
(`convergence_study/_lib/study`, ..., mapped in setup.py), an editable one maps those names to
the repository. The command puts that folder first on its own sys.path, and on PYTHONPATH for
the processes it starts (`study.sweep.interpreter`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def root() -> Path:
    """The folder holding the toolkit's `study`, `optimizers` and `datasets`: inside this
    package for a regular install, the repository for an editable one or a checkout."""
    try:
        spec = importlib.util.find_spec(f"{__name__}._lib.study")
    except ModuleNotFoundError:  # a checkout, not installed
        spec = None
    if spec is None or spec.origin is None:
        return Path(__file__).resolve().parents[1]
    return Path(spec.origin).resolve().parents[1]


def activate() -> Path:
    """Make `import study` (optimizers, datasets) mean the toolkit's in this process."""
    folder = root()
    if sys.path[:1] != [str(folder)]:
        sys.path.insert(0, str(folder))
    return folder


def run() -> None:
    """The `convergence-study` console script."""
    activate()
    from study import interrupts  # light: signals held before the command's module is made

    interrupts.hold()
    from study.__main__ import run as run_command

    run_command()
