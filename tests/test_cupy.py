"""The CuPy backend (issue 35): NumPy's program on an NVIDIA GPU.

Without CUDA, its code runs here with NumPy in CuPy's place (`cupy_on_the_cpu`: the module's
one door to CUDA, `_cuda`, replaced), which checks everything but the GPU itself: every optimizer
the NumPy backend runs follows its NumPy twin, the loop reads the host once per iteration, the
CuPy feed modes compute the network; and asking for it without CuPy or without a GPU is one
line, exit 2, nothing written. The same checks on a real GPU are skipped, naming what is
missing, where CuPy or a CUDA GPU is absent.
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.linalg
import scipy.special
from test_backends import LEAST_SQUARES, LOGISTIC, ids
from test_logistic import logistic
from tolerances import assert_twins, relative, twin

from datasets import InputError, make_problem
from optimizers import build_rules, make_optimizer, run
from study.frameworks import registry
from study.frameworks.cupy import backend as cupy_backend
from study.frameworks.registry import make_backend

CUPY = registry.FRAMEWORKS["cupy"]


def missing() -> str | None:
    """What a real CuPy run lacks here, in one line (None: nothing)."""
    if not CUPY.installed():
        return "CuPy is not installed (pip install 'convergence-study[cupy]')"
    if not cupy_backend.gpu_available():
        return "no CUDA GPU visible to CuPy"
    return None


on_a_gpu = pytest.mark.skipif(missing() is not None, reason=str(missing()))


@pytest.fixture
def cupy_on_the_cpu(monkeypatch):
    """The CuPy backend with NumPy and SciPy in CuPy's place, 'installed' and seeing one GPU."""
    monkeypatch.setattr(cupy_backend, "_cuda", lambda: SimpleNamespace(
        xp=np, array=np.ndarray, expit=scipy.special.expit,
        solve_triangular=scipy.linalg.solve_triangular, to_host=np.asarray,
        synchronize=lambda: None, count=lambda: 1, name=lambda: "cuda:0 (NumPy here)",
        out_of_memory=MemoryError))
    monkeypatch.setitem(registry.FRAMEWORKS, "cupy", replace(CUPY, installs=("numpy",)))


@pytest.fixture(scope="module")
def least_squares():
    return make_problem("synthetic", n=400, d=5, kappa=100.0, seed=3)


def twins(problem, name, hp, formulation="data", iterations=30):
    optimizer, rules = make_optimizer(name, **hp), build_rules(tol=None, max_iter=iterations)
    reference = run(problem, optimizer, rules, init="normal", seed=1,
                    backend=make_backend("numpy", formulation=formulation))
    result = run(problem, optimizer, rules, init="normal", seed=1,
                 backend=make_backend("cupy", formulation=formulation))
    assert result.iterations == reference.iterations == iterations, result.message
    assert result.backend == "cupy" and result.record()["feed"] == "resident"
    return result, reference


@pytest.mark.parametrize("name, hp", LEAST_SQUARES, ids=ids(LEAST_SQUARES))
def test_every_optimizer_follows_its_numpy_twin(cupy_on_the_cpu, least_squares, name, hp):
    problem = make_problem("synthetic", n=400, d=60, kappa=1e6, seed=3) if (
        name == "cgls" or hp.get("step") == "armijo" or hp.get("line_search") == "wolfe") \
        else least_squares
    result, reference = twins(problem, name, hp)
    assert_twins(result, reference, problem, 30)
    assert (result.nfev, result.ngev) == (reference.nfev, reference.ngev)
    assert result.device == "GPU:0" and result.record()["device_name"].startswith("cuda:0")


@pytest.mark.parametrize("name, hp", LOGISTIC, ids=ids(LOGISTIC))
def test_logistic_follows_its_numpy_twin(cupy_on_the_cpu, name, hp):
    problem = logistic(n=600, d=8, kappa=1e3, lam=1e-6, seed=2)
    result, reference = twins(problem, name, hp)
    assert relative(result.w, reference.w) <= twin(30, problem.reference.kappa_raw)


def test_gram_formulation_follows_its_numpy_twin(cupy_on_the_cpu, least_squares):
    result, reference = twins(least_squares, "gd", {"step": "1/L"}, "gram")
    assert relative(result.w, reference.w) <= twin(30, least_squares.reference.kappa_raw)


