import numpy as np
import pytest

from datasets import InputError, make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.stopping import HOST_OPS, Context, RelativeImprovement
from study.frameworks.registry import make_backend

pytestmark = pytest.mark.numerical


@pytest.mark.parametrize("rules, status, rule_name, says", [
    ({"tol": 1e-6}, "converged", "Suboptimality", "suboptimality reached tol 1e-06 at"),
    ({"grad_tol": 1e-3}, "grad_tol", "GradientNorm", "the gradient norm fell to grad_tol 0.001"),
    ({"rel_tol": 1e-3, "patience": 3}, "stalled", "RelativeImprovement",
     "no improvement over the best loss (reached at iteration "),
    ({"exact_repeat": True}, "stalled", "ExactRepeat", "the RMSE repeated exactly"),
    ({"time_budget": 0.05}, "timeout", "TimeBudget", "the time budget of 0.05 s ran out"),
])
def test_each_rule_fires_with_its_status(numpy64, rules, status, rule_name, says):
    problem = make_problem("synthetic", n=3000, d=5, kappa=100.0, seed=3)
    result = run(problem, make_optimizer("gd"), build_rules(max_iter=10**7, **rules),
                 backend=numpy64)
    assert result.status == status
    assert result.message.startswith(says), result.message
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


def test_only_the_target_is_called_converged(numpy64):
    """A gradient-norm rule that fires at once is not convergence: the status names the rule
    and the message says the target was missed (a loose grad_tol used to read 'converged' at
    suboptimality 4.71 after 0 iterations)."""
    problem = make_problem("eve", rows=5000)
    result = run(problem, make_optimizer("gd"), build_rules(tol=1e-8, grad_tol=1e9,
                                                            max_iter=100), backend=numpy64)
    assert (result.status, result.iterations, result.target_reached) == ("grad_tol", 0, False)
    assert "the target (suboptimality <= tol 1e-08) was not reached" in result.message
    assert result.suboptimality > 1
    for rules, status in (({"rel_tol": 1e-1, "patience": 1, "max_iter": 100}, "stalled"),
                          ({"max_iter": 3}, "max_iter")):
        other = run(problem, make_optimizer("gd"), build_rules(tol=1e-8, **rules),
                    backend=numpy64)
        assert other.status == status and "was not reached" in other.message
    # the closed form without a target claims nothing; with one, it is judged like any run
    assert run(problem, make_optimizer("closed-form"), build_rules(max_iter=1),
               backend=numpy64).status == "solved"
    assert run(problem, make_optimizer("closed-form"), build_rules(tol=1e-8, max_iter=1),
               backend=numpy64).status == "converged"


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


def stall_checks(losses, tol=0.01, patience=3):
    """Whether RelativeImprovement fires at each of `losses` (iterations 0, 1, ...), on the host."""
    ops, rule = HOST_OPS, RelativeImprovement(tol=tol, patience=patience)
    state, fired, f_prev = rule.init_state(ops), [], float("nan")
    for i, f in enumerate(losses):
        hit, state = rule.check(ops, Context(i, 0.0, f, losses[0], f_prev, 1.0, 1.0), state)
        fired.append(bool(hit))
        f_prev = f
    return fired


def test_the_stall_rule_counts_iterations_since_the_best_loss():
    """The best moves only on an improvement by more than tol relative (Keras's EarlyStopping):
    a bump shorter than the patience that comes back below the best is not a stall; tiny
    improvements add up until one beats the best by tol; a run with nothing better fires
    `patience` iterations after its best, and so does a floor whose noise rises and falls by more
    than tol each step (the rule that compared each loss with the previous one never fired
    there: every fall reset it)."""
    bump = [10.0, 9.0, 9.5, 9.9, 8.0, 7.0]  # 2 iterations up, then below the best
    assert stall_checks(bump) == [False] * 6
    creep = [10.0, 9.96, 9.92, 9.88, 9.84]  # 0.4% steps: the best moves once they add to 1%
    assert stall_checks(creep) == [False] * 5
    assert stall_checks(creep, patience=2) == [False, False, True, False, False]
    flat = [10.0, 9.0, 9.0, 9.0, 9.0]
    assert stall_checks(flat) == [False, False, False, False, True]
    noisy_floor = [10.0, 9.0, 9.5, 9.1, 9.5, 9.1, 9.5]  # each fall > tol, never below 9 * 0.99
    assert stall_checks(noisy_floor) == [False, False, False, False, True, True, True]


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


# -- methods whose loss is not monotone: the stall rule waits their time constants ---------------

LOOPS = {"host": ("numpy", {}), "tf-fused": ("tensorflow", {"feed": "fused"}),
         "jax-fused": ("jax", {"feed": "fused"})}


def loop_backend(loop):
    name, options = LOOPS[loop]
    if name != "numpy":
        pytest.importorskip(name)
    return make_backend(name, "float64", **options)


@pytest.fixture(scope="module")
def bumpy():
    """Textbook heavy ball here goes 80 iterations without a new best loss on its way to 1e-8
    (its stiff mode's transient), 164 being its window of 10 time constants."""
    return make_problem("synthetic", n=2000, d=5, kappa=1e3, seed=3)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_bump_is_not_a_stall_but_a_stall_is(bumpy, loop):
    """With the configured patience (20) alone the stall rule fires inside heavy ball's bump;
    the driver raises it to the method's 10 time constants and the run converges. A run that
    truly cannot progress (a learning rate of 1e-15) is still called stalled, exactly the
    window after its best (iteration 0). Host and compiled loops stop at the same iterations."""
    from optimizers.driver import initial_point

    backend = loop_backend(loop)
    momentum = make_optimizer("momentum")
    rules = build_rules(tol=1e-8, rel_tol=1e-12, patience=20, max_iter=10_000)
    plain = backend.minimize(bumpy, momentum, rules, initial_point(bumpy, "zeros", 0))
    assert plain.status == "stalled" and plain.iterations < 100, plain.message

    result = run(bumpy, momentum, rules, backend=backend)
    settling = momentum.settling(bumpy)
    assert (result.status, result.iterations) == ("converged", 280), result.message
    assert result.extra["stall_patience"] == settling.patience == 164
    assert result.extra["momentum_beta"] == settling.record["momentum_beta"]
    assert result.stopping["patience"] == 20  # the config's, as recorded for pairing

    stuck = make_optimizer("momentum", step="fixed", learning_rate=1e-15, momentum=0.5)
    result = run(bumpy, stuck, rules, backend=backend)
    window = stuck.settling(bumpy).patience  # ceil(10 / (1 - sqrt(0.5))) = 35
    assert (result.status, result.iterations, window) == ("stalled", 35, 35)
    assert result.message.startswith(
        "no improvement over the best loss (reached at iteration 0) by more than rel_tol 1e-12 "
        "for 35 iterations (patience 20 raised: 10 time constants 1/(1 - sqrt(beta)) of "
        "momentum with beta 0.5, whose loss is not monotone) at iteration 35"), result.message
