"""The machine and software a run happened on, as flat env_* columns repeated on every row."""

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

from study.frameworks.registry import FRAMEWORKS
from study.sweep.interpreter import ROOT, SPIN_VARIABLE, short_spin

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS", "OPENBLAS_CORETYPE",
                    SPIN_VARIABLE)
short_spin()  # before any run's process starts (each run's row records it, as the others)
# the NumPy stack every run uses, then each framework's distributions (absent ones: None)
PACKAGES = ("numpy", "scipy", "pandas", "pyarrow",
            *dict.fromkeys(p for f in FRAMEWORKS.values() for p in f.packages))


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


def _blas() -> tuple[str, str | None]:
    """The BLAS libraries loaded and the kernel each chose for this CPU (OpenBLAS picks
    SkylakeX, Haswell, Zen ... at load time, several times faster with one than another)."""
    import scipy.linalg  # noqa: F401 -- load SciPy's BLAS too, so every process reads alike
    from threadpoolctl import threadpool_info

    blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    libs = sorted({f"{i['internal_api']} {i.get('version') or ''} ({i['num_threads']} threads)"
                   for i in blas})
    kernels = sorted({str(i["architecture"]) for i in blas if i.get("architecture")})
    if libs:
        return "; ".join(libs), "; ".join(kernels) or None
    import numpy as np

    config = np.show_config(mode="dicts") or {}
    blas = config.get("Build Dependencies", {}).get("blas", {})
    return f"{blas.get('name', 'unknown')} {blas.get('version', '')}".strip(), None


def _memory_gb() -> float | None:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


UNKNOWN_COMMIT = "unknown"


def _git_commit() -> str:
    """The project's own commit ("+dirty" for uncommitted changes), or "unknown". Only where the
    project root is the top of a git work tree: not another repository it was unpacked in."""
    def git(*arguments):
        return subprocess.run(["git", "-C", str(ROOT), *arguments], capture_output=True,
                              text=True, timeout=10)

    try:
        top = git("rev-parse", "--show-toplevel").stdout.strip()
        if not top or Path(top).resolve() != ROOT.resolve():
            return UNKNOWN_COMMIT
        commit = git("rev-parse", "HEAD").stdout.strip()
        dirty = git("status", "--porcelain", "--untracked-files=no").stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN_COMMIT
    if not commit:
        return UNKNOWN_COMMIT
    return f"{commit}+dirty" if dirty else commit


@lru_cache(maxsize=1)
def collect() -> dict:
    """Environment columns (env_*), gathered once per process."""
    gpu, driver = _gpus()
    blas, kernel = _blas()
    env = {
        "env_host": socket.gethostname(),
        "env_cpu": _cpu_model(),
        "env_cores": os.cpu_count(),
        "env_memory_gb": _memory_gb(),
        "env_gpu": gpu,
        "env_gpu_driver": driver,
        "env_python": sys.version.split()[0],
        "env_platform": platform.platform(),
        "env_blas": blas,
        "env_blas_kernel": kernel,
        "env_git_commit": _git_commit(),
    }
    env.update({f"env_{p.replace('-', '_')}": _version(p) for p in PACKAGES})
    env.update({f"env_{v.lower()}": os.environ.get(v) for v in THREAD_VARIABLES})
    return env


# What decides whether a timing taken then still stands now: software, BLAS and its kernel (a
# CPU model name can hide masked instruction sets in a virtual machine), thread settings and the
# processor. Not the host name or platform (the same machine image measures alike), nor memory
# (a run that does not fit is oom, not slower), nor the GPU (compared as its own column).
TIMING_ENVIRONMENT = ("env_cpu", "env_cores", "env_python", "env_blas", "env_blas_kernel",
                      *(f"env_{p.replace('-', '_')}" for p in PACKAGES),
                      *(f"env_{v.lower()}" for v in THREAD_VARIABLES))


def fingerprint(env: dict | None = None) -> str:
    """A short hash of the environment columns that matter for timing."""
    import hashlib
    import json

    env = collect() if env is None else env
    values = {key: env.get(key) for key in TIMING_ENVIRONMENT}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]
