"""How many BLAS threads a NumPy run uses, chosen per run from the size of the matrix its loop
multiplies.

On a small problem a multi-threaded BLAS wakes its threads for every product and waits for them
(a 20000 x 6 gd step: 3.42 ms on two OpenBLAS threads, 0.35 ms on one); on a large one the
threads win. The crossover depends on the machine and the library, so it is measured once per
machine (`calibrate`) and cached in $CONVERGENCE_STUDY_CACHE, else
$XDG_CACHE_HOME/convergence-study, else ~/.cache/convergence-study (delete the file to measure
again). A run uses one thread below the crossover and the library's default from it up.

A count given for the run (`regress --blas-threads N`) wins once it is known to be possible
(`check`); a BLAS thread variable set in the environment is left alone. The calibration runs
before the run's clocks start; its cost is recorded apart (`blas_calibration_seconds`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import socket
import sys
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from convergence_study.errors import InputError
from datasets import values

AUTO = "auto"
ENVIRONMENT_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SOURCES = ("auto-measured", "environment", "given")
CACHE_VARIABLE = "CONVERGENCE_STUDY_CACHE"
CACHE_FILE = "blas_threads.json"
# the calibration: X of these many bytes (float64, COLUMNS columns, column-major as the NumPy
# backend lays it out), each timed REPEATS times per thread count, interleaved
SIZES = tuple(2**k for k in range(16, 27, 2))  # 64 KiB .. 64 MiB
COLUMNS = 8
REPEATS = 5
WORK_BYTES = 2**22  # products per timing: enough to read about 4 MiB (one for the largest)
FASTER = 0.9  # the default counts as faster where it takes under this fraction of one thread's
# A calibration while other processes used more than QUIET_CORES of the CPUs is measured again,
# up to ATTEMPTS in all, keeping each size's fastest time (load only ever slows a timing down).
QUIET_CORES = 0.3
ATTEMPTS = 3

_MEMO: dict[str, dict] = {}  # machine key -> crossover entry, once per process


@dataclass(frozen=True)
class Choice:
    """The BLAS thread count of one run and where it came from (a column each)."""

    threads: int | None  # None: no BLAS library found to ask
    source: str  # one of SOURCES
    crossover_bytes: int | None = None  # auto: from this size of X up, the default threads
    calibration_seconds: float | None = None  # auto: cost of the calibration in this process
    default_threads: int | None = None
    matrix_bytes: int | None = None

    def limits(self):
        """A context holding the BLAS libraries at `threads` (nothing where it is their own)."""
        if self.source == "environment" or self.threads is None \
                or self.threads == self.default_threads:
            return nullcontext()
        return controller().limit(limits=self.threads, user_api="blas")

    def columns(self) -> dict:
        return {"blas_threads": self.threads, "blas_threads_source": self.source,
                "blas_threads_crossover": self.crossover_bytes,
                "blas_calibration_seconds": self.calibration_seconds}

    def describe(self) -> str:
        """E.g. 'BLAS 1 thread (auto-measured: X 0.9 MiB, below the 4 MiB crossover)'."""
        count = f"{self.threads} thread{'s' if self.threads != 1 else ''}" \
            if self.threads is not None else "threads unknown"
        if self.source == "environment":
            why = f"given by the environment, {environment_setting()}"
        elif self.source == "given":
            why = "given"
        elif self.default_threads is not None and self.default_threads <= 1:
            why = "auto-measured: the library's default is one thread"
        elif self.crossover_bytes is None:
            why = "auto-measured: the library's threads were faster at no size calibrated"
        else:
            side = "below" if self.threads == 1 else "at or above"
            why = (f"auto-measured: X {mebibytes(self.matrix_bytes)}, {side} the "
                   f"{mebibytes(self.crossover_bytes)} crossover")
        return f"BLAS {count} ({why})"


def mebibytes(size: int | None) -> str:
    return "?" if size is None else f"{size / 2**20:.3g} MiB"


def check(where: str, value) -> str | int:
    """'auto' or a thread count >= 1 (an int or its digits) that this machine can run: within
    the CPUs this process may use and what the BLAS library takes (OpenBLAS caps a request
    silently: a count it capped would be recorded but never run)."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if value == AUTO:
        return AUTO
    try:
        value = values.integer(1).check(where, value)
    except InputError:
        raise InputError(f"{where} must be 'auto' or an integer >= 1, got {value!r}") from None
    cpus = usable_cpus()
    if value > cpus:
        raise InputError(f"{where} {value} is more than the {cpus} CPUs this process may use")
    ran = applied(value)
    if ran is not None and ran != value:
        raise InputError(f"{where} {value} is more than the BLAS library runs here: it caps "
                         f"the count at {ran}")
    return value


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the system has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def applied(threads: int) -> int | None:
    """The thread count the BLAS libraries report while held at `threads` (the fewest of
    several), or None where none is loaded."""
    with controller().limit(limits=threads, user_api="blas"):
        counts = [p["num_threads"] for p in blas_pools()]
    return min(counts, default=None)


