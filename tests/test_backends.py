"""Every optimizer on every registered backend and mode: float64 iterates follow the NumPy twin,
on least squares (data and gram formulations) and logistic regression; absent frameworks and
GPUs are refused cleanly; the ops of every backend provide the whole `ArrayOps` protocol.

Tolerances (tests/tolerances.py): the twins run one algorithm with sums taken in other orders,
so after k iterations the iterates differ by at most twin(k, kappa) = 5 k eps kappa, and each
loss and gradient norm by that times its condition, as the TensorFlow twins are held to. CGLS and
the line searches run on problems they do not finish within the 30 iterations (see each case):
past convergence, or at a decision within rounding of its threshold, two roundings of one
algorithm part ways by design.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pytest
from test_logistic import logistic
from tolerances import EPS, assert_twins, loss_condition, relative, twin

from datasets import InputError, make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.gd import GradientDescent
from optimizers.ops import ArrayOps
from study.frameworks.registry import BACKENDS, FRAMEWORKS, Framework, make_backend

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def installed(name: str) -> bool:
    framework = BACKENDS[name].framework
    return framework is None or FRAMEWORKS[framework].installed()


def modes():
    """(backend, feed) for every registered backend and feed mode (tf1, the original TF1
    program, runs GD and Adadelta only, and torch's graphed, GPU only, have their own tests; a
    GPU-only backend is skipped without a GPU)."""
    out = []
    for name, backend in BACKENDS.items():
        if name == "numpy":
            continue
        for feed in backend.allowed("feed"):
            if feed in ("tf1", "graphed"):
                continue
            marks = [pytest.mark.skipif(not installed(name), reason=f"{name} is not installed")]
            if backend.allowed("device") == ("gpu",):  # a GPU-only backend (CuPy)
                marks.append(pytest.mark.skipif(
                    not FRAMEWORKS[backend.framework].gpu_nodes_present(),
                    reason=f"{name} runs on a GPU only, and none is visible"))
            out.append(pytest.param(name, feed, id=f"{name}-{feed}", marks=marks))
    return out


# every iterative optimizer with its hyperparameter variants (the references drive themselves)
LEAST_SQUARES = [
    ("gd", {"step": "1/L"}), ("gd", {"step": "diag"}), ("gd", {"step": "fixed",
                                                               "learning_rate": 0.5}),
    ("gd", {"step": "armijo"}), ("adadelta", {}), ("momentum", {}), ("nesterov", {}),
    ("adam", {"learning_rate": 0.05}), ("rmsprop", {"learning_rate": 1e-3}),
    ("adagrad", {"learning_rate": 0.5}), ("lbfgs", {"line_search": "exact"}),
    ("lbfgs", {"line_search": "wolfe"}), ("cgls", {"restart": 5}),
]
LOGISTIC = [("gd", {"step": "1/L"}), ("gd", {"step": "armijo"}), ("adadelta", {}),
            ("momentum", {}), ("nesterov", {}), ("adam", {"learning_rate": 0.05}),
            ("rmsprop", {"learning_rate": 1e-3}), ("adagrad", {"learning_rate": 0.5}),
            ("lbfgs", {"line_search": "wolfe"})]


# torch.compile breaks its graph at every data-dependent branch of a line search (each trial's
# test), so compiling a line-search step costs 20-80 s here; in compiled mode the twins cover the
# straight-line steps and one line search (GD-Armijo, logistic), the eager modes cover them all.
COMPILED_LINE_SEARCHES = {("gd", "armijo")}


def skip_costly_compile(backend, feed, name, hp):
    search = hp.get("line_search") == "wolfe" or hp.get("step") == "armijo" or name == "cgls"
    if (backend, feed) == ("torch", "compiled") and search \
            and (name, hp.get("step")) not in COMPILED_LINE_SEARCHES:
        pytest.skip("a line search under torch.compile: covered by the eager modes (see above)")


# The fast tier runs every optimizer in each framework's default mode and this smoke set in its
# other modes; the slow tier (make test-slow) runs the rest (docs/testing.md).
SMOKE = {("gd", "1/L"), ("adam", None), ("lbfgs", "exact"), ("lbfgs", "wolfe")}


def grid(methods):
    """(backend, feed, name, hp) for every mode and method, the non-default modes' methods
    outside SMOKE in the slow tier."""
    out = []
    for mode in modes():
        backend, feed = mode.values
        for (name, hp), label in zip(methods, ids(methods), strict=True):
            marks = list(mode.marks)
            variant = hp.get("step") or hp.get("line_search")
            if feed != BACKENDS[backend].default("feed") and (name, variant) not in SMOKE:
                marks.append(pytest.mark.slow)
            out.append(pytest.param(backend, feed, name, hp, marks=marks,
                                    id=f"{label}-{mode.id}"))
    return out


def ids(methods):
    return [f"{name}-{'-'.join(str(v) for v in hp.values())}" if hp else name
            for name, hp in methods]


@pytest.fixture(scope="module")
def least_squares():
    return make_problem("synthetic", n=400, d=5, kappa=100.0, seed=3)


@pytest.fixture(scope="module")
def hard_least_squares():
    """CGLS ends at rounding level in d = 5 steps: here it is still converging at 30."""
    return make_problem("synthetic", n=400, d=60, kappa=1e6, seed=3)


@pytest.fixture(scope="module")
def hard_logistic():
    """L-BFGS needs about 40 iterations here: its 30 are all before convergence."""
    return logistic(n=600, d=8, kappa=1e3, lam=1e-6, seed=2)


def twins(problem, name, hp, backend, feed, formulation="data", iterations=30):
    optimizer = make_optimizer(name, **hp)
    rules = build_rules(tol=None, max_iter=iterations)
    reference = run(problem, optimizer, rules, init="normal", seed=1,
                    backend=make_backend("numpy", formulation=formulation))
    result = run(problem, optimizer, rules, init="normal", seed=1,
                 backend=make_backend(backend, "float64", feed=feed, formulation=formulation))
    assert result.iterations == reference.iterations == iterations, result.message
    return result, reference


@pytest.mark.parametrize("backend, feed, name, hp", grid(LEAST_SQUARES))
def test_least_squares_twins(least_squares, hard_least_squares, backend, feed, name, hp):
    if hp.get("step") == "armijo":
        skip_costly_compile(backend, feed, "lbfgs", {"line_search": "wolfe"})
    else:
        skip_costly_compile(backend, feed, name, hp)
    # CGLS and the line searches need a problem they do not finish in 30 steps: past the
    # rounding floor (Wolfe L-BFGS reaches it by 20 on kappa 100), and at a line-search decision
    # within rounding of its threshold (GD-Armijo met one at iteration 16), two roundings of one
    # algorithm part ways by design
    slow = name == "cgls" or hp.get("step") == "armijo" or hp.get("line_search") == "wolfe"
    problem = hard_least_squares if slow else least_squares
    result, reference = twins(problem, name, hp, backend, feed)
    assert_twins(result, reference, problem, 30)
    assert (result.nfev, result.ngev) == (reference.nfev, reference.ngev)
    assert result.record()["feed"] == feed and result.backend == backend


@pytest.mark.parametrize("backend, feed", modes())
@pytest.mark.parametrize("name, hp", [("gd", {"step": "1/L"}), ("lbfgs", {}),
                                      ("cgls", {"restart": 5})], ids=["gd", "lbfgs", "cgls"])
def test_gram_twins(least_squares, backend, feed, name, hp):
    """CGLS and L-BFGS's exact search in compiled torch: covered by the data formulation.
    The gram formulation's loss cancels digits (w^T A w - 2 w^T b + c): 1e-9, as for
    TensorFlow, and L-BFGS over its first 4 iterations (it then sits at the rounding floor)."""
    if name != "gd":
        skip_costly_compile(backend, feed, "cgls", {})
    result, reference = twins(least_squares, name, hp, backend, feed, "gram",
                              4 if name != "gd" else 30)
    k = result.iterations
    bound = twin(k, least_squares.reference.kappa_raw)
    assert relative(result.w, reference.w) <= bound
    c = float(np.vdot(least_squares.y, least_squares.y)) / least_squares.n
    np.testing.assert_allclose(result.trace["loss"], reference.trace["loss"],
                               rtol=bound * loss_condition(least_squares)
                               + 10 * EPS * c / least_squares.f_star)
    assert result.record()["formulation"] == "gram"


@pytest.mark.parametrize("backend, feed, name, hp", grid(LOGISTIC))
def test_logistic_twins(hard_logistic, backend, feed, name, hp):
    skip_costly_compile(backend, feed, name, hp)
    result, reference = twins(hard_logistic, name, hp, backend, feed)
    assert reference.suboptimality > 1e-10  # still converging: the comparison means something
    bound = twin(30, hard_logistic.reference.kappa_raw)  # 4e-11 here
    assert relative(result.w, reference.w) <= bound
    # the loss moves by |g||dw| / f <= 7 |dw| / |w| on these iterates, with no cancellation in
    # its positive terms: 10x the iterates' bound (as the TensorFlow logistic twins)
    np.testing.assert_allclose(result.trace["loss"], reference.trace["loss"], rtol=10 * bound)
    assert (result.nfev, result.ngev) == (reference.nfev, reference.ngev)


@pytest.mark.parametrize("backend, feed", modes())
def test_float32_stays_float32_and_reaches_float32_accuracy(least_squares, backend, feed):
    # float32 judges its own suboptimality to about eps32 * f / (f - f*) of itself: 1e-5 is
    # resolved, but GD (compiled torch: L-BFGS costs a long compile) ends within that of 1e-5,
    # so it gets 1e-3
    name = "gd" if (backend, feed) == ("torch", "compiled") else "lbfgs"
    tol = 1e-3 if name == "gd" else 1e-5
    result = run(least_squares, make_optimizer(name), build_rules(tol=tol, max_iter=5000),
                 backend=make_backend(backend, "float32", feed=feed))
    assert result.dtype == "float32" and result.status == "converged", result.message


@pytest.mark.parametrize("backend, feed", modes())
def test_rules_stop_where_numpys_do(least_squares, backend, feed):
    """The same rule fires at the same iteration as on NumPy, inside a compiled loop too."""
    assert_rules_stop_where_numpys_do(least_squares, lambda: make_backend(backend, feed=feed))


def assert_rules_stop_where_numpys_do(problem, backend, same_iterate=False):
    """Each rule set ends at NumPy's iteration with NumPy's status (and, `same_iterate`, at
    NumPy's iterate within 1e-10, with the trace's seconds starting at 0 and never falling)."""
    for stopping, status in (({"tol": 1e-6, "max_iter": 5000}, "converged"),
                             ({"grad_tol": 1e-4, "max_iter": 5000}, "grad_tol"),
                             ({"rel_tol": 1e-3, "patience": 3, "max_iter": 5000}, "stalled"),
                             ({"max_iter": 37}, "max_iter")):
        rules = build_rules(**stopping)
        reference = run(problem, make_optimizer("gd"), rules, backend=make_backend("numpy"))
        result = run(problem, make_optimizer("gd"), rules, backend=backend())
        assert (result.status, result.iterations) == (status, reference.iterations)
        np.testing.assert_array_equal(result.trace["iteration"], reference.trace["iteration"])
        if same_iterate:
            np.testing.assert_allclose(result.w, reference.w, rtol=1e-10, atol=1e-12)
            seconds = result.trace["seconds"].to_numpy()
            assert seconds[0] == 0 and np.all(np.diff(seconds) >= 0)


@pytest.mark.parametrize("backend, feed", modes())
def test_an_absent_gpu_is_a_skip_record_never_the_cpu(least_squares, backend, feed):
    gpu = make_backend(backend, device="gpu", feed=feed)
    if gpu.unavailable() is None:
        pytest.skip("this machine has a GPU for it")
    result = run(least_squares, make_optimizer("gd"), build_rules(max_iter=3), backend=gpu)
    assert result.status == "skipped" and "no GPU visible to" in result.message
    assert result.iterations == 0


@dataclass(frozen=True)
class LibraryMissing(GradientDescent):
    """GD said to need a library that is not installed (as lbfgs-tfp without TFP)."""

    def unavailable(self) -> str | None:
        return "gd-missing needs a library that is not installed"


def on_the_cpu():
    """Every installed backend that runs on a CPU, in its default mode."""
    return [pytest.param(name, marks=pytest.mark.skipif(not installed(name),
                                                        reason=f"{name} is not installed"))
            for name, backend in BACKENDS.items() if "cpu" in (backend.allowed("device") or
                                                               ("cpu",))]


@pytest.mark.parametrize("backend", on_the_cpu())
def test_an_unavailable_optimizer_is_a_skip_record_on_every_backend(least_squares, backend):
    result = run(least_squares, LibraryMissing(), build_rules(max_iter=3),
                 backend=make_backend(backend))
    assert result.status == "skipped", result.message
    assert result.message.startswith("gd-missing needs a library") and result.iterations == 0


def test_an_absent_framework_is_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    from study.__main__ import main

    monkeypatch.setattr(Framework, "installed", lambda self: self.name != "jax")
    with pytest.raises(InputError, match=r"needs JAX, which is not installed: pip install "
                                         r"'convergence-study\[jax\]'"):
        make_backend("jax")
    out = tmp_path / "run.parquet"
    assert main(["regress", "--rows", "300", "--backend", "jax", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "convergence-study[jax]" in err
    assert not out.exists()
    config = tmp_path / "c.toml"
    config.write_text('[[datasets]]\nname = "synthetic"\nn = 100\n[[optimizers]]\nname = "gd"\n'
                      '[[backends]]\nname = "jax"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "res")]) == 2
    assert "convergence-study[jax]" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


def test_every_backend_provides_every_op():
    """A missing op fails here, not in a sweep: every installed backend's declared ops class."""
    checked = []
    for name, declared in BACKENDS.items():
        if not installed(name):
            continue
        made = declared.load_ops()("float64")
        missing = [m for m in dir(ArrayOps) if not m.startswith("_") and not hasattr(made, m)]
        assert not missing and isinstance(made, ArrayOps), (name, missing)
        checked.append(name)
    assert "numpy" in checked


