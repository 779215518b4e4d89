"""The fused loops' cheaper bookkeeping (issue 53) keeps the rows they gave before: the trace
schedule as a table of due iterations (`trace_iterations`) keeps exactly the iterations
`on_trace_schedule` keeps, and a fused run of JAX or TensorFlow (its trace rows written in
place, JAX's in chunks that hand their buffers over) stops at the same iteration with the same
status and message as the framework's host loop, with the same trace rows at the checkpoints:
iterations, losses and gradient norms bit for bit. Only the seconds may differ."""

import numpy as np
import pytest

from datasets import make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.result import on_trace_schedule
from study.frameworks.base import CAP, TRACE_CAPACITY, trace_iterations
from study.frameworks.registry import BACKENDS, FRAMEWORKS, make_backend

pytestmark = pytest.mark.numerical

EXACT = ["iteration", "loss", "grad_norm"]
EPS = np.finfo(np.float64).eps

# (optimizer, its hyperparameters, the stopping rules, the status that ends the run)
RUNS = {
    "tol": ("gd", {}, {"tol": 1e-8, "max_iter": 10_000}, "converged"),
    "grad_tol": ("gd", {}, {"grad_tol": 1e-3, "max_iter": 10_000}, "grad_tol"),
    "stall": ("momentum", {"step": "fixed", "learning_rate": 1e-15, "momentum": 0.5},
              {"rel_tol": 1e-12, "patience": 20, "max_iter": 10_000}, "stalled"),
    "exact_repeat": ("gd", {}, {"exact_repeat": True, "max_iter": 100_000}, "stalled"),
    "max_iter past a decade": ("adadelta", {"learning_rate": 1e-3}, {"max_iter": 1234},
                               "max_iter"),
    "divergence": ("gd", {"step": "fixed", "learning_rate": 10.0}, {"max_iter": 1000},
                   "diverged"),
    "lbfgs": ("lbfgs", {}, {"tol": 1e-10, "max_iter": 100}, "converged"),
}


def installed(name: str) -> bool:
    return FRAMEWORKS[BACKENDS[name].framework].installed()


FRAMEWORK_PARAMS = [pytest.param(name, marks=pytest.mark.skipif(
    not installed(name), reason=f"{name} is not installed")) for name in ("jax", "tensorflow")]


@pytest.fixture(scope="module")
def problem():
    return make_problem("synthetic", n=500, d=5, kappa=10, seed=1)


def test_the_table_of_due_iterations_is_the_trace_schedule():
    due = trace_iterations()
    assert due == sorted(set(due)) and due[-1] == CAP + 1  # one past the loop's own limit
    assert len(due) <= TRACE_CAPACITY  # a run to CAP fits the buffer
    kept = set(due)
    for block in (range(2_000_000), range(CAP - 2_000_000, CAP + 1)):
        assert [i for i in block if i in kept] == [i for i in block if on_trace_schedule(i)]
    for power in range(2, 10):  # each decade's first iterations, and the ones just before
        for i in (10**power - 10 ** (power - 1), 10**power - 1, 10**power, 10**power + 1,
                  10**power + 10 ** (power - 1)):
            assert (i in kept) == on_trace_schedule(i), i


def assert_same_rows(got, want, problem):
    """The same ending and trace rows; the suboptimality of the same loss within a few ulps of
    that loss (a compiled loop computes (f - f*) / scale itself, the host loop with
    `problem.suboptimality`: near f* the difference cancels to that rounding)."""
    assert (got.iterations, got.status, got.message) == (want.iterations, want.status,
                                                         want.message)
    for column in EXACT:
        np.testing.assert_array_equal(got.trace[column], want.trace[column], err_msg=column)
    rounding = 4 * EPS * np.abs(want.trace["loss"].to_numpy()) / problem.reference.scale
    assert np.all(np.abs(got.trace["suboptimality"] - want.trace["suboptimality"]) <= rounding)
    np.testing.assert_array_equal(got.w, want.w)


@pytest.mark.parametrize("framework", FRAMEWORK_PARAMS)
@pytest.mark.parametrize("case", list(RUNS))
def test_fused_rows_are_the_host_loops(problem, framework, case):
    name, hp, stopping, status = RUNS[case]
    optimizer, rules = make_optimizer(name, **hp), build_rules(**stopping)
    host = run(problem, optimizer, rules, backend=make_backend(framework, feed="resident"))
    fused = run(problem, optimizer, rules, backend=make_backend(framework, feed="fused"))
    assert host.status == status, host.message
    expected = [i for i in range(host.iterations + 1) if on_trace_schedule(i)]
    assert list(fused.trace["iteration"]) == sorted({*expected, host.iterations})
    assert_same_rows(fused, host, problem)


@pytest.mark.skipif(not installed("jax"), reason="jax is not installed")
@pytest.mark.parametrize("case", ["tol", "max_iter past a decade"])
def test_jax_rows_are_the_same_in_one_chunk_or_one_per_iteration(problem, monkeypatch, case):
    """Each chunk hands its carry, trace buffer included, over to the next (donated)."""
    from study.frameworks.jax import backend as jax_backend

    name, hp, stopping, _ = RUNS[case]
    optimizer, rules = make_optimizer(name, **hp), build_rules(**stopping)
    whole = run(problem, optimizer, rules, backend=make_backend("jax", feed="fused"))
    monkeypatch.setattr(jax_backend, "FIRST_CHUNK", 2)
    monkeypatch.setattr(jax_backend, "CHUNK_SECONDS", 1e-12)
    chunked = run(problem, optimizer, rules, backend=make_backend("jax", feed="fused"))
    assert whole.extra["fused_chunks"] <= 2  # the first of FIRST_CHUNK, then the rest
    assert chunked.extra["fused_chunks"] == whole.iterations - 1  # 2, then 1 each
    assert_same_rows(chunked, whole, problem)
    np.testing.assert_array_equal(chunked.trace["suboptimality"], whole.trace["suboptimality"])
