"""The CNN feed-mode study: is `tf.placeholder` really 4-5x faster than a constant?

The network of the original question: conv2d (3x3x1x6, stride 1, VALID) -> avg_pool (2x2,
stride 2, VALID) -> relu on N x 32 x 32 x 1 inputs. Each *mode* feeds the same data to the same
network a different way (TF1 graph constants, placeholder, resident variable, eager, tf.function,
XLA, and one fused convolution). Every run (mode x grappler variant x dtype x N) happens in a fresh
Python process (`study.feedmode_worker`) with its own graph and session, under a time budget and
a memory watchdog. A finished run is written at once to `<out>/runs/<run_id>.json`; the tables
`<out>/runs.parquet` (one row per run) and `<out>/calls.parquet` (one row per timed call) are
assembled from those files, so an interrupted study resumes where it stopped.

This module does not import TensorFlow (the worker does), so the CLI starts quickly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from itertools import product
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
from numpy.lib.stride_tricks import sliding_window_view
from scipy.signal import convolve2d

from datasets.errors import InputError
from study.environment import collect as collect_environment
from study.output import check_output_path, write_parquet_atomic

# Bump when what a run measures changes, so that old per-run files are not resumed from.
MEASUREMENT_VERSION = 1

IMAGE = 32          # input height and width
KERNEL = 3          # convolution kernel size (3 x 3 x 1 x CHANNELS)
CHANNELS = 6
POOL = 2            # average pool window and stride
OUT = (IMAGE - KERNEL + 1) // POOL   # 15: output height and width


@dataclass(frozen=True)
class Mode:
    api: str      # tf1 (tf.compat.v1 graph + session), eager, function (tf.function)
    feed: str     # how the input reaches the ops
    model: str    # conv-pool (the original network) or fused-conv (one strided convolution)
    xla: bool
    help: str


MODES = {
    "numpy": Mode("tf1", "numpy", "conv-pool", False,
                  "TF1 graph; the NumPy array passed straight into the ops (a graph constant)"),
    "constant": Mode("tf1", "constant", "conv-pool", False,
                     "TF1 graph; tf.constant(x) (a graph constant)"),
    "placeholder": Mode("tf1", "placeholder", "conv-pool", False,
                        "TF1 graph; tf.placeholder fed with feed_dict at every call"),
    "variable": Mode("tf1", "variable", "conv-pool", False,
                     "TF1 graph; a tf.Variable initialised once from a placeholder (resident)"),
    "eager-numpy": Mode("eager", "numpy", "conv-pool", False,
                        "TF2 eager ops called on the NumPy array"),
    "eager-tensor": Mode("eager", "tensor", "conv-pool", False,
                         "TF2 eager ops called on a tensor made once"),
    "function-arg": Mode("function", "argument", "conv-pool", False,
                         "tf.function with an input_signature, the data passed as a tensor"),
    "function-const": Mode("function", "captured-tensor", "conv-pool", False,
                           "tf.function closing over tf.constant(x) (captured by reference)"),
    "function-numpy": Mode("function", "numpy", "conv-pool", False,
                           "tf.function closing over the NumPy array (embedded as a constant)"),
    "function-xla": Mode("function", "argument", "conv-pool", True,
                         "function-arg with jit_compile=True (XLA)"),
    "fused": Mode("function", "argument", "fused-conv", False,
                  "function-arg computing one 4x4 stride-2 convolution (3x3 kernel * 2x2 box "
                  "of 1/4), then relu: no 30x30 intermediate"),
}
DTYPES = ("float64", "float32")
DEVICES = ("cpu", "gpu")
# Graph optimisation variants of the TF1 modes (the ablation of the first-call cost).
GRAPPLER = {
    "default": "TensorFlow's defaults",
    "no-constant-folding": "Grappler's constant folding off (RewriterConfig.constant_folding=OFF)",
    "no-folding": "Grappler's and the classic graph optimizer's constant folding off (L0 with CSE "
                  "and function inlining kept), every other optimisation on",
    "off": "all graph optimisations off (OptimizerOptions L0, Grappler meta-optimizer disabled)",
}
TOLERANCE = {"float64": 1e-12, "float32": 1e-5}   # of the check against the NumPy reference
STATUSES = ("ok", "mismatch", "error", "oom", "timeout")

DEFAULTS = {"name": "feedmode", "description": "", "n": [60000], "dtypes": ["float64"],
            "modes": list(MODES), "grappler": ["default"], "calls": 10, "device": "cpu",
            "seed": 0, "check_n": 16, "run_timeout": 900.0, "memory_budget_gb": None}
FLAGS = {"n": "--n", "dtypes": "--dtype", "modes": "--modes", "grappler": "--grappler",
         "calls": "--calls", "device": "--device", "seed": "--seed", "check_n": "--check-n",
         "run_timeout": "--run-timeout", "memory_budget_gb": "--memory-budget-gb"}
TOP_KEYS = ("name", "description", "calls", "device", "seed", "check_n", "run_timeout",
            "memory_budget_gb", "grid")
GRID_KEYS = ("name", "modes", "dtypes", "n", "grappler")


# --- the computation and its reference -------------------------------------------------------

def make_input(n: int, dtype: str, seed: int = 0) -> np.ndarray:
    """N x 32 x 32 x 1 uniform [0, 1); the first m rows do not depend on n (checks reuse them)."""
    x = np.random.default_rng([seed, 0]).random((n, IMAGE, IMAGE, 1))
    return x.astype(dtype, copy=False)


def make_kernel(dtype: str, seed: int = 0) -> np.ndarray:
    """The 3 x 3 x 1 x 6 convolution kernel."""
    k = np.random.default_rng([seed, 1]).standard_normal((KERNEL, KERNEL, 1, CHANNELS)) / KERNEL
    return k.astype(dtype, copy=False)


def fused_kernel(kernel: np.ndarray) -> np.ndarray:
    """The 4x4 kernel whose stride-2 convolution is avg_pool(2x2, stride 2) of the 3x3 one.

    pool[p, q] = 1/4 sum_{di,dj in {0,1}} sum_{a,b} x[2p+di+a, 2q+dj+b] k[a, b]
               = sum_{u,v in 0..3} x[2p+u, 2q+v] K[u, v],   K = k (full 2-D convolution) box/4.
    """
    box = np.full((POOL, POOL), 1.0 / (POOL * POOL))
    size = KERNEL + POOL - 1
    out = np.empty((size, size, 1, kernel.shape[-1]), dtype=np.float64)
    for c in range(kernel.shape[-1]):
        out[:, :, 0, c] = convolve2d(kernel[:, :, 0, c].astype(np.float64), box, mode="full")
    return out.astype(kernel.dtype)


def reference(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """conv (VALID cross-correlation, as tf.nn.conv2d) -> 2x2 average pool -> relu, in float64."""
    windows = sliding_window_view(x[..., 0].astype(np.float64), (KERNEL, KERNEL), axis=(1, 2))
    conv = np.einsum("nijab,abc->nijc", windows, kernel[:, :, 0, :].astype(np.float64))
    n, h, w, c = conv.shape
    pooled = conv[:, : h // POOL * POOL, : w // POOL * POOL]
    pooled = pooled.reshape(n, h // POOL, POOL, w // POOL, POOL, c).mean(axis=(2, 4))
    return np.maximum(pooled, 0.0)


def fused_reference(x: np.ndarray, kernel4: np.ndarray) -> np.ndarray:
    """One 4x4 stride-2 VALID convolution -> relu, in float64 (the fused mode's arithmetic)."""
    size = kernel4.shape[0]
    windows = sliding_window_view(x[..., 0].astype(np.float64), (size, size), axis=(1, 2))
    windows = windows[:, ::POOL, ::POOL]
    conv = np.einsum("nijab,abc->nijc", windows, kernel4[:, :, 0, :].astype(np.float64))
    return np.maximum(conv, 0.0)


def checksum(y: np.ndarray) -> float:
    return float(np.sum(y, dtype=np.float64))


# --- one run's specification -------------------------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """One point of the study. Its hash is the run id: the same spec is never measured twice."""

    mode: str
    dtype: str
    n: int
    grappler: str = "default"
    calls: int = 10
    device: str = "cpu"
    seed: int = 0
    check_n: int = 16

    @property
    def run_id(self) -> str:
        key = json.dumps({**asdict(self), "version": MEASUREMENT_VERSION}, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    @property
    def label(self) -> str:
        variant = "" if self.grappler == "default" else f" grappler={self.grappler}"
        return f"{self.mode} {self.dtype} n={self.n}{variant}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Spec:
        return cls(**json.loads(text))

    def columns(self) -> dict:
        mode = MODES[self.mode]
        return {"run_id": self.run_id, **asdict(self), "api": mode.api, "feed": mode.feed,
                "model": mode.model, "xla": mode.xla}


# --- configuration: TOML file and command-line flags -----------------------------------------

def _as_list(value, where: str, kind, allowed=None) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise InputError(f"{where} is empty")
    for v in values:
        if kind is int and (not isinstance(v, int) or isinstance(v, bool)):
            raise InputError(f"{where}: '{v}' is not an integer")
        if kind is str and not isinstance(v, str):
            raise InputError(f"{where}: '{v}' is not a string")
        if allowed is not None and v not in allowed:
            raise InputError(f"{where}: unknown value '{v}'; allowed: {', '.join(allowed)}")
        if kind is int and v <= 0:
            raise InputError(f"{where}: {v} must be a positive integer")
    return values


def _positive(value, where: str, kind=float):
    ok_type = (int,) if kind is int else (int, float)
    if not isinstance(value, ok_type) or isinstance(value, bool) or not value > 0:
        raise InputError(f"{where} must be a positive {'integer' if kind is int else 'number'}, "
                         f"not {value!r}")
    return value


def load_config(path) -> dict:
    """Read and check a study TOML: an unknown key is named with the allowed ones."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            config = tomllib.load(handle)
    except FileNotFoundError:
        raise InputError(f"--config '{path}' does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{path}: cannot read TOML: {first_line}") from None
    for key in config:
        if key not in TOP_KEYS:
            raise InputError(f"{path}: unknown key '{key}'; allowed: {', '.join(TOP_KEYS)}")
    grids = config.get("grid", [])
    if not isinstance(grids, list) or not all(isinstance(g, dict) for g in grids):
        raise InputError(f"{path}: 'grid' must be an array of tables ([[grid]])")
    for number, grid in enumerate(grids, 1):
        for key in grid:
            if key not in GRID_KEYS:
                raise InputError(f"{path}: unknown key '{key}' in [[grid]] {number}; "
                                 f"allowed: {', '.join(GRID_KEYS)}")
    config["_source"] = str(path)
    return config


@dataclass(frozen=True)
class Study:
    name: str
    specs: tuple[Spec, ...]
    out: Path
    run_timeout: float
    memory_budget_gb: float
    skipped_combinations: int


def default_memory_budget_gb() -> float:
    """80% of the machine's memory: a run above it is stopped before the machine swaps or the
    kernel's OOM killer picks a process of its own choosing."""
    return round(0.8 * psutil.virtual_memory().total / 2**30, 1)


def build_study(config: dict | None = None, overrides: dict | None = None) -> Study:
    """Specs from a config (or the defaults) with command-line overrides applied to every grid.

    Grappler variants other than 'default' apply to the TF1 modes only; other combinations of a
    grid are skipped (and counted), not run. Nothing is written here.
    """
    config = dict(config or {})
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    source = config.pop("_source", "command line")
    top = {k: config.get(k, DEFAULTS.get(k)) for k in TOP_KEYS if k != "grid"}
    top.update({k: v for k, v in overrides.items() if k in top})

    def name_of(key: str, where: str = source) -> str:
        """Where a value came from, for error messages: its flag, or the file and key."""
        return FLAGS[key] if key in overrides else f"{where}: {key}"

    name = top["name"]
    if not isinstance(name, str) or not name or "/" in name:
        raise InputError(f"{source}: name must be a non-empty string without '/', not {name!r}")
    if not isinstance(top["description"], str):
        raise InputError(f"{source}: description must be a string")
    calls = _positive(top["calls"], name_of("calls"), int)
    seed = top["seed"]
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InputError(f"{name_of('seed')} must be a non-negative integer, not {seed!r}")
    check_n = _positive(top["check_n"], name_of("check_n"), int)
    run_timeout = float(_positive(top["run_timeout"], name_of("run_timeout")))
    budget = top["memory_budget_gb"]
    budget = default_memory_budget_gb() if budget is None else float(
        _positive(budget, name_of("memory_budget_gb")))
    device = top["device"]
    if device not in DEVICES:
        raise InputError(f"{name_of('device')}: unknown device '{device}'; "
                         f"allowed: {', '.join(DEVICES)}")

    grids = config.get("grid") or [{}]
    specs, skipped = {}, 0
    for number, grid in enumerate(grids, 1):
        where = f"{source}: [[grid]] {grid.get('name', number)}" if config.get("grid") else source
        grid = {**{k: DEFAULTS[k] for k in ("n", "dtypes", "modes", "grappler")}, **grid,
                **{k: v for k, v in overrides.items() if k in GRID_KEYS}}
        ns = _as_list(grid["n"], name_of("n", where), int)
        dtypes = _as_list(grid["dtypes"], name_of("dtypes", where), str, DTYPES)
        modes = _as_list(grid["modes"], name_of("modes", where), str, tuple(MODES))
        variants = _as_list(grid["grappler"], name_of("grappler", where), str, tuple(GRAPPLER))
        produced = 0
        for mode, variant, dtype, n in product(modes, variants, dtypes, ns):
            if variant != "default" and MODES[mode].api != "tf1":
                skipped += 1
                continue
            spec = Spec(mode=mode, dtype=dtype, n=n, grappler=variant, calls=calls,
                        device=device, seed=seed, check_n=check_n)
            specs.setdefault(spec.run_id, spec)
            produced += 1
        if not produced:
            raise InputError(f"{where}: no run left: grappler variants other than 'default' "
                             f"apply to the TF1 modes only ({', '.join(tf1_modes())})")
    out = Path(overrides.get("out") or Path("results") / name)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out '{out}' is a file; give a folder")
    check_output_path(out / "runs.parquet")
    return Study(name, tuple(specs.values()), out, run_timeout, budget, skipped)


def tf1_modes() -> list[str]:
    return [name for name, mode in MODES.items() if mode.api == "tf1"]


def visible_gpus() -> int:
    """How many GPUs TensorFlow sees (asked in a subprocess unless TensorFlow is loaded here)."""
    if "tensorflow" in sys.modules:
        return len(sys.modules["tensorflow"].config.list_physical_devices("GPU"))
    code = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=300, env={**_child_environment(),
                                                "TF_CPP_MIN_LOG_LEVEL": "3"})
        return int(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return 0


# --- the results folder -------------------------------------------------------------------------
# (the same layout as the regression runner's: study/records.py on main)
#   <out>/runs/<run_id>.parquet        one finished run's row (its presence = finished)
#   <out>/runs/<run_id>.calls.parquet  its timed calls, one row per call
#   <out>/logs/<run_id>.log            the run's stdout/stderr (TensorFlow's log, tracebacks)
#   <out>/runs.parquet, calls.parquet  assembled from the above for this study's runs

def _row_path(out: Path, run_id: str) -> Path:
    return out / "runs" / f"{run_id}.parquet"


def _calls_path(out: Path, run_id: str) -> Path:
    return out / "runs" / f"{run_id}.calls.parquet"


def recorded_status(out: Path, run_id: str) -> str | None:
    """The status of a finished run, or None when it has not finished (or its file is damaged)."""
    try:
        return str(pd.read_parquet(_row_path(out, run_id), columns=["status"])["status"].iloc[0])
    except Exception:  # missing or unreadable: not finished
        return None


CALL_COLUMNS = ("run_id", "mode", "grappler", "dtype", "n", "device", "call", "kind", "seconds")
RUN_COLUMNS = (
    "run_id", "mode", "api", "feed", "model", "xla", "grappler", "dtype", "n", "device",
    "calls", "seed", "check_n", "status", "message", "build_seconds", "session_seconds",
    "data_seconds", "first_call_seconds", "steady_median_seconds", "steady_min_seconds",
    "steady_max_seconds", "first_over_steady", "total_calls_seconds", "total_seconds",
    "graphdef_bytes", "peak_memory_mb", "process_peak_memory_mb", "baseline_memory_mb",
    "device_name", "output_shape", "checksum", "checksum_stable", "check_max_abs_error",
    "check_tolerance", "check_ok", "phase", "wall_seconds", "run_timeout", "memory_budget_gb",
    "returncode", "load_1m_before", "load_1m_after", "started_at", "log", "spec",
)


def run_row(record: dict) -> dict:
    row = {c: record.get(c) for c in RUN_COLUMNS}
    if isinstance(row["output_shape"], list):
        row["output_shape"] = "x".join(map(str, row["output_shape"]))
    row.update(collect_environment())
    return row


def call_rows(record: dict) -> list[dict]:
    base = {c: record.get(c) for c in CALL_COLUMNS[:6]}
    rows = []
    if record.get("first_call_seconds") is not None:
        rows.append({**base, "call": 0, "kind": "first", "seconds": record["first_call_seconds"]})
    for i, seconds in enumerate(record.get("steady_seconds") or [], 1):
        rows.append({**base, "call": i, "kind": "steady", "seconds": seconds})
    return rows


def write_run(out: Path, record: dict) -> dict:
    """Calls first, then the row: a row on disk always has its calls beside it."""
    row = run_row(record)
    write_parquet_atomic(pd.DataFrame(call_rows(record), columns=list(CALL_COLUMNS)),
                         _calls_path(out, row["run_id"]))
    write_parquet_atomic(pd.DataFrame([row]), _row_path(out, row["run_id"]))
    return row


def assemble(study: Study) -> tuple[pd.DataFrame, pd.DataFrame]:
    """runs.parquet and calls.parquet from the per-run files of this study's runs, in order."""
    rows, calls = [], []
    for spec in study.specs:
        if recorded_status(study.out, spec.run_id) is None:
            continue
        rows.append(pd.read_parquet(_row_path(study.out, spec.run_id)))
        calls.append(pd.read_parquet(_calls_path(study.out, spec.run_id)))
    runs = (pd.concat(rows, ignore_index=True) if rows
            else pd.DataFrame(columns=list(RUN_COLUMNS)))
    calls = [c for c in calls if len(c)]
    calls = (pd.concat(calls, ignore_index=True) if calls
             else pd.DataFrame(columns=list(CALL_COLUMNS)))
    write_parquet_atomic(runs, study.out / "runs.parquet")
    write_parquet_atomic(calls, study.out / "calls.parquet")
    return runs, calls


# --- running the study: one subprocess per run ------------------------------------------------

def _child_environment() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)   # the child's own session: only what we started
    except (ProcessLookupError, PermissionError):
        pass


def _last_log_line(log: Path | None) -> str:
    if log is None:
        return "(log on the terminal)"
    try:
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def run_child(spec: Spec, out: Path, run_timeout: float, memory_budget_gb: float,
              verbose: bool = False) -> dict:
    """Measure one spec in a fresh process and make its row durable, whatever happened."""
    runs, logs = out / "runs", out / "logs"
    runs.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    partial = runs / f".{spec.run_id}.partial.json"
    partial.unlink(missing_ok=True)
    command = [sys.executable, "-m", "study.feedmode_worker", spec.to_json(), str(partial)]
    log = None if verbose else logs / f"{spec.run_id}.log"
    started = datetime.now(UTC).isoformat(timespec="seconds")
    load_before = os.getloadavg()[0]
    limit = memory_budget_gb * 2**30
    killed, seen = None, 0
    with open(log if log else os.devnull, "w") as handle:
        handle.write(f"# {spec.label}\n# {' '.join(command)}\n")
        handle.flush()
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=handle if log else None,
                                stderr=subprocess.STDOUT if log else None,
                                env=_child_environment(), start_new_session=True)
        try:
            watched = psutil.Process(proc.pid)
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if killed is None:
                    try:
                        seen = max(seen, watched.memory_info().rss)
                    except psutil.Error:
                        pass
                    if seen > limit:
                        killed = "oom"
                        _kill_group(proc.pid)
                    elif time.perf_counter() - t0 > run_timeout:
                        killed = "timeout"
                        _kill_group(proc.pid)
                time.sleep(0.1)
        except BaseException:   # Ctrl-C or anything else: never leave the child behind
            _kill_group(proc.pid)
            proc.wait()
            partial.unlink(missing_ok=True)
            raise
        proc.returncode = returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    record = _read_json(partial) or {}
    partial.unlink(missing_ok=True)
    phase = record.get("phase", "startup")
    if killed == "timeout":
        status, message = "timeout", f"killed after the {run_timeout:g} s budget, during {phase}"
    elif killed == "oom":
        status, message = "oom", (f"killed at {seen / 2**30:.1f} GiB resident, over the "
                                  f"{memory_budget_gb:g} GiB budget, during {phase}")
    elif record.get("status") in STATUSES:
        status, message = record["status"], record.get("message", "")
    elif returncode == -signal.SIGKILL:
        status, message = "oom", (f"killed by SIGKILL during {phase} (likely the kernel's "
                                  f"out-of-memory killer)")
    elif returncode < 0:
        status, message = "error", (f"died of signal {signal.Signals(-returncode).name} "
                                    f"during {phase}")
    else:
        status, message = "error", (f"exited with status {returncode} during {phase}: "
                                    f"{_last_log_line(log)}")
    record.update(spec.columns())
    record.update(status=status, message=_one_line(message), started_at=started,
                  wall_seconds=wall, returncode=returncode, run_timeout=run_timeout,
                  memory_budget_gb=memory_budget_gb, spec=spec.to_json(),
                  process_peak_memory_mb=usage.ru_maxrss / 1024.0,
                  log=str(log) if log else None,
                  load_1m_before=load_before, load_1m_after=os.getloadavg()[0])
    return {**write_run(out, record), "steady_seconds": record.get("steady_seconds")}


