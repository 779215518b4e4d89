"""The TensorFlow backend runs the same algorithms as NumPy, in every feed mode, and says so."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
tf = pytest.importorskip("tensorflow")

from test_optimizer_family import AT_TARGET  # noqa: E402
from tolerances import EPS, assert_twins, loss_condition, twin  # noqa: E402

from convergence_study.errors import InputError  # noqa: E402
from datasets import make_problem  # noqa: E402
from optimizers import build_rules, make_optimizer, run  # noqa: E402
from optimizers.adadelta import Adadelta  # noqa: E402
from optimizers.gd import GradientDescent  # noqa: E402
from optimizers.lbfgs import LBFGS  # noqa: E402
from optimizers.result import on_trace_schedule  # noqa: E402
from study.frameworks.registry import make_backend  # noqa: E402
from study.frameworks.tensorflow.backend import (  # noqa: E402
    NO_GPU,
    TensorflowOps,
    data_layout,
)

HAS_GPU = bool(tf.config.list_physical_devices("GPU"))
MODES = [("feed", False), ("resident", False), ("fused", False), ("fused", True)]
MODE_IDS = ["feed", "resident", "fused", "fused-xla"]
FIRST_ORDER = [("gd", {"step": "1/L"}), ("gd", {"step": "diag"}), ("adadelta", {})]


@pytest.fixture(scope="module")
def problem():
    return make_problem("synthetic", n=2000, d=5, kappa=100.0, seed=3)


def tf_backend(dtype="float64", feed="fused", xla=False, device="cpu"):
    return make_backend("tensorflow", dtype, device=device, feed=feed, xla=xla)


def relative(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def assert_within_dot_rounding(got, want, magnitude, terms):
    """Each entry of a sum of `terms` products within its rounding bound, terms eps times the
    same sum of absolute values (Higham, 3.1), once for each side: a cancelling entry gets the
    room its inputs' size gives it, which a relative tolerance cannot."""
    assert np.all(np.abs(np.asarray(got) - want) <= 2 * terms * EPS * magnitude)


# -- the same iterates as NumPy -------------------------------------------------------------------

@pytest.mark.numerical
@pytest.mark.parametrize("layout", ["columns", "rows"])
def test_data_products_match_numpy_in_either_layout(layout):
    rng = np.random.default_rng(0)
    X, w, r = rng.normal(size=(300, 4)), rng.normal(size=(4, 2)), rng.normal(size=(300, 2))
    ops = TensorflowOps("float64", layout=layout)
    stored = ops.data_matrix(X)
    assert stored.shape == ((4, 300) if layout == "columns" else (300, 4))
    A = np.abs(X)
    assert_within_dot_rounding(ops.data_matvec(stored, w), X @ w, A @ np.abs(w), 4)
    assert_within_dot_rounding(ops.data_rmatvec(stored, r), X.T @ r, A.T @ np.abs(r), 300)
    assert_within_dot_rounding(ops.data_column_squares(stored), (X * X).sum(axis=0),
                               (X * X).sum(axis=0), 300)
    assert_within_dot_rounding(ops.data_gram(stored), X.T @ X, A.T @ A, 300)


def test_layout_follows_the_kernels_that_read_it():
    assert data_layout("float64", xla=False) == "rows"  # Eigen's float64 matmul
    assert data_layout("float64", xla=True) == "columns"
    assert data_layout("float32", xla=False) == "columns"  # oneDNN
    with pytest.raises(ValueError, match="layout"):
        TensorflowOps("float64", layout="diagonal")


