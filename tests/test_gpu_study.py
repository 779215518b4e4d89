"""`make gpu`'s studies: configs/gpu.toml and configs/feedmode-gpu.toml parse; a sweep that needs
a GPU (`study run --require-gpu`) refuses in one line on a machine without one, nothing run; the
GPU's speed-up over a CPU engine is the study's own paired ratio, by seed. No timing is
asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.sweep import runner
from study.sweep.grid import load_study

ROOT = Path(__file__).resolve().parent.parent


def test_without_a_gpu_the_gpu_study_refuses_in_one_line(tmp_path):
    from study.frameworks.registry import gpu_nodes_present

    if gpu_nodes_present():
        pytest.skip("this machine has a GPU")
    result = subprocess.run([sys.executable, "-m", "study", "run", "configs/gpu.toml",
                             "--require-gpu", "--out", str(tmp_path / "gpu")], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip() == (
        "convergence-study run: error: configs/gpu.toml needs a GPU: no GPU visible to JAX; "
        "no GPU visible to PyTorch; nothing was run")
    assert not (tmp_path / "gpu").exists()


def test_require_gpu_goes_on_where_one_framework_sees_one(monkeypatch):
    """A framework without a GPU has its runs left out, as in any sweep (said by the runner);
    the refusal is for a machine where none of them sees one."""
    study = load_study(ROOT / "configs" / "gpu.toml")
    monkeypatch.setattr(runner, "gpu_visible", lambda name: name == "torch")
    runner.check_gpu(study, study.specs)
    monkeypatch.setattr(runner, "gpu_visible", lambda name: False)
    with pytest.raises(InputError, match="needs a GPU: no GPU visible to JAX; no GPU visible "
                                         "to PyTorch; nothing was run"):
        runner.check_gpu(study, study.specs)
    cpu_only = [s for s in study.specs if s.backend_options.get("device") != "gpu"]
    with pytest.raises(InputError, match="has no GPU run"):
        runner.check_gpu(study, cpu_only)


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


def test_the_feedmode_gpu_config_is_every_jax_and_pytorch_mode_on_the_gpu():
    from study.feedmode.model import modes_of

    study = load_study(ROOT / "configs" / "feedmode-gpu.toml")
    assert {spec.device for spec in study.specs} == {"gpu"}
    assert {spec.mode for spec in study.specs} == {*modes_of("jax"), *modes_of("torch")}


def test_the_gpu_speed_up_is_paired_by_seed():
    """What scripts/gpu_study.py's own table said (GPU against NumPy and against the framework
    on the CPU, by seed) is study.paired's ratio on the same instances."""
    from study.paired import compare

    rows = [{"seed": seed, "backend": backend, "device": device,
             "seconds_per_iteration": seconds}
            for seed in (0, 1, 2)
            for backend, device, seconds in (("numpy", "cpu", 8.0), ("jax", "cpu", 4.0),
                                             ("jax", "gpu", 0.1 * (seed + 1)))]
    runs = pd.DataFrame(rows)
    gpu = runs[runs["device"] == "gpu"]
    over_numpy = compare(runs[runs["backend"] == "numpy"], gpu, ["seed"],
                         "seconds_per_iteration")
    over_cpu = compare(runs[(runs["backend"] == "jax") & (runs["device"] == "cpu")], gpu,
                       ["seed"], "seconds_per_iteration")
    assert over_numpy.instances == over_cpu.instances == 3
    assert over_numpy.ratio == pytest.approx(2 * over_cpu.ratio)
    assert over_numpy.low < 80 / 6 ** (1 / 3) < over_numpy.high  # geometric mean of 80, 40, 26.7


@pytest.mark.parametrize("module", ["study.sweep.runner", "study.regression.regress",
                                    "study.frameworks.jax.backend",
                                    "study.frameworks.torch.backend"])
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
