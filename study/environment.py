"""The machine and software a run happened on, as flat columns repeated on every result row."""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
import sys
from functools import lru_cache
from importlib import metadata
from pathlib import Path

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OPENBLAS_CORETYPE")
PACKAGES = ("numpy", "scipy", "tensorflow", "pandas", "pyarrow", "tensorflow-probability")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _gpus() -> tuple[str | None, str | None]:
    """GPU names and driver from nvidia-smi when present (TensorFlow is not imported for this)."""
    if shutil.which("nvidia-smi") is None:
        return None, None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10, check=True).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None, None
    if not out:
        return None, None
    names = "; ".join(line.split(",")[0].strip() for line in out)
    return names, out[0].split(",")[-1].strip()


def _blas() -> str:
    try:
        from threadpoolctl import threadpool_info

        libs = [f"{i['internal_api']} {i.get('version') or ''} ({i['num_threads']} threads)"
                for i in threadpool_info() if i.get("user_api") == "blas"]
        if libs:
            return "; ".join(libs)
    except ImportError:
        pass
    import numpy as np

    config = np.show_config(mode="dicts") or {}
    blas = config.get("Build Dependencies", {}).get("blas", {})
    return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip()


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        out = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip() or None
    return f"{commit}+dirty" if commit and dirty else commit


@lru_cache(maxsize=1)
def collect() -> dict:
    """Environment columns (env_*), gathered once per process."""
    gpu, driver = _gpus()
    env = {
        "env_host": socket.gethostname(),
        "env_cpu": _cpu_model(),
        "env_cores": os.cpu_count(),
        "env_gpu": gpu,
        "env_gpu_driver": driver,
        "env_python": sys.version.split()[0],
        "env_platform": platform.platform(),
        "env_blas": _blas(),
        "env_git_commit": _git_commit(),
    }
    env.update({f"env_{p.replace('-', '_')}": _version(p) for p in PACKAGES})
    env.update({f"env_{v.lower()}": os.environ.get(v) for v in THREAD_VARIABLES})
    return env
