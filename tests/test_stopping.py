import numpy as np
import pytest

from datasets import InputError, make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.driver import host_ops
from optimizers.stopping import Context, RelativeImprovement

pytestmark = pytest.mark.numerical


@pytest.mark.parametrize("rules, status, rule_name", [
    ({"tol": 1e-6}, "converged", "Suboptimality"),
    ({"grad_tol": 1e-3}, "converged", "GradientNorm"),
    ({"rel_tol": 1e-3, "patience": 3}, "stalled", "RelativeImprovement"),
    ({"exact_repeat": True}, "stalled", "ExactRepeat"),
    ({"time_budget": 0.05}, "timeout", "TimeBudget"),
])
def test_each_rule_fires_with_its_status(numpy64, rules, status, rule_name):
    problem = make_problem("synthetic", n=3000, d=5, kappa=100.0, seed=3)
    result = run(problem, make_optimizer("gd"), build_rules(max_iter=10**7, **rules),
                 backend=numpy64)
    assert result.status == status
    assert result.message.startswith(rule_name)
    last = result.trace.iloc[-1]
    assert last["iteration"] == result.iterations
    if rule_name == "Suboptimality":
        assert last["suboptimality"] <= 1e-6 < result.trace["suboptimality"].iloc[-2]
    if rule_name == "GradientNorm":
        assert last["grad_norm"] <= 1e-3 < result.trace["grad_norm"].iloc[-2]
    if rule_name == "ExactRepeat":  # the run one iteration shorter ends on the same RMSE
        before = run(problem, make_optimizer("gd"), build_rules(max_iter=result.iterations - 1),
                     backend=numpy64).trace["loss"].iloc[-1]
        assert np.sqrt(last["loss"]) == np.sqrt(before) and last["loss"] > 0


def test_max_iter(numpy64, well_conditioned):
    result = run(well_conditioned, make_optimizer("adadelta"), build_rules(tol=1e-12, max_iter=7),
                 backend=numpy64)
    assert (result.status, result.iterations) == ("max_iter", 7)


def test_divergence_is_recorded_not_raised(numpy64, well_conditioned):
    result = run(well_conditioned, make_optimizer("gd", step="fixed", learning_rate=50.0),
                 build_rules(tol=1e-8, max_iter=10_000), backend=numpy64)
    assert result.status == "diverged"
    assert result.iterations < 100
    assert result.trace["loss"].iloc[-1] > 1e5 * result.trace["loss"].iloc[0] or \
        not np.isfinite(result.trace["loss"].iloc[-1])


def test_relative_improvement_needs_consecutive_iterations():
    ops = host_ops()
    rule = RelativeImprovement(tol=0.1, patience=2)
    state = rule.init_state(ops)
    fired = []
    for f_prev, f in [(10, 9.5), (9.5, 5.0), (5.0, 4.9), (4.9, 4.8)]:
        hit, state = rule.check(ops, Context(1, 0.0, f, 10.0, f_prev, 1.0, 1.0), state)
        fired.append(bool(hit))
    assert fired == [False, False, False, True]


@pytest.mark.parametrize("kwargs, message", [
    ({"tol": 0.0, "max_iter": 5}, "tol must be a finite number > 0"),
    ({"tol": -1e-8, "max_iter": 5}, "tol must be"),
    ({"grad_tol": float("nan"), "max_iter": 5}, "grad_tol must be"),
    ({"rel_tol": 1e-3, "patience": 0, "max_iter": 5}, "patience must be an integer >= 1"),
    ({"max_iter": 0}, "max_iter must be an integer >= 1"),
    ({"time_budget": -2.0}, "time_budget must be"),
    ({"tol": 1e-8}, "need an iteration or time budget"),
])
def test_bad_stopping_parameters(kwargs, message):
    with pytest.raises(InputError, match=message):
        build_rules(**kwargs)