def test_the_loop_reads_the_host_once_per_iteration(cupy_on_the_cpu, least_squares,
                                                    monkeypatch):
    reads = []
    stats = cupy_backend.CupyOps.stats
    monkeypatch.setattr(cupy_backend.CupyOps, "stats",
                        lambda self, state: reads.append(1) or stats(self, state))
    result = run(least_squares, make_optimizer("gd"), build_rules(tol=None, max_iter=12),
                 backend=make_backend("cupy"))
    assert result.iterations == 12 and len(reads) == 13  # the start and each iteration


def test_without_a_gpu_a_run_is_skipped_never_moved_to_the_cpu(cupy_on_the_cpu, least_squares,
                                                               monkeypatch):
    monkeypatch.setattr(cupy_backend, "gpu_available", lambda: False)
    result = run(least_squares, make_optimizer("gd"), build_rules(max_iter=3),
                 backend=make_backend("cupy"))
    assert result.status == "skipped" and result.message == "no GPU visible to CuPy"
    assert result.iterations == 0


def test_the_cupy_feed_modes_compute_the_network(cupy_on_the_cpu):
    from study.feedmode.measure import measure_record
    from study.feedmode.spec import Spec

    for mode in ("cupy-numpy", "cupy-resident"):
        for dtype in ("float64", "float32"):
            record = measure_record(Spec(mode=mode, dtype=dtype, n=20, calls=2, device="gpu",
                                         check_n=8))
            assert record["status"] == "ok" and record["check_ok"], record["message"]
            assert record["device_name"].startswith("cuda:0")
    assert "data_seconds" in record  # the resident copy is timed apart


def test_cupy_modes_on_a_cpu_are_one_line():
    from study.feedmode.config import expand_specs
    from study.sweep.grid import ConfigError

    with pytest.raises(ConfigError, match=r"mode 'cupy-numpy' runs on CuPy, which has no cpu "
                                          r"device \(it runs on: gpu\)$"):
        expand_specs({"grid": [{"modes": ["cupy-numpy"]}]}, "c.toml", "c", 1)
    cpu = expand_specs({}, "c.toml", "c", 1)
    assert not any(spec.mode.startswith("cupy-") for spec in cpu)  # not among the defaults


@pytest.mark.parametrize("installed, words", [
    (False, "the cupy backend needs CuPy, which is not installed: pip install "
            "'convergence-study[cupy]'"),
    (True, "no GPU visible to CuPy")])
def test_backend_cupy_without_cuda_is_one_line_exit_2_nothing_written(
        tmp_path, capsys, monkeypatch, installed, words):
    from study.__main__ import main

    if installed == CUPY.installed() and missing() is None:
        pytest.skip("this machine has CuPy and a GPU")
    monkeypatch.setattr(registry.Framework, "installed", lambda self: installed)
    monkeypatch.setattr(registry, "gpu_nodes_present", lambda pattern="": False)
    out = tmp_path / "run.parquet"
    assert main(["regress", "--rows", "300", "--backend", "cupy", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.iterdir())


def test_device_cpu_is_refused_by_the_declaration():
    with pytest.raises(InputError, match=r"unknown device 'cpu' for cupy; allowed: gpu"):
        make_backend("cupy", device="cpu")


# --- on a real GPU (skipped here, naming what is missing) -------------------------------------

@on_a_gpu
@pytest.mark.parametrize("name, hp", LEAST_SQUARES, ids=ids(LEAST_SQUARES))
def test_on_a_gpu_every_optimizer_follows_its_numpy_twin(least_squares, name, hp):
    """Unverified on the machine this was written on (no GPU)."""
    problem = make_problem("synthetic", n=400, d=60, kappa=1e6, seed=3) if (
        name == "cgls" or hp.get("step") == "armijo" or hp.get("line_search") == "wolfe") \
        else least_squares
    result, reference = twins(problem, name, hp)
    assert_twins(result, reference, problem, 30)
    assert result.device == "GPU:0"


@on_a_gpu
def test_on_a_gpu_the_feed_modes_compute_the_network():
    from study.feedmode.measure import measure_record
    from study.feedmode.spec import Spec

    for mode in ("cupy-numpy", "cupy-resident"):
        record = measure_record(Spec(mode=mode, dtype="float32", n=64, calls=2, device="gpu"))
        assert record["status"] == "ok", record["message"]