def test_every_declared_backend_points_at_real_code():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for name, backend in BACKENDS.items():
        assert all((root / f).is_file() for f in backend.files), name
        if installed(name):
            assert backend.load().__name__ == backend.cls
        for option, values in backend.options.items():
            assert values, (name, option)


# torch's graphed mode: CUDA graphs, so a GPU only; refused in one line anywhere else

def cuda_visible() -> bool:
    if not installed("torch"):
        return False
    import torch

    return bool(torch.cuda.is_available())


GRAPHABLE = [("gd", {"step": "1/L"}), ("gd", {"step": "fixed", "learning_rate": 0.5}),
             ("gd", {"step": "diag"}), ("adadelta", {}), ("momentum", {}), ("nesterov", {}),
             ("adam", {"learning_rate": 0.05}), ("rmsprop", {"learning_rate": 1e-3}),
             ("adagrad", {"learning_rate": 0.5}), ("lbfgs", {"line_search": "exact"})]


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
@pytest.mark.parametrize("device, message", [
    ("cpu", "feed mode 'graphed' needs device 'gpu' (it replays CUDA graphs), not 'cpu'"),
    ("gpu", "no GPU visible to PyTorch")])
def test_graphed_on_a_cpu_is_one_line_exit_2_and_no_file(tmp_path, capsys, device, message):
    from study.__main__ import main

    if device == "gpu" and cuda_visible():
        pytest.skip("this machine has a GPU for it")
    out = tmp_path / "run.parquet"
    code = main(["regress", "--rows", "300", "--backend", "torch", "--device", device,
                 "--feed", "graphed", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_graphed_on_a_cpu_in_a_config_is_refused_before_anything_runs(tmp_path):
    from study.regression.config import check_backend

    with pytest.raises(InputError, match="feed mode 'graphed' needs device 'gpu'"):
        check_backend("torch", feed="graphed", device="cpu")
    check_backend("torch", feed="graphed", device="gpu")


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
@pytest.mark.parametrize("name, hp, why", [
    ("gd", {"step": "armijo"}, "Armijo"), ("lbfgs", {"line_search": "wolfe"}, "Wolfe"),
    ("cgls", {}, "restart"), ("torch:Adam", {"lr": 0.01}, "not declared straight-line")])
def test_graphed_refuses_a_step_that_branches_naming_the_optimizer(name, hp, why):
    from study.frameworks.torch.backend import graph_refusal

    optimizer = make_optimizer(name, **hp)
    refusal = graph_refusal(optimizer)
    assert refusal.startswith(f"feed 'graphed' cannot capture {name}") and why in refusal
    assert "\n" not in refusal
    assert all(graph_refusal(make_optimizer(n, **h)) is None for n, h in GRAPHABLE)


@pytest.mark.skipif(not cuda_visible(), reason="feed 'graphed' needs a CUDA GPU")
@pytest.mark.parametrize("name, hp", GRAPHABLE, ids=ids(GRAPHABLE))
def test_graphed_twins(least_squares, name, hp):
    """Unverified on the machine this was written on (no GPU): replays follow the NumPy twin."""
    optimizer = make_optimizer(name, **hp)
    rules = build_rules(tol=None, max_iter=30)
    reference = run(least_squares, optimizer, rules, init="normal", seed=1,
                    backend=make_backend("numpy"))
    result = run(least_squares, optimizer, rules, init="normal", seed=1,
                 backend=make_backend("torch", "float64", device="gpu", feed="graphed"))
    assert result.iterations == 30 and result.record()["feed"] == "graphed"
    assert result.record()["graphed_overrun"] == 0  # max_iter: chunks never run past it
    assert_twins(result, reference, least_squares, 30)


@pytest.mark.skipif(not cuda_visible(), reason="feed 'graphed' needs a CUDA GPU")
def test_graphed_rules_stop_where_numpys_do(least_squares):
    assert_rules_stop_where_numpys_do(
        least_squares, lambda: make_backend("torch", device="gpu", feed="graphed"),
        same_iterate=True)


@pytest.fixture
def graphed_on_the_cpu(monkeypatch):
    """torch's graphed mode on the CPU with its two CUDA calls replaced: the warm-up runs on
    the current stream and each "replay" calls the chunk eagerly. Everything else (chunks,
    buffers, the host's rule checks, the iterate of the row that fired, the trace) runs as on
    a GPU; what only a GPU checks is that capture and replay do what the eager chunk does."""
    if not installed("torch"):
        pytest.skip("torch is not installed")
    from functools import partial

    from study.frameworks.torch import backend as torch_backend

    def warm_up(init, step, data, params, start):
        state, _ = init(data, params, start)
        return step(data, params, state)[0]

    monkeypatch.setattr(torch_backend, "_warm_up", warm_up)
    monkeypatch.setattr(torch_backend, "_capture",
                        lambda chunk, sizes: {size: partial(chunk, size) for size in sizes})

    def make(dtype="float64"):
        backend = make_backend("torch", dtype, device="gpu", feed="graphed")
        backend.device = "cpu"  # after the check that refuses graphed on a CPU
        return backend

    return make


@pytest.mark.parametrize("name, hp", GRAPHABLE, ids=ids(GRAPHABLE))
def test_graphed_host_side_twins_on_the_cpu(least_squares, graphed_on_the_cpu, name, hp):
    optimizer, rules = make_optimizer(name, **hp), build_rules(tol=None, max_iter=30)
    reference = run(least_squares, optimizer, rules, init="normal", seed=1,
                    backend=make_backend("numpy"))
    result = run(least_squares, optimizer, rules, init="normal", seed=1,
                 backend=graphed_on_the_cpu())
    assert result.iterations == 30 and result.record()["graphed_overrun"] == 0
    assert result.record()["graphed_chunks"] == 8  # 1, 2, 4, 8, then 15 left: 8, 4, 2, 1
    assert_twins(result, reference, least_squares, 30)


def test_graphed_host_side_stops_where_numpy_does_on_the_cpu(least_squares, graphed_on_the_cpu):
    assert_rules_stop_where_numpys_do(least_squares, graphed_on_the_cpu, same_iterate=True)


def test_graphed_refuses_a_branch_it_was_not_told_of(least_squares, graphed_on_the_cpu,
                                                     monkeypatch):
    """The safety net under graph_refusal: a step that branches on data while it is being
    warmed up is refused in one line naming the optimizer."""
    from study.frameworks.torch import backend as torch_backend

    monkeypatch.setattr(torch_backend, "graph_refusal", lambda optimizer: None)
    with pytest.raises(InputError, match=r"^feed 'graphed' cannot capture cgls as a CUDA "
                                         r"graph: its step branches on data \(ops.cond\)$"):
        run(least_squares, make_optimizer("cgls"), build_rules(max_iter=5),
            backend=graphed_on_the_cpu())
