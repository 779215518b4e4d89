"""What pyproject.toml cannot say: where the toolkit's packages are installed.

`study`, `optimizers` and `datasets` go inside the uniquely named `convergence_study` package
(as convergence_study._lib.study and so on), never to the top of site-packages, where they would
overwrite or shadow packages of the same names (Hugging Face's `datasets`); an editable install
maps the same names to this repository. The command `convergence-study` puts that folder first
on its own path (convergence_study/__init__.py).
"""

from setuptools import find_packages, setup

TOOLKIT = ("study", "optimizers", "datasets")
LIB = "convergence_study._lib"

packages = find_packages(include=[f"{name}{tail}" for name in TOOLKIT for tail in ("", ".*")])
setup(packages=["convergence_study", *(f"{LIB}.{package}" for package in packages)],
      package_dir={f"{LIB}.{name}": name for name in TOOLKIT})