# --- summary and command line ------------------------------------------------------------------

def checksum_deviation(runs: pd.DataFrame) -> pd.Series:
    """|checksum - median checksum of the finished runs of the same dtype and N| / |median|:
    whether every mode computed the same full-size output."""
    checksum = pd.to_numeric(runs["checksum"], errors="coerce")
    finished = checksum.where(runs["status"].isin(["ok", "mismatch"]))
    median = finished.groupby([runs["dtype"], runs["n"]]).transform("median")
    return (checksum - median).abs() / median.abs()


def summary_table(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "(no runs)"

    def number(column):
        return pd.to_numeric(runs[column], errors="coerce")

    peak = number("peak_memory_mb").fillna(number("process_peak_memory_mb"))
    table = pd.DataFrame({
        "mode": runs["mode"], "grappler": runs["grappler"], "dtype": runs["dtype"],
        "n": runs["n"], "status": runs["status"],
        "build s": number("build_seconds"), "session s": number("session_seconds"),
        "data s": number("data_seconds"), "first s": number("first_call_seconds"),
        "steady s": number("steady_median_seconds"), "first/steady": number("first_over_steady"),
        "total s": number("total_seconds"), "graphdef MB": number("graphdef_bytes") / 1e6,
        "peak GB": peak * 2**20 / 1e9, "check err": number("check_max_abs_error"),
        "checksum dev": checksum_deviation(runs),
    })
    for column in table.columns[5:]:
        spec = ".1e" if column in ("check err", "checksum dev") else ".3g"
        table[column] = ["-" if np.isnan(v) else format(v, spec) for v in table[column]]
    return table.to_string(index=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "conv2d(3x3x1x6) -> avg_pool(2x2) -> relu on N x 32 x 32 x 1, fed in different ways, each "
        "run in a fresh process. Flags given here replace the same key in every [[grid]] of "
        "--config. Modes: " + "; ".join(f"{k}: {m.help}" for k, m in MODES.items()))
    parser.add_argument("--config", help="study TOML (e.g. configs/feedmode.toml)")
    parser.add_argument("--n", type=int, nargs="+", help="batch size(s) N (default 60000)")
    parser.add_argument("--dtype", nargs="+", dest="dtypes",
                        help=f"one or more of: {', '.join(DTYPES)} (default float64)")
    parser.add_argument("--modes", nargs="+", help=f"default all: {', '.join(MODES)}")
    parser.add_argument("--grappler", nargs="+",
                        help=f"graph optimisation variants of the TF1 modes: {', '.join(GRAPPLER)} "
                             "(default: default)")
    parser.add_argument("--calls", type=int, help="timed calls after the first (default 10)")
    parser.add_argument("--device", help="cpu or gpu (default cpu)")
    parser.add_argument("--out", help="output folder (default results/<name>, name 'feedmode' "
                                      "unless the config sets it)")
    parser.add_argument("--run-timeout", type=float, dest="run_timeout",
                        help="seconds one run may take before it is killed (default 900)")
    parser.add_argument("--memory-budget-gb", type=float, dest="memory_budget_gb",
                        help="kill a run whose process exceeds this resident size (default 80%% "
                             "of the machine's memory)")
    parser.add_argument("--check-n", type=int, dest="check_n",
                        help="N of the check against the NumPy reference (default 16)")
    parser.add_argument("--seed", type=int, help="seed of the input and kernel (default 0)")
    parser.add_argument("--retry-failed", action="store_true",
                        help="rerun recorded runs whose status is not ok")
    parser.add_argument("--force", action="store_true", help="rerun every run")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def configure(args) -> Study:
    """Everything validated before anything is written or any run starts."""
    config = load_config(args.config) if args.config else None
    overrides = {key: getattr(args, key) for key in
                 ("n", "dtypes", "modes", "grappler", "calls", "device", "out", "run_timeout",
                  "memory_budget_gb", "check_n", "seed")}
    study = build_study(config, overrides)
    if any(spec.device == "gpu" for spec in study.specs) and visible_gpus() == 0:
        raise InputError("--device gpu: TensorFlow sees no GPU on this machine")
    return study


def pending_specs(study: Study, retry_failed: bool = False, force: bool = False) -> list[Spec]:
    todo = []
    for spec in study.specs:
        status = recorded_status(study.out, spec.run_id)
        if force or status is None or (retry_failed and status != "ok"):
            todo.append(spec)
    return todo


def _done_line(spec: Spec, row: dict) -> str:
    def seconds(key):
        value = row.get(key)
        return "-" if value is None or value != value else f"{value:.3g} s"
    return (f"{spec.label}: {row['status']}  first {seconds('first_call_seconds')}, steady "
            f"{seconds('steady_median_seconds')}"
            + (f"  ({row['message']})" if row.get("message") else ""))


def run_study(study: Study, retry_failed: bool = False, force: bool = False,
              verbose: bool = False, progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run every pending spec, one fresh process each; the tables show every finished run."""
    from tqdm import tqdm

    (study.out / "runs").mkdir(parents=True, exist_ok=True)
    for stale in (study.out / "runs").glob(".*"):   # left by a study killed mid-write
        stale.unlink(missing_ok=True)
    todo = pending_specs(study, retry_failed, force)
    done = len(study.specs) - len(todo)
    print(f"{study.name}: {len(study.specs)} runs, {done} already recorded, {len(todo)} to run "
          f"-> {study.out}", flush=True)
    bar = tqdm(total=len(study.specs), initial=done, unit="run", desc=study.name,
               file=sys.stderr, disable=not progress, dynamic_ncols=True)
    try:
        for spec in todo:
            bar.set_postfix_str(spec.label, refresh=True)
            row = run_child(spec, study.out, study.run_timeout, study.memory_budget_gb, verbose)
            bar.write(_done_line(spec, row))
            bar.update()
    finally:
        bar.close()
        tables = assemble(study)
    return tables


def main(args) -> int:
    study = configure(args)
    if study.skipped_combinations:
        print(f"note: {study.skipped_combinations} grid combinations skipped (grappler variants "
              f"apply to the TF1 modes only)")
    try:
        runs, _ = run_study(study, args.retry_failed, args.force, getattr(args, "verbose", False),
                            progress=not args.quiet)
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished runs are kept in {study.out / 'runs'}; run the same "
              f"command again to resume", file=sys.stderr)
        return 130
    with pd.option_context("display.width", 250, "display.max_rows", None,
                           "display.max_columns", None):
        print(summary_table(runs))
    counts = runs["status"].value_counts().to_dict() if len(runs) else {}
    print(f"statuses: {', '.join(f'{k}={v}' for k, v in sorted(counts.items())) or 'none'}; "
          f"wrote {study.out / 'runs.parquet'} and {study.out / 'calls.parquet'}")
    return 1 if counts.get("mismatch") or counts.get("error") else 0
