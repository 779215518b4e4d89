#!/usr/bin/env python3
"""`make gpu-check`: the bench's GPU rows in one table, or one line naming the missing piece.

On a machine with a GPU this measures, on /GPU:0, GD (1/L), Adadelta and L-BFGS for every
TensorFlow engine of the bench's full plan (feed, resident, fused, fused+xla, tf1: the plan's
labels, read from the backend registry after the checks below) and dtype (float32, float64), with
formulations data and gram, on the 1M-row `eve` set, through the bench's own measurement
(`study.bench.sections.iterations.measure_iterations`): seconds per iteration, passes per
iteration (a device read pass, `tf.reduce_sum(X)` on the GPU, timed between the runs), and for
`fused` with formulation data the fraction of the device's memory bandwidth reached: bytes of X
per iteration (X's size times the passes the algorithm makes: 2 for GD and Adadelta, 3 for
L-BFGS) / seconds per iteration, over a measured device-to-device copy bandwidth (read + write
of a 1 GiB buffer).

It installs nothing and starts no new row after --budget seconds (default 210, so that the whole
check, TensorFlow's start and the data included, stays under 5 minutes). When a piece is missing
it prints ONE line saying which, and exits 1: no nvidia-smi / no driver / no GPU listed, NumPy,
pandas or SciPy not installed, TensorFlow not installed, TensorFlow without GPU support. Only
standard-library imports happen before those checks. `--device cpu` runs the same table on the
CPU (a test of this script, not a GPU check).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MISSING = 1
FRAMEWORK = "tensorflow"  # what this check measures: the copy and read pass are TensorFlow's
PASSES = {"gd": 2, "adadelta": 2, "lbfgs": 3}  # reads of X per iteration, formulation data


def say_missing(message: str) -> int:
    print(f"gpu-check: {message}", flush=True)
    return MISSING


def nvidia_smi() -> tuple[str | None, dict]:
    """(why there is no usable GPU, or None; what nvidia-smi says about GPU 0)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return "no GPU: nvidia-smi is not on PATH (no NVIDIA driver on this machine)", {}
    query = "name,memory.total,driver_version"  # long-standing fields: an unknown one fails
    try:
        out = subprocess.run([exe, f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"no GPU: nvidia-smi could not run ({type(exc).__name__}: {exc})", {}
    if out.returncode != 0:
        text = (out.stdout + out.stderr).strip().splitlines()
        return (f"no GPU: nvidia-smi failed (exit {out.returncode}): "
                f"{text[0] if text else 'no output'}"), {}
    lines = [line for line in out.stdout.splitlines() if line.strip()]
    if not lines:
        return "no GPU: nvidia-smi lists no GPU", {}
    fields = [f.strip() for f in lines[0].split(",")]
    info = dict(zip(("name", "memory_mib", "driver"), fields, strict=False))
    info["count"] = len(lines)
    return None, info


def python_packages() -> str | None:
    """The first package the bench needs that this Python lacks, as the line to print."""
    for package in ("numpy", "pandas", "scipy"):
        if importlib.util.find_spec(package) is None:
            return (f"{package} is not installed for {sys.executable}; this script installs "
                    f"nothing: `make venv` (or pip install -e .) first, then run it with "
                    f".venv/bin/python")
    return None


def tensorflow_gpu(require_gpu: bool = True):
    """(TensorFlow module or None, why it is not usable or None)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        tf = importlib.import_module("tensorflow")
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "tensorflow":
            return None, (f"TensorFlow is not installed for {sys.executable}; this script "
                          f"installs nothing: pip install 'tensorflow[and-cuda]' for the GPU")
        return None, f"TensorFlow cannot be imported: {type(exc).__name__}: {exc}"
    except Exception as exc:  # noqa: BLE001 -- a broken install, a missing shared library
        first = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"TensorFlow cannot be imported: {type(exc).__name__}: {first}"
    version = getattr(tf, "__version__", "?")
    if require_gpu and not tf.config.list_physical_devices("GPU"):
        if not tf.test.is_built_with_cuda():
            return None, (f"TensorFlow {version} has no GPU support (a CPU-only build); "
                          f"pip install 'tensorflow[and-cuda]'")
        return None, (f"TensorFlow {version} has GPU support but sees no GPU (CUDA libraries "
                      f"or driver not found; TF_CPP_MIN_LOG_LEVEL=0 shows TensorFlow's reason)")
    return tf, None


def copy_bandwidth(tf, device: str, mib: int, repeats: int = 5) -> float:
    """Bytes per second of a device-to-device copy: y = x * s over a `mib` MiB float32 buffer
    reads and writes it once (2 * size bytes); median of `repeats` synchronised calls."""
    import numpy as np

    with tf.device(device):
        x = tf.random.uniform((mib * 2**20 // 4,), dtype=tf.float32)
        scale = tf.constant(1.0, tf.float32)

        @tf.function
        def copy(x, scale):
            y = x * scale
            return y[-1]  # fetching the last element waits for the whole product

        copy(x, scale).numpy()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            copy(x, scale).numpy()
            times.append(time.perf_counter() - start)
    return 2 * mib * 2**20 / float(np.median(times))


def device_read(tf, X_host, device: str, repeats: int):
    """A function returning `repeats` timings of one read pass over X on the device."""
    with tf.device(device):
        X = tf.identity(tf.constant(X_host))
    @tf.function
    def total(X):
        return tf.reduce_sum(X)

    total(X).numpy()

    def read():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            total(X).numpy()
            times.append(time.perf_counter() - start)
        return times
    return read


def feeds() -> dict[str, str]:
    """Feed name (its `feed` option, '+xla' where XLA-compiled) -> engine label, for the
    engines of the bench's full plan on FRAMEWORK, in its backend's declared feed order, each
    plain before compiled. Read from the registry, so it needs NumPy (asked after the checks)."""
    sys.path.insert(0, str(ROOT))
    from optimizers.backends.registry import BACKENDS
    from study.bench.plan import FULL, engine

    found = []
    for label in FULL.backends:
        name, options = engine(label)
        if BACKENDS[name].framework == FRAMEWORK:
            feed = options.get("feed", "")
            order = (BACKENDS[name].allowed("feed").index(feed) if feed else 0,
                     bool(options.get("xla")))
            found.append((order, feed + ("+xla" if options.get("xla") else ""), label))
    return {feed: label for _, feed, label in sorted(found)}


def measure(args, tf) -> int:
    sys.path.insert(0, str(ROOT))
    import logging

    import numpy as np

    from datasets import make_problem
    from study.bench.plan import TF1_OPTIMIZERS, engine
    from study.bench.render import text_table
    from study.bench.runs import describe
    from study.bench.sections.iterations import measure_iterations
    from study.bench.timing import ratio
    from study.bench.twins import WHOLE_LOOP

    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    device = "/GPU:0" if args.device == "gpu" else "/CPU:0"
    start = time.perf_counter()
    problem = make_problem("eve", rows=args.rows)
    problem.reference  # noqa: B018 -- f* before any clock
    bandwidth = copy_bandwidth(tf, device, args.copy_mib)
    rows = []
    grid = [(feed, optimizer, dtype, formulation) for formulation in args.formulations
            for feed in args.feeds for dtype in args.dtypes for optimizer in args.optimizers
            if not (feed == "tf1" and optimizer not in TF1_OPTIMIZERS)]
    reads = {dtype: device_read(tf, np.asarray(problem.X, dtype=dtype), device, 3)
             for dtype in args.dtypes}
    for number, (feed, optimizer, dtype, formulation) in enumerate(grid, 1):
        label = args.engines[feed]
        if time.perf_counter() - start > args.budget:
            rows.append({"optimizer": optimizer, **describe(label), "dtype": dtype,
                         "formulation": formulation, "status": "skipped",
                         "message": f"past the {args.budget:g} s budget of this check"})
            continue
        iterations = args.iterations if formulation == "data" else 5 * args.iterations
        row = measure_iterations(problem, optimizer, label, formulation, dtype,
                                 iterations=iterations, repeats=args.repeats,
                                 read=reads[dtype], device=args.device)
        if row["status"] == "ok" and formulation == "data" and engine(label)[1].get(
                "feed") in WHOLE_LOOP:
            x_bytes = problem.n * problem.d * np.dtype(dtype).itemsize
            reached = x_bytes * PASSES[optimizer] / row["seconds_per_iteration"]
            row["achieved_gb_per_s"] = reached / 1e9
            row["bandwidth_fraction"] = ratio(reached, bandwidth)
        rows.append(row)
        print(f"[{number}/{len(grid)}] {optimizer} {feed} {dtype} {formulation}: "
              f"{row['status']}", file=sys.stderr, flush=True)
    import pandas as pd

    table = pd.DataFrame(rows)
    print(f"gpu-check on {args.where} ({args.device_name}): eve n={problem.n}, d={problem.d}; "
          f"{args.iterations} iterations per run (x5 for gram), median of {args.repeats}; "
          f"'passes/iter' = seconds per iteration / one read pass of X on the device "
          f"(tf.reduce_sum); device copy bandwidth measured {bandwidth / 1e9:.4g} GB/s; "
          f"took {time.perf_counter() - start:.0f} s")
    print(text_table(table, [
        ("optimizer", "optimizer"), ("feed", "feed"), ("xla", "xla"), ("dtype", "dtype"),
        ("formulation", "form"), ("passes_per_iteration", "passes/iter"),
        ("seconds_per_iteration", "s/iter"), ("setup_seconds", "setup s"),
        ("achieved_gb_per_s", "X GB/s"), ("bandwidth_fraction", "of copy bw")]))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu",
                        help="cpu: run the same table on the CPU (tests this script)")
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--optimizers", nargs="+", default=["gd", "adadelta", "lbfgs"],
                        choices=list(PASSES))
    parser.add_argument("--feeds", nargs="+", metavar="FEED",
                        help="TensorFlow feed modes (default: every one of the bench's full "
                             "plan: fused, fused+xla, feed, resident, tf1)")
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"],
                        choices=["float32", "float64"])
    parser.add_argument("--formulations", nargs="+", default=["data", "gram"],
                        choices=["data", "gram"])
    parser.add_argument("--budget", type=float, default=210.0,
                        help="seconds after which no further row starts (default 210)")
    parser.add_argument("--copy-mib", type=int, default=1024,
                        help="size of the buffer of the copy-bandwidth measurement")
    args = parser.parse_args(argv)
    args.where, args.device_name = "CPU (a test of this script, not a GPU check)", "/CPU:0"
    if args.device == "gpu":
        reason, info = nvidia_smi()
        if reason:
            return say_missing(reason)
        args.where = f"GPU 0 of {info['count']}"
        args.device_name = (f"{info.get('name')}, {info.get('memory_mib')} MiB, driver "
                            f"{info.get('driver')}")
    reason = python_packages()
    if reason:
        return say_missing(reason)
    tf, reason = tensorflow_gpu(require_gpu=args.device == "gpu")
    if reason:
        return say_missing(reason)
    args.engines = feeds()
    args.feeds = args.feeds or list(args.engines)
    unknown = [feed for feed in args.feeds if feed not in args.engines]
    if unknown:
        print(f"gpu-check: unknown feed '{unknown[0]}'; allowed: {', '.join(args.engines)}",
              flush=True)
        return 2
    return measure(args, tf)


if __name__ == "__main__":
    sys.exit(main())