@pytest.mark.slow
@pytest.mark.numerical
@pytest.mark.parametrize(("name", "hp"), FIRST_ORDER, ids=["gd-1/L", "gd-diag", "adadelta"])
@pytest.mark.parametrize(("feed", "xla"), MODES, ids=MODE_IDS)
def test_iterates_equal_numpy_for_50_iterations(problem, name, hp, feed, xla):
    optimizer = make_optimizer(name, **hp)
    rules = build_rules(max_iter=50)
    reference = run(problem, optimizer, rules, backend=make_backend("numpy"), init="normal",
                    seed=1)
    result = run(problem, optimizer, rules, backend=tf_backend(feed=feed, xla=xla),
                 init="normal", seed=1)
    assert result.iterations == reference.iterations == 50
    assert result.status == "max_iter"
    assert list(result.trace["iteration"]) == list(range(51))
    assert_twins(result, reference, problem, 50)
    assert result.record()["feed"] == feed and result.record()["xla"] == xla
    assert result.device == "CPU:0"


NEW_METHODS = [("momentum", {}), ("nesterov", {}), ("adam", {"learning_rate": 0.05}),
               ("adam", {"learning_rate": 0.05, "bias_correction": False}),
               ("rmsprop", {"learning_rate": 1e-3}), ("adagrad", {"learning_rate": 0.5}),
               ("cgls", {"restart": 5})]
NEW_IDS = ["momentum", "nesterov", "adam", "adam-no-bias-correction", "rmsprop", "adagrad", "cgls"]


@pytest.mark.slow
@pytest.mark.numerical
@pytest.mark.parametrize(("name", "hp"), NEW_METHODS, ids=NEW_IDS)
@pytest.mark.parametrize(("feed", "xla"), MODES, ids=MODE_IDS)
def test_new_methods_equal_their_numpy_twin_for_50_iterations(problem, name, hp, feed, xla):
    """Issue 18: float64 iterates equal to rounding over 50 steps (twin(50, kappa), 5.5e-12 at
    kappa 100). CGLS runs on a problem it does not solve within 50 steps (on d = 5 it ends at
    rounding level in 5; here at suboptimality 0.4), restarting every 5: once CG loses
    orthogonality, two implementations' roundings drive the iterates apart (0.7 relative after
    50 steps without restarts on d = 60, kappa = 100; both converge). Its kappa is 1e4, not 1e6
    as before: the bound scales with kappa, and at 1e6 it would allow 5.5e-8."""
    if name == "cgls":
        problem = make_problem("synthetic", n=2000, d=60, kappa=1e4, seed=3)
    optimizer = make_optimizer(name, **hp)
    rules = build_rules(max_iter=50)
    reference = run(problem, optimizer, rules, backend=make_backend("numpy"), init="normal",
                    seed=1)
    result = run(problem, optimizer, rules, backend=tf_backend(feed=feed, xla=xla),
                 init="normal", seed=1)
    assert result.iterations == reference.iterations == 50
    assert_twins(result, reference, problem, 50)


@pytest.mark.numerical
@pytest.mark.parametrize(("name", "hp"), [*FIRST_ORDER, ("lbfgs", {})],
                         ids=["gd-1/L", "gd-diag", "adadelta", "lbfgs"])
@pytest.mark.slow
@pytest.mark.parametrize(("feed", "xla"), MODES, ids=MODE_IDS)
def test_gram_formulation_equals_the_numpy_gram_twin(problem, name, hp, feed, xla):
    optimizer = make_optimizer(name, **hp)
    iterations = 30 if name != "lbfgs" else 4
    reference = run(problem, optimizer, build_rules(max_iter=iterations), init="normal", seed=2,
                    backend=make_backend("numpy", formulation="gram"))
    result = run(problem, optimizer, build_rules(max_iter=iterations), init="normal", seed=2,
                 backend=make_backend("tensorflow", feed=feed, xla=xla, formulation="gram"))
    bound = twin(iterations, problem.reference.kappa_raw)
    # w'Gw - 2b'w + y'y/n cancels down to f: each Gram loss also rounds by eps c^2 / 4 (x4)
    condition = loss_condition(problem)
    np.testing.assert_allclose(result.trace["loss"], reference.trace["loss"],
                               rtol=bound * condition + EPS * condition**2)
    assert relative(result.w, reference.w) <= bound
    assert result.record()["formulation"] == "gram"


