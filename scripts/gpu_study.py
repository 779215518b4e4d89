#!/usr/bin/env python3
"""`make gpu`: the GPU against the CPU on a machine with a GPU and JAX and/or PyTorch (issue 32,
item 5), with the Python that is installed (no venv, no package index, no TensorFlow needed).

Runs, each as `python -m study ...` with this interpreter: the study config configs/gpu.toml
(GD per iteration, L-BFGS and Adam to 1e-8, 1M and 10M rows, 3 seeds, every JAX and PyTorch
engine on the GPU beside NumPy and the best CPU engines), the CNN feed modes of the installed
GPU frameworks on the GPU, the bench's GPU sections (harness against hand loops, fractions of
the copy bandwidth, the float32 probes), and `scripts/gpu_check.py` where TensorFlow is
installed. Then writes reports/gpu/README.md with the answers first: per framework, its fastest
GPU engine against NumPy and against its own CPU engine, per iteration (GD) and to the target
(L-BFGS, Adam), paired by seed; the step outputs follow. A step that fails is named in the
report and the rest go on (exit 1 at the end).

Without a GPU (no nvidia-smi, a failing driver, none listed, or none of the frameworks of the
backends the config runs on the GPU installed and seeing one): ONE line and exit 1, before
anything runs. Before that check no framework is imported in this process: the frameworks are
asked in subprocesses, with the question their registry entry declares
(optimizers/backends/registry.py); engines are named as the registry labels them.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "scripts"), str(ROOT)]
from gpu_check import FRAMEWORK, nvidia_smi  # noqa: E402 -- a sibling script, not a package

from optimizers.backends.registry import (  # noqa: E402 -- imports no framework
    backend,
    framework,
    framework_of,
)


def say(message: str) -> int:
    print(f"gpu: {message}", flush=True)
    return 1


def gpu_backends(config: Path) -> list[str]:
    """The backends the study config runs on the GPU, in its order (configs/gpu.toml: JAX's and
    PyTorch's); each one's framework is the registry's."""
    with open(config, "rb") as handle:
        declared = tomllib.load(handle).get("backends", [])
    on_gpu = [entry["name"] for entry in declared
              if "gpu" in ([entry["device"]] if isinstance(entry.get("device"), str)
                           else entry.get("device", []))]
    return list(dict.fromkeys(name for name in on_gpu if framework_of(name) is not None))


def backends_with_gpu(names: list[str]) -> list[str]:
    """Those of the backends whose framework is installed and sees a GPU, asked in a subprocess
    with the question its registry entry declares."""
    seen = []
    for name in names:
        framework = framework_of(name)
        if not framework.installed():
            continue
        try:
            out = subprocess.run([sys.executable, "-c", framework.gpu_count],
                                 capture_output=True, text=True, timeout=300, cwd=ROOT)
            if out.returncode == 0 and int(out.stdout.strip().splitlines()[-1]) > 0:
                seen.append(name)
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            continue
    return seen


def study(*args: str) -> list[str]:
    return [sys.executable, "-m", "study", *args]


def steps(args, backends: list[str]) -> list[tuple[str, list[str]]]:
    """(name, command) of every step, in order."""
    from study.feedmode.model import modes_of

    results = Path(args.results)
    frameworks = dict.fromkeys(framework_of(name).name for name in backends)
    modes = [mode for name in frameworks for mode in modes_of(name)]
    found = [("study", study("run", str(args.config), "--out", str(results / "gpu"),
                             "--quiet")),
             ("feedmode", study("feedmode", "--device", "gpu", "--n", str(args.feed_n),
                                "--modes", *modes, "--calls", "10", "--out",
                                str(results / "feedmode-gpu"), "--quiet")),
             ("bench", study("bench", "--device", "gpu", "--out", str(results / "bench-gpu")))]
    if framework(FRAMEWORK).installed():  # gpu_check measures that framework's engines
        found.append(("gpu-check", [sys.executable, str(ROOT / "scripts" / "gpu_check.py")]))
    return found


def paired(frame, metric: str, fast: dict, slow: dict) -> str:
    """Median over seeds of slow / fast (the GPU's speed-up), with its range; '-' unpaired."""
    import numpy as np

    def by_seed(where):
        part = frame
        for key, value in where.items():
            part = part[part[key] == value]
        return part.groupby("seed")[metric].median()

    a, b = by_seed(fast), by_seed(slow)
    ratios = (b / a).dropna()
    if ratios.empty:
        return "-"
    return (f"{np.median(ratios):.3g}x [{ratios.min():.3g}, {ratios.max():.3g}] "
            f"({len(ratios)} seeds)")


def answers(folder: Path, backends: list[str]) -> str:
    """The headline table: each backend's fastest GPU engine against NumPy and its own CPU
    engine, per n, optimizer and dtype; GD per iteration, the others to the target."""
    import pandas as pd

    runs = pd.read_parquet(folder / "runs.parquet")
    runs = runs[runs["tuning"].fillna("") != "tuning"] if "tuning" in runs else runs
    done = runs[runs["status"].isin(["converged", "max_iter"])]
    lines = ["| n | method | dtype | framework | fastest GPU engine | its time | GPU speed-up "
             "over NumPy | over the framework on the CPU |", "|---|---|---|---|---|---|---|---|"]
    for (n, optimizer, dtype), part in done.groupby(["n", "optimizer", "dtype"]):
        metric = "seconds_per_iteration" if optimizer == "gd" else "seconds"
        unit = "s/iter" if optimizer == "gd" else "s to 1e-8"
        for name in backends:
            gpu = part[(part["backend"] == name) & (part["device"] == "gpu")]
            if gpu.empty:
                continue
            feed = gpu.groupby("feed")[metric].median().idxmin()
            fast = {"backend": name, "device": "gpu", "feed": feed}
            own = part[(part["backend"] == name) & (part["device"] == "cpu")]
            cpu = {"backend": name, "device": "cpu", "feed": own["feed"].iloc[0] if len(own)
                   else None}
            lines.append(
                f"| {n} | {optimizer} | {dtype} | {name} | "
                f"{backend(name).label({'feed': feed})} | "
                f"{gpu[gpu['feed'] == feed][metric].median():.3g} {unit} | "
                f"{paired(part, metric, fast, {'backend': 'numpy'})} | "
                f"{paired(part, metric, fast, cpu)} |")
    return "\n".join(lines)


def write_report(args, backends: list[str], outputs: dict, failed: list[str]) -> Path:
    out = Path(args.report)
    out.mkdir(parents=True, exist_ok=True)
    parts = ["# GPU against CPU (`make gpu`)", ""]
    if failed:
        parts += [f"Steps that failed: {', '.join(failed)} (their output is below).", ""]
    parts += ["## Answers", "", "Speed-ups are CPU time over GPU time on the same seed, the "
              "median over seeds [range]; GD is per iteration, L-BFGS and Adam to relative "
              "suboptimality 1e-8 (loop only, setup apart).", ""]
    try:
        parts.append(answers(Path(args.results) / "gpu", backends))
    except Exception as exc:  # noqa: BLE001 -- the report still carries the steps' output
        parts.append(f"(no answers: {type(exc).__name__}: {exc})")
    for name, text in outputs.items():
        parts += ["", f"## {name}", "", "```", text.rstrip(), "```"]
    path = out / "README.md"
    path.write_text("\n".join(parts) + "\n")
    return path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "gpu.toml"))
    parser.add_argument("--results", default=str(ROOT / "results"))
    parser.add_argument("--report", default=str(ROOT / "reports" / "gpu"))
    parser.add_argument("--feed-n", type=int, default=60000)
    args = parser.parse_args(argv)
    reason, info = nvidia_smi()
    if reason:
        return say(reason)
    wanted = gpu_backends(Path(args.config))
    backends = backends_with_gpu(wanted)
    if not backends:
        titles = " or ".join(dict.fromkeys(framework_of(name).title for name in wanted))
        return say(f"no GPU visible to {titles} for {sys.executable} (nvidia-smi lists "
                   f"{info.get('name')}); this script installs nothing")
    print(f"gpu: {info.get('name')}; on the GPU: {', '.join(backends)}", flush=True)
    sys.path.insert(0, str(ROOT))
    outputs, failed = {}, []
    for name, command in steps(args, backends):
        start = time.perf_counter()
        print(f"gpu: {name}: {' '.join(command[1:])}", flush=True)
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        print(f"gpu: {name}: exit {done.returncode} after {time.perf_counter() - start:.0f} s",
              flush=True)
        outputs[name] = done.stdout[-20000:] + (done.stderr[-4000:] if done.returncode else "")
        if done.returncode:
            failed.append(name)
    summary = subprocess.run(study("summarize", str(Path(args.results) / "gpu")), cwd=ROOT,
                             capture_output=True, text=True)
    outputs = {"study summary": summary.stdout + summary.stderr, **outputs}
    path = write_report(args, backends, outputs, failed)
    print(f"gpu: wrote {path}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
