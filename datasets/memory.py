"""A resource check before allocating: a data set that cannot fit is refused in one line
("needs 119 GiB, 3.2 GiB available") instead of failing part-way with a MemoryError."""

from __future__ import annotations

import resource
from pathlib import Path

import psutil

from convergence_study.errors import InputError


def available_bytes() -> int:
    """Memory this process may still take: free RAM, within an address-space limit (ulimit -v)
    and a cgroup's memory limit when either is set."""
    limits = [psutil.virtual_memory().available]
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        limits.append(soft - psutil.Process().memory_info().vms)
    try:
        cgroup = Path("/sys/fs/cgroup")
        maximum = (cgroup / "memory.max").read_text().strip()
        if maximum != "max":
            limits.append(int(maximum) - int((cgroup / "memory.current").read_text()))
    except (OSError, ValueError):
        pass
    return max(0, min(limits))


def require_memory(what: str, nbytes: float) -> None:
    available = available_bytes()
    if nbytes > available:
        raise InputError(f"{what} needs about {nbytes / 2**30:.1f} GiB, "
                         f"{available / 2**30:.1f} GiB available; use fewer rows")