def test_tf1_refuses_the_gram_formulation():
    with pytest.raises(InputError, match="formulation 'data' only"):
        make_backend("tensorflow", "float32", feed="tf1", formulation="gram")


@pytest.mark.slow
@pytest.mark.numerical
def test_lbfgs_on_tensorflow_reaches_scipy_optimum():
    """Same f* as SciPy; never more than 2x SciPy's iterations (with its exact line search on a
    quadratic, our L-BFGS needs 2-5x fewer, so a two-sided 2x bound cannot hold); and the NumPy
    twin's iterations, give or take rounding near the tolerance (XLA sums in another order)."""
    problem = make_problem("synthetic", n=2000, d=20, kappa=1e3, seed=3)
    rules = build_rules(tol=1e-10, max_iter=1000)
    scipy_run = run(problem, make_optimizer("scipy-lbfgs"), rules, backend=make_backend("numpy"))
    numpy_run = run(problem, make_optimizer("lbfgs"), rules, backend=make_backend("numpy"))
    assert scipy_run.status == "converged"
    for feed, xla in (("resident", False), ("fused", False), ("fused", True)):
        result = run(problem, make_optimizer("lbfgs"), rules,
                     backend=tf_backend(feed=feed, xla=xla))
        assert result.status == "converged"
        # both within 1e-10 of f*, hence of each other, give or take the loss's rounding
        assert abs(result.final_loss - scipy_run.final_loss) <= (1e-10 + 1e-12) * \
            scipy_run.final_loss
        assert result.iterations <= 2 * scipy_run.iterations
        assert abs(result.iterations - numpy_run.iterations) <= 2


# -- feed modes agree, and the fused loop stops where the host loop stops -------------------------

STOPS = {
    "suboptimality": ("gd", {}, {"tol": 1e-6, "max_iter": 10_000}, "converged"),
    "grad_norm": ("gd", {}, {"grad_tol": 1e-4, "max_iter": 10_000}, "grad_tol"),
    "rel_improvement": ("adadelta", {}, {"rel_tol": 1e-3, "patience": 3, "max_iter": 10_000},
                        "stalled"),
    "exact_repeat": ("gd", {"step": "diag"}, {"exact_repeat": True, "max_iter": 20_000},
                     "stalled"),
    "max_iter": ("adadelta", {"learning_rate": 0.1}, {"max_iter": 137}, "max_iter"),
    "divergence": ("gd", {"step": "fixed", "learning_rate": 4.0}, {"max_iter": 10_000},
                   "diverged"),
}


@pytest.mark.slow
@pytest.mark.numerical
@pytest.mark.parametrize("stop", list(STOPS))
def test_feed_modes_agree_and_stop_at_the_same_iteration(problem, stop):
    name, hp, stopping, status = STOPS[stop]
    optimizer = make_optimizer(name, **hp)
    rules = build_rules(**stopping)
    results = {feed: run(problem, optimizer, rules, backend=tf_backend(feed=feed), init="normal")
               for feed in ("feed", "resident", "fused")}
    iterations = {feed: r.iterations for feed, r in results.items()}
    assert len(set(iterations.values())) == 1, iterations
    for feed, result in results.items():
        assert result.status == status, (feed, result.message)
        np.testing.assert_array_equal(result.trace["iteration"], results["feed"].trace["iteration"])
        if status != "diverged":  # one library's kernels in one order: equal to the last bit
            # (exact_repeat's equal counts need that); 1e-12 is no more than a few eps of slack
            np.testing.assert_allclose(result.w, results["feed"].w, rtol=1e-12, atol=0)
            np.testing.assert_allclose(result.trace["loss"], results["feed"].trace["loss"],
                                       rtol=1e-12)
    if stop != "divergence":  # and NumPy agrees too, on the same rule
        reference = run(problem, optimizer, rules, backend=make_backend("numpy"), init="normal")
        assert reference.status == status
        if stop != "exact_repeat":  # an exact repeat depends on the last bit of the sums
            # each rule's quantity crosses its threshold by 0.15-0.3% per iteration here (the
            # rate of GD at kappa 100), ~1e5 times what the twins' rounding moves it
            assert reference.iterations == iterations["fused"]


