"""`make gpu` (scripts/gpu_study.py) on a machine without a GPU says so in one line and exits 1;
configs/gpu.toml parses; the answers table pairs GPU and CPU runs by seed. No timing is
asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gpu_study.py"


def gpu_study(tmp_path, nvidia_smi: str | None) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if nvidia_smi is not None:
        tool = bin_dir / "nvidia-smi"
        tool.write_text(f"#!/bin/sh\n{nvidia_smi}\n")
        tool.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = str(bin_dir)  # no nvidia-smi unless faked here
    return subprocess.run([sys.executable, str(SCRIPT), "--results", str(tmp_path / "results"),
                           "--report", str(tmp_path / "report")],
                          capture_output=True, text=True, env=env, timeout=600)


def one_line(result) -> str:
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, result.stdout + result.stderr
    return lines[0]


def test_without_nvidia_smi_it_says_so_in_one_line(tmp_path):
    result = gpu_study(tmp_path, None)
    assert result.returncode == 1
    assert one_line(result) == ("gpu: no GPU: nvidia-smi is not on PATH (no NVIDIA driver on "
                                "this machine)")
    assert not (tmp_path / "results").exists() and not (tmp_path / "report").exists()


def test_with_a_gpu_listed_that_no_framework_sees_it_says_so(tmp_path):
    result = gpu_study(tmp_path, 'echo "NVIDIA H200, 143771, 580.159"')
    assert result.returncode == 1
    assert one_line(result).startswith("gpu: no GPU visible to JAX or PyTorch for ")
    assert not (tmp_path / "results").exists()


def test_the_gpu_config_parses(tmp_path):
    result = subprocess.run([sys.executable, "-m", "study", "run", "configs/gpu.toml",
                             "--dry-run", "--out", str(tmp_path / "gpu")], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "runs in gpu (configs/gpu.toml)" in text
    for word in ("numpy", "jax", "torch", "gd", "lbfgs", "adam", "10000000"):
        assert word in text
    assert "tensorflow" not in text


def test_answers_pair_gpu_and_cpu_by_seed(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import gpu_study

    rows = []
    for seed in (0, 1, 2):
        for backend, device, feed, seconds in (("numpy", "cpu", "", 8.0),
                                               ("jax", "cpu", "fused", 4.0),
                                               ("jax", "gpu", "resident", 0.5),
                                               ("jax", "gpu", "fused", 0.1 * (seed + 1))):
            rows.append({"n": 1000, "optimizer": "gd", "dtype": "float64", "seed": seed,
                         "backend": backend, "device": device, "feed": feed,
                         "status": "max_iter", "tuning": "", "seconds": seconds,
                         "seconds_per_iteration": seconds})
    (tmp_path / "gpu").mkdir()
    pd.DataFrame(rows).to_parquet(tmp_path / "gpu" / "runs.parquet")
    table = gpu_study.answers(tmp_path / "gpu", ["jax"]).splitlines()
    assert len(table) == 3
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    assert cells[:5] == ["1000", "gd", "float64", "jax", "jax-fused"]
    assert cells[5] == "0.2 s/iter"
    assert cells[6] == f"{40.0:.3g}x [{8 / 0.3:.3g}, {80.0:.3g}] (3 seeds)"
    assert cells[7] == f"{20.0:.3g}x [{4 / 0.3:.3g}, {40.0:.3g}] (3 seeds)"


@pytest.mark.parametrize("module", ["study.sweep.runner", "study.regression.regress",
                                    "optimizers.backends.jax", "optimizers.backends.torch"])
def test_the_gpu_path_imports_without_tensorflow(tmp_path, module):
    """A GPU image has no TensorFlow and no Keras: the modules `make gpu` runs through must
    import with both absent (shadowed here by packages that fail as a missing one does)."""
    for name in ("tensorflow", "keras"):
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    result = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