def environment_setting() -> str | None:
    """The first BLAS thread variable set, as NAME=value, or None."""
    for name in ENVIRONMENT_VARIABLES:
        if os.environ.get(name):
            return f"{name}={os.environ[name]}"
    return None


_held: tuple[int, object] | None = None  # (modules imported when made, the controller)


def controller():
    """threadpoolctl's hold on the loaded BLAS libraries, made again only once more modules are
    imported (one of them may have loaded a library): making one walks every loaded library,
    5 ms twice a run, so a run's warm process makes it after its imports
    (study.sweep.forkserver). NumPy's and SciPy's libraries are loaded first."""
    global _held
    if _held is None or _held[0] != len(sys.modules):
        import scipy.linalg  # noqa: F401 -- SciPy's own BLAS, held like NumPy's
        from threadpoolctl import ThreadpoolController

        made = ThreadpoolController()
        _held = (len(sys.modules), made)
    return _held[1]


def blas_pools() -> list[dict]:
    return [i for i in controller().info() if i.get("user_api") == "blas"]


def machine_key(pools: list[dict]) -> str:
    """What the crossover depends on: the host, its CPUs, the BLAS libraries and NumPy."""
    described = sorted(json.dumps({k: p.get(k) for k in ("internal_api", "version",
                                                         "architecture", "num_threads",
                                                         "threading_layer", "filepath")},
                                  sort_keys=True) for p in pools)
    key = {"host": socket.gethostname(), "cpu": platform.processor() or platform.machine(),
           "cores": os.cpu_count(), "usable": usable_cpus(), "blas": described,
           "numpy": np.__version__}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def cache_path() -> Path:
    folder = os.environ.get(CACHE_VARIABLE)
    if not folder:
        base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        folder = Path(base) / "convergence-study"
    return Path(folder) / CACHE_FILE


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, key: str, entry: dict) -> None:
    """Add the entry atomically; a cache that cannot be written only means measuring again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = _read(path)
        data[key] = entry
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass


def _product_seconds(X, w, r, calls: int) -> float:
    """Seconds per product pair X @ w, X.T @ r (a gradient's two passes over X)."""
    start = time.perf_counter()
    for _ in range(calls):
        X @ w
        X.T @ r
    return (time.perf_counter() - start) / calls


def calibrate() -> dict:
    """Seconds per product pair at each size, one thread and the default interleaved, the
    fastest of REPEATS each; and the crossover."""
    held = controller()
    started, others_before = time.perf_counter(), _others_cpu_seconds()
    one, default = [], []
    for size in SIZES:
        rows = size // (COLUMNS * 8)
        arrays = (np.asfortranarray(np.full((rows, COLUMNS), 0.5)), np.full(COLUMNS, 0.25),
                  np.full(rows, 0.25), max(1, WORK_BYTES // size))
        _product_seconds(*arrays)  # pages touched and threads woken before any timing
        best_one, best_default = np.inf, np.inf
        for _ in range(REPEATS):
            with held.limit(limits=1, user_api="blas"):
                best_one = min(best_one, _product_seconds(*arrays))
            best_default = min(best_default, _product_seconds(*arrays))
        one.append(best_one)
        default.append(best_default)
    seconds = time.perf_counter() - started
    others = _others_cpu_seconds() - others_before
    return calibration_entry(list(SIZES), one, default, seconds, others_cores(others, seconds))


def others_cores(others: float, seconds: float) -> float | None:
    """Other processes' mean load in cores over a window; None where it cannot be known. A
    small negative is clock-tick rounding (zero); a large one means /proc/stat does not count
    this process (some containers), and then the load is unknown."""
    if not (seconds > 0 and math.isfinite(others)) or others < -max(0.05, 0.1 * seconds):
        return None
    return max(others, 0.0) / seconds


def calibration_entry(sizes, one, default, seconds: float, others_cores: float | None) -> dict:
    """What the cache keeps of a calibration: timings, crossover, cost and the others' load."""
    return {"sizes": list(sizes), "one_thread_seconds": list(one),
            "default_seconds": list(default), "crossover_bytes": crossover(sizes, one, default),
            "calibration_seconds": seconds, "others_cpu_cores": others_cores,
            "quiet": others_cores is None or others_cores <= QUIET_CORES, "attempts": 1,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _others_cpu_seconds() -> float:
    """CPU seconds busy since boot (/proc/stat less idle and I/O wait) less this process's own;
    NaN where /proc/stat cannot be read."""
    try:
        ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return float("nan")
    own = os.times()
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK") - own.user - own.system


def merged(old: dict, new: dict) -> dict:
    """Two calibrations of one machine as one: each size's fastest times and their crossover."""
    if old.get("sizes") != new["sizes"]:
        return new
    one, default = ([min(a, b) for a, b in zip(old[key], new[key], strict=True)]
                    for key in ("one_thread_seconds", "default_seconds"))
    return {**new, "one_thread_seconds": one, "default_seconds": default,
            "crossover_bytes": crossover(new["sizes"], one, default),
            "attempts": old.get("attempts", 1) + 1}


def crossover(sizes, one, default) -> int | None:
    """The smallest size at which the default is clearly faster (under FASTER of one thread's
    time) and at no larger size clearly slower; None where it is faster nowhere. Below it more
    threads buy nothing on a quiet machine and cost many times over on a busy one."""
    found = None
    for size, a, b in reversed(list(zip(sizes, one, default, strict=True))):
        if b > a / FASTER:
            break
        if b < FASTER * a:
            found = size
    return found


def measured(pools: list[dict]) -> tuple[dict, float]:
    """The machine's crossover entry and what getting it cost here (0 when read)."""
    key = machine_key(pools)
    if key in _MEMO:
        return _MEMO[key], 0.0
    path = cache_path()
    entry = _read(path).get(key)
    cost = 0.0
    if not isinstance(entry, dict) or "crossover_bytes" not in entry:
        entry = calibrate()
        cost = entry["calibration_seconds"]
        _write(path, key, entry)
    elif not entry.get("quiet", True) and entry.get("attempts", 1) < ATTEMPTS:
        fresh = calibrate()
        cost = fresh["calibration_seconds"]
        entry = merged(entry, fresh)
        _write(path, key, entry)
    _MEMO[key] = entry
    return entry, cost


def matrix_bytes(n: int, d: int, dtype, formulation: str = "data") -> int:
    """The bytes of the matrix each iteration multiplies: X (n x d) on the data formulation,
    X^T X (d x d) on the gram one."""
    itemsize = np.dtype(dtype).itemsize
    return (d * d if formulation == "gram" else n * d) * itemsize


def choose(size: int, requested: str | int = AUTO) -> Choice:
    """The thread count for a run whose loop multiplies a matrix of `size` bytes (before any
    clock: the first call on a machine calibrates)."""
    requested = check("blas_threads", requested)
    pools = blas_pools()
    default = max((p["num_threads"] for p in pools), default=None)
    if requested != AUTO:  # recorded as the library reports it under the limit, not as asked
        return Choice(applied(requested), "given", default_threads=default, matrix_bytes=size)
    if environment_setting() is not None:
        return Choice(default, "environment", default_threads=default, matrix_bytes=size)
    if default is None or default <= 1:  # nothing to choose between
        return Choice(default, "auto-measured", calibration_seconds=0.0,
                      default_threads=default, matrix_bytes=size)
    entry, cost = measured(pools)
    cross = entry["crossover_bytes"]
    threads = default if cross is not None and size >= cross else 1
    return Choice(threads, "auto-measured", cross, cost, default, size)


def report_sentence(runs) -> str | None:
    """The BLAS threads of a results table's NumPy runs in one sentence, or None (no row
    records them)."""
    if "blas_threads" not in runs:
        return None
    rows = runs[runs["blas_threads"].notna()]
    if rows.empty:
        return None
    counts = rows.groupby([rows["blas_threads"].astype(int), rows["blas_threads_source"]],
                          sort=True).size()
    parts = [f"{threads} ({source}) in {n} run{'s' if n != 1 else ''}"
             for (threads, source), n in counts.items()]
    crossovers = sorted({int(c) for c in (rows["blas_threads_crossover"].dropna()
                                          if "blas_threads_crossover" in rows else ())})
    measured = (f"; the measured crossover{'s' if len(crossovers) > 1 else ''} "
                f"{' and '.join(mebibytes(c) for c in crossovers)} of X (one thread below, the "
                "library's default from there up)") if crossovers else ""
    return f"BLAS threads of the NumPy runs: {'; '.join(parts)}{measured}."