@pytest.mark.parametrize("feed", ["resident", "fused", "tf1"])
def test_outcome_names_the_rule_that_ended_the_run(problem, feed):
    from optimizers.driver import initial_point
    from optimizers.stopping import Suboptimality

    rules = build_rules(tol=1e-6, max_iter=10_000)
    outcome = tf_backend(feed=feed).minimize(problem, make_optimizer("gd"), rules,
                                             initial_point(problem, "zeros", 0))
    assert isinstance(outcome.rule, Suboptimality) and outcome.status == "converged"


def test_fused_loop_honours_a_time_budget(problem):
    rules = build_rules(time_budget=0.05)  # no iteration budget: only the in-graph clock stops it
    result = run(problem, make_optimizer("adadelta", learning_rate=1e-3), rules,
                 backend=tf_backend(feed="fused"))
    assert result.status == "timeout"
    assert result.iterations > 0
    assert result.trace["seconds"].is_monotonic_increasing


def test_fused_trace_follows_the_host_schedule(problem):
    rules = build_rules(max_iter=1234)
    result = run(problem, make_optimizer("adadelta", learning_rate=1e-3), rules,
                 backend=tf_backend(feed="fused"))
    expected = [i for i in range(1235) if on_trace_schedule(i)] + [1234]
    assert list(result.trace["iteration"]) == expected


# -- compiled once, float32 kept, counting what the traced code sees ------------------------------

SEEN: list = []


def _note(objective, state):
    SEEN.append((objective.X.dtype, state.w.dtype, state.g.dtype))


@dataclass(frozen=True)
class CountingGD(GradientDescent):
    def update(self, objective, ops, params, state):
        _note(objective, state)
        return super().update(objective, ops, params, state)


@dataclass(frozen=True)
class CountingAdadelta(Adadelta):
    def update(self, objective, ops, params, state):
        _note(objective, state)
        return super().update(objective, ops, params, state)


@dataclass(frozen=True)
class CountingLBFGS(LBFGS):
    def update(self, objective, ops, params, state):
        _note(objective, state)
        return super().update(objective, ops, params, state)


@pytest.mark.parametrize("optimizer", [CountingGD(), CountingAdadelta(), CountingLBFGS(history=3)],
                         ids=["gd", "adadelta", "lbfgs"])
@pytest.mark.parametrize(("feed", "xla"), [*MODES, ("resident", True)],
                         ids=[*MODE_IDS, "resident-xla"])
@pytest.mark.slow
def test_compiled_step_is_traced_once_per_run(problem, optimizer, feed, xla):
    SEEN.clear()
    result = run(problem, optimizer, build_rules(max_iter=25), backend=tf_backend(feed=feed,
                                                                                  xla=xla))
    assert result.iterations == 25
    assert len(SEEN) == 1  # the Python update ran once, to trace; 25 iterations ran compiled


@pytest.mark.slow
@pytest.mark.parametrize(("feed", "xla"), [*MODES, ("tf1", False)], ids=[*MODE_IDS, "tf1"])
def test_float32_stays_float32(problem, feed, xla):
    SEEN.clear()
    optimizer = Adadelta() if feed == "tf1" else CountingAdadelta()
    backend = tf_backend("float32", feed=feed, xla=xla)
    outcome = backend.minimize(problem, optimizer, build_rules(max_iter=10),
                               np.zeros((problem.d, 1)))
    assert outcome.w.dtype == np.float32
    if feed != "tf1":
        assert SEEN == [(tf.float32, tf.float32, tf.float32)]
    result = run(problem, optimizer, build_rules(max_iter=10), backend=backend)
    assert result.record()["dtype"] == "float32"


# -- the GPU, present or absent -------------------------------------------------------------------

@pytest.mark.skipif(HAS_GPU, reason="a GPU is visible; the absent-GPU path cannot be taken")
@pytest.mark.parametrize("feed", ["resident", "fused", "tf1"])
def test_absent_gpu_gives_a_skip_record(problem, feed):
    result = run(problem, make_optimizer("gd"), build_rules(max_iter=10),
                 backend=tf_backend(feed=feed, device="gpu"))
    assert result.status == "skipped"
    assert result.message == NO_GPU
    assert result.iterations == 0
    row = result.record()
    assert row["status"] == "skipped" and row["device"] == "gpu" and row["feed"] == feed


@pytest.mark.skipif(HAS_GPU, reason="a GPU is visible; the absent-GPU path cannot be taken")
def test_absent_gpu_cli_exits_2(tmp_path, capsys):
    from study.__main__ import main

    out = tmp_path / "run.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer", "gd",
                 "--backend", "tensorflow", "--device", "gpu", "--max-iter", "5",
                 "--out", str(out)])
    assert code == 2
    assert NO_GPU in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason=NO_GPU)
@pytest.mark.parametrize(("feed", "xla"), [*MODES, ("tf1", False)], ids=[*MODE_IDS, "tf1"])
def test_gpu_runs_on_the_gpu_and_matches_the_cpu(problem, feed, xla):
    rules = build_rules(max_iter=50)
    optimizer = make_optimizer("adadelta")
    cpu = run(problem, optimizer, rules, backend=tf_backend(feed=feed, xla=xla))
    gpu = run(problem, optimizer, rules, backend=tf_backend(feed=feed, xla=xla, device="gpu"))
    assert gpu.device.startswith("GPU") and "GPU" in gpu.record()["device_name"]
    # another device sums in another order (and cuBLAS in no fixed one): twins
    assert relative(gpu.w, cpu.w) <= twin(50, problem.reference.kappa_raw)


# -- the original TF1 program ---------------------------------------------------------------------

def test_tf1_runs_on_a_small_frame_and_its_loss_decreases():
    small = make_problem("eve", rows=2000)
    result = run(small, make_optimizer("adadelta"), build_rules(max_iter=40),
                 backend=tf_backend("float32", feed="tf1"), init="normal", seed=0)
    assert result.status == "max_iter" and result.iterations == 40
    assert result.dtype == "float32" and result.device == "CPU:0"
    losses = result.trace["loss"].to_numpy()
    assert losses[-1] < losses[0]
    assert result.record()["feed"] == "tf1"


@pytest.mark.numerical
@pytest.mark.parametrize(("name", "hp"), [("gd", {"step": "1/L"}), ("adadelta", {})],
                         ids=["gd", "adadelta"])
def test_tf1_iterates_equal_numpy_in_float64(problem, name, hp):
    optimizer = make_optimizer(name, **hp)
    rules = build_rules(max_iter=30)
    reference = run(problem, optimizer, rules, backend=make_backend("numpy"), init="normal")
    result = run(problem, optimizer, rules, backend=tf_backend(feed="tf1"), init="normal")
    assert result.iterations == 30
    bound = twin(30, problem.reference.kappa_raw)
    np.testing.assert_allclose(result.trace["loss"], reference.trace["loss"],
                               rtol=bound * loss_condition(problem))
    assert relative(result.w, reference.w) <= bound


def test_tf1_refuses_what_the_original_program_did_not_have(problem):
    with pytest.raises(InputError, match="tf1"):
        run(problem, make_optimizer("lbfgs"), build_rules(max_iter=5),
            backend=tf_backend(feed="tf1"))
    with pytest.raises(InputError, match="diag"):
        run(problem, make_optimizer("gd", step="diag"), build_rules(max_iter=5),
            backend=tf_backend(feed="tf1"))


# -- options and the command line -----------------------------------------------------------------

@pytest.mark.parametrize(("options", "match"), [
    ({"feed": "stream"}, "feed mode 'stream' for tensorflow; allowed: fused, feed, resident, tf1"),
    ({"device": "tpu"}, "device 'tpu' for tensorflow; allowed: cpu, gpu"),
    ({"feed": "tf1", "xla": True}, "xla"),
    ({"dtype": "float16"}, "dtype 'float16'"),
])
def test_bad_options_are_input_errors(options, match):
    options = dict(options)
    dtype = options.pop("dtype", "float64")
    with pytest.raises(InputError, match=match):
        make_backend("tensorflow", dtype, **options)


def test_cli_runs_tensorflow_and_records_the_feed_mode(tmp_path, capsys):
    from study.__main__ import main

    out = tmp_path / "tf.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "1000", "--optimizer", "gd",
                 "--backend", "tensorflow", "--dtype", "float32", "--feed", "fused", "--xla",
                 "--max-iter", "20", "--out", str(out)])
    assert code == 0
    assert "tensorflow/CPU:0 float32" in capsys.readouterr().out
    row = pd.read_parquet(out).iloc[0]
    assert (row["backend"], row["dtype"], row["feed"], bool(row["xla"])) == \
        ("tensorflow", "float32", "fused", True)
    assert row["device"] == "CPU:0" and row["device_name"].endswith("CPU:0")


# -- TensorFlow Probability's L-BFGS, when it imports ---------------------------------------------

def _tfp_reason():
    from study.frameworks.tensorflow.optimizers import TfpLBFGS

    return TfpLBFGS().unavailable()


@pytest.mark.skipif(_tfp_reason() is None, reason="tensorflow_probability imports here")
def test_lbfgs_tfp_unavailable_is_a_skip_record_and_a_cli_error(problem, tmp_path, capsys):
    from study.__main__ import main

    result = run(problem, make_optimizer("lbfgs-tfp"), build_rules(max_iter=10),
                 backend=tf_backend(feed="resident"))
    assert result.status == "skipped" and "tensorflow_probability" in result.message
    out = tmp_path / "tfp.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer", "lbfgs-tfp",
                 "--backend", "tensorflow", "--max-iter", "5", "--out", str(out)])
    assert code == 2 and "tensorflow_probability" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.skipif(_tfp_reason() is not None, reason=str(_tfp_reason()))
@pytest.mark.parametrize(("feed", "xla"), [("resident", False), ("fused", False), ("fused", True)],
                         ids=["resident", "fused", "fused-xla"])
def test_lbfgs_tfp_reaches_the_optimum_in_every_feed_mode(feed, xla):
    problem = make_problem("synthetic", n=2000, d=20, kappa=1e3, seed=3)
    rules = build_rules(tol=1e-10, max_iter=1000)
    scipy_run = run(problem, make_optimizer("scipy-lbfgs"), rules, backend=make_backend("numpy"))
    result = run(problem, make_optimizer("lbfgs-tfp"), rules,
                 backend=tf_backend(feed=feed, xla=xla))
    assert result.status == "converged", result.message
    assert scipy_run.status == "converged"  # both within 1e-10 of f*, give or take rounding
    assert abs(result.final_loss - scipy_run.final_loss) <= (1e-10 + 1e-12) * \
        scipy_run.final_loss
    assert result.iterations <= 2 * scipy_run.iterations
    assert result.extra["tfp_iterations"] == result.iterations
    assert result.nfev > result.iterations  # TFP's own count: its line search evaluates more


def test_lbfgs_tfp_needs_the_tensorflow_backend(problem):
    with pytest.raises(InputError, match="tensorflow backend only"):
        run(problem, make_optimizer("lbfgs-tfp"), build_rules(max_iter=5),
            backend=make_backend("numpy"))


@pytest.mark.parametrize(("name", "hp"), AT_TARGET)
def test_new_methods_reach_the_target_in_the_fused_loop(well_conditioned, name, hp):
    result = run(well_conditioned, make_optimizer(name, **hp),
                 build_rules(tol=1e-8, max_iter=30_000), backend=tf_backend(feed="fused"))
    assert result.status == "converged", result.message
    assert result.suboptimality <= 1e-8
