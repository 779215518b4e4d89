"""The host loop's cheaper bookkeeping (issue 53) gives the rows it gave before: the NumPy
backend's scalar shortcuts (study.frameworks.numpy.host_arrays) and the stopping rules checked on
plain floats (optimizers.stopping.HostOps) against NumPy's own functions, which is what they
were before, on the same runs: the same iterations, statuses, messages, counts,
suboptimalities and trace checkpoints, bit for bit. Only the seconds may differ."""

import math

import numpy as np
import pytest

import optimizers.driver as driver
from datasets import make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.stopping import HOST_OPS, Context, Divergence, ExactRepeat, RelativeImprovement
from study.frameworks.numpy import host_arrays
from study.frameworks.numpy.backend import NumpyBackend

pytestmark = pytest.mark.numerical


class NumpyFunctions(NumpyBackend):
    """The NumPy backend as it was: every op NumPy's own function."""

    abs = staticmethod(np.abs)
    where = staticmethod(np.where)
    maximum = staticmethod(np.maximum)
    minimum = staticmethod(np.minimum)
    logical_and = staticmethod(np.logical_and)
    logical_or = staticmethod(np.logical_or)
    logical_not = staticmethod(np.logical_not)

    @staticmethod
    def strict_upper(a):
        return np.triu(a, 1)

    @staticmethod
    def eye(n, like):
        return np.eye(n, dtype=like.dtype)

    reshape = staticmethod(np.reshape)
    transpose = staticmethod(np.transpose)

    @staticmethod
    def sum(x, axis=None):
        return np.sum(x, axis=axis)


class NumpyHostOps:
    """The stopping rules' host ops as they were: NumPy's functions on host floats."""

    tiny = float(np.finfo(np.float64).tiny)
    scalar = staticmethod(np.float64)
    maximum = staticmethod(np.maximum)
    abs = staticmethod(np.abs)
    where = staticmethod(np.where)
    isfinite = staticmethod(np.isfinite)
    logical_or = staticmethod(np.logical_or)  # the divergence rule's `~finite | grown` was these
    logical_not = staticmethod(np.logical_not)
    sqrt = staticmethod(np.sqrt)


# the regression study's rules (configs/regression.toml, no time budget: its firing depends on
# the clock), and the others a config can ask for
RULES = {
    "study": {"tol": 1e-8, "max_iter": 600, "rel_tol": 1e-12, "patience": 50},
    "repeat": {"tol": 1e-10, "max_iter": 300, "exact_repeat": True, "grad_tol": 1e-9},
    "budget": {"max_iter": 40},
}
PROBLEMS = {
    "least-squares": lambda: make_problem("synthetic", n=300, d=12, kappa=1e4, seed=2),
    "logistic": lambda: make_problem("synthetic-logistic", n=300, d=6, kappa=100.0, seed=2),
}
OPTIMIZERS = [("lbfgs", {}), ("gd", {}), ("gd", {"step": "armijo"}), ("nesterov", {})]


def comparable(result) -> tuple:
    """A run's row and trace checkpoints without its timings."""
    trace = result.trace.drop(columns="seconds")
    return (result.iterations, result.status, result.message, result.nfev, result.ngev,
            result.nhvp, result.suboptimality, result.final_loss, result.target_reached,
            result.grad_norm, result.extra.get("best_suboptimality"), result.w.tobytes(),
            [tuple(row) for row in trace.itertuples(index=False)])


@pytest.fixture(scope="module")
def problems():
    return {name: make() for name, make in PROBLEMS.items()}


@pytest.mark.parametrize("objective", list(PROBLEMS))
@pytest.mark.parametrize("dtype, formulation", [("float64", "data"), ("float32", "data"),
                                                ("float64", "gram")])
@pytest.mark.parametrize("rules", list(RULES))
def test_the_same_rows_as_with_numpys_functions(problems, monkeypatch, objective, dtype,
                                                formulation, rules):
    if objective == "logistic" and formulation == "gram":
        pytest.skip("logistic regression has no gram formulation")
    problem = problems[objective]
    for name, hyperparameters in OPTIMIZERS:
        if objective == "logistic" and name == "nesterov":
            continue  # its textbook step is a least-squares one
        optimizer = make_optimizer(name, **hyperparameters)
        fast = run(problem, optimizer, build_rules(**RULES[rules]),
                   backend=NumpyBackend(dtype, formulation))
        with monkeypatch.context() as patch:
            patch.setattr(driver, "HOST_OPS", NumpyHostOps())
            before = run(problem, optimizer, build_rules(**RULES[rules]),
                         backend=NumpyFunctions(dtype, formulation))
        assert comparable(fast) == comparable(before), (name, hyperparameters)


SCALARS = [np.float64(1.5), np.float64(-0.0), np.float64(0.0), np.float64(np.nan),
           np.float64(np.inf), np.float32(2.5), np.float32(np.nan), 1, 0.5, -3.0]


def same(a, b) -> bool:
    """Equal values (NaN equal to NaN, 0.0 apart from -0.0), dtypes and shapes."""
    a, b = np.asarray(a), np.asarray(b)
    return (a.dtype == b.dtype and a.shape == b.shape
            and a.tobytes() == b.tobytes())


@pytest.mark.parametrize("function, reference", [
    (host_arrays.host_maximum, np.maximum), (host_arrays.host_minimum, np.minimum)])
def test_maximum_and_minimum_are_numpys(function, reference):
    for a in SCALARS:
        for b in SCALARS:
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                continue  # the algorithms never compare two Python numbers with these
            assert same(function(a, b), reference(a, b)), (a, b)
    array = np.array([1.0, np.nan, -0.0])
    assert same(function(array, 0.0), reference(array, 0.0))


def test_where_and_logical_ops_are_numpys():
    truths = [np.True_, np.False_, True, False]
    for condition in truths:
        for x, y in [(np.float64(1.0), np.float64(2.0)), (np.float32(1.0), 2),
                     (np.float64(1.0), 0.5), (np.ones((3, 1)), np.zeros((3, 1))),
                     (np.ones(2, dtype=np.float32), np.zeros(2)), (np.ones(2), 0),
                     (np.True_, np.False_), (1, -1)]:
            assert same(host_arrays.host_where(condition, x, y), np.where(condition, x, y))
        for other in truths:
            assert same(host_arrays.host_logical_and(condition, other),
                        np.logical_and(condition, other))
            assert same(host_arrays.host_logical_or(condition, other),
                        np.logical_or(condition, other))
        assert same(host_arrays.host_logical_not(condition), np.logical_not(condition))
    mask = np.array([True, False])
    assert same(host_arrays.host_where(mask, np.ones(2), 0), np.where(mask, np.ones(2), 0))
    for x in SCALARS[:7]:
        assert same(host_arrays.host_abs(x), np.abs(x))
    a = np.arange(16.0).reshape(4, 4)
    assert same(NumpyBackend.strict_upper(a), np.triu(a, 1))
    assert same(NumpyBackend.eye(4, like=a), np.eye(4))
    with pytest.raises(ValueError):
        NumpyBackend.eye(4, like=a)[0, 0] = 2.0  # shared: read-only


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt")  # NumPy's, below 0
@pytest.mark.parametrize("f, f0, f_prev", [
    (1.0, 2.0, 1.5), (math.nan, 1.0, 1.0), (math.inf, 1.0, 1.0), (3e5, 1.0, 2.0),
    (-1e-17, 1.0, -1e-17), (0.0, 0.0, math.nan), (2.0, 2.0, 2.0)])
def test_host_rules_decide_as_with_numpys_functions(f, f0, f_prev):
    """The rules on plain floats fire where NumPy's functions made them fire, with the same
    memory (the stall rule's best loss and count)."""
    rules = [Divergence(), ExactRepeat(), RelativeImprovement(1e-3, 2)]
    for iteration in (0, 1, 5):
        ctx = Context(iteration, 0.1, f, f0, f_prev, f / 3, 0.5)
        for rule in rules:
            state = (10.0, 1.0) if isinstance(rule, RelativeImprovement) and iteration else \
                rule.init_state(HOST_OPS)
            fired, new = rule.check(HOST_OPS, ctx, state)
            fired_np, new_np = rule.check(NumpyHostOps(), ctx, state)
            assert bool(fired) == bool(fired_np), (rule, ctx)
            assert all(same(float(a), float(b)) for a, b in zip(new, new_np, strict=True))


SMALL_CONFIG = """name = "same-rows"
seeds = [0, 1]

[stopping]
tol = 1e-8
max_iter = 400
rel_tol = 1e-12
patience = 50

[[datasets]]
name = "synthetic"
n = 300
d = 12
kappa = [100.0, 1e4]

[[datasets]]
name = "synthetic-logistic"
n = 300
d = 6
kappa = 100.0

[[optimizers]]
name = "lbfgs"

[[optimizers]]
name = "gd"
step = "1/L"

[[optimizers]]
name = "nesterov"

[[backends]]
name = "numpy"
dtype = ["float64", "float32"]

[[exclude]]
dataset = "synthetic-logistic"
optimizer = "nesterov"
"""


def test_a_small_regression_config_gives_the_same_rows(tmp_path, monkeypatch):
    """Issue 53's check on the study's own path: every spec of a small config (the study's
    stopping rules, no time budget), measured as a sweep's run measures it (`run_spec` on the
    cached problem), gives the rows and trace checkpoints it gave with NumPy's own functions."""
    from study.regression.measure import load_problem, run_spec
    from study.sweep.grid import load_study

    config = tmp_path / "same-rows.toml"
    config.write_text(SMALL_CONFIG)
    specs = load_study(config).specs
    assert len(specs) == 32  # 3 problems x 3 methods x 2 dtypes x 2 seeds, less nesterov logistic
    for spec in specs:
        problem = load_problem(spec, tmp_path / "cache")
        fast, _ = run_spec(spec, problem, threads=1)
        with monkeypatch.context() as patch:
            for name in ("abs", "where", "maximum", "minimum", "logical_and", "logical_or",
                         "logical_not", "strict_upper", "eye", "reshape", "transpose", "sum"):
                patch.setattr(NumpyBackend, name, NumpyFunctions.__dict__[name])
            patch.setattr(driver, "HOST_OPS", NumpyHostOps())
            before, _ = run_spec(spec, problem, threads=1)
        assert comparable(fast) == comparable(before), spec.run_id


# long runs, so that most iterates are off the trace's schedule and skipped as quiet (issue 53):
# a target, a budget, and a fixed step a little past 2/L that diverges after some hundreds
SCREENED_RULES = {"target": {"tol": 1e-8, "max_iter": 6000, "time_budget": 3600.0},
                  "budget": {"max_iter": 1234}}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("rules", list(SCREENED_RULES))
def test_quiet_iterates_end_runs_where_the_full_check_did(problems, monkeypatch, dtype, rules):
    """The host loop skips the full check of an iterate where no rule can fire; the runs end at
    the same iterate with the same rows and trace as when every iterate is checked."""
    from optimizers.stopping import StoppingRules

    problem = problems["least-squares"]
    step = 2.02 / problem.curvature_bounds()[1]
    optimizers = OPTIMIZERS + [("gd", {"step": "fixed", "learning_rate": step})]
    longest = 0
    for name, hyperparameters in optimizers:
        optimizer = make_optimizer(name, **hyperparameters)
        skipping = run(problem, optimizer, build_rules(**SCREENED_RULES[rules]),
                       backend=NumpyBackend(dtype))
        with monkeypatch.context() as patch:
            patch.setattr(StoppingRules, "quiet", lambda self, problem, f0: None)
            checked = run(problem, optimizer, build_rules(**SCREENED_RULES[rules]),
                          backend=NumpyBackend(dtype))
        assert comparable(skipping) == comparable(checked), (name, hyperparameters)
        longest = max(longest, skipping.iterations)
        if hyperparameters.get("step") == "fixed":  # diverged off the trace's schedule
            assert skipping.status == "diverged" and skipping.iterations > 100
    assert longest > 1000  # most iterates were skipped


def test_no_rule_fires_where_it_says_it_is_quiet():
    """Rule.quiet is outside every iterate where the rule fires: at the target's boundary ulp by
    ulp (an exact fit's floor scale too), at the divergence limit, with NaN and infinite losses
    and starts, at the iteration and time budgets."""
    from optimizers.stopping import MaxIter, Suboptimality, TimeBudget

    exact_fit = make_problem("synthetic", n=50, d=3, noise=0.0, seed=1)
    for problem in (make_problem("synthetic", n=50, d=3, seed=1), exact_fit):
        for tol in (1e-8, 1e-12, 0.3):
            boundary = problem.f_star + tol * problem.reference.scale
            losses = [boundary]
            for direction in (-math.inf, math.inf):
                for _ in range(300):
                    losses.append(float(np.nextafter(losses[-1], direction)))
            losses += [problem.f_star, 0.0, -1.0, math.nan, math.inf, -math.inf]
            for f0 in (1.0, -1.0, 0.0, math.inf, -math.inf, math.nan, 1e300, boundary / 2):
                losses_here = losses + [1e5 * f0, float(np.nextafter(1e5 * f0, math.inf))]
                for rule in (Divergence(), Suboptimality(tol), MaxIter(7), TimeBudget(0.5)):
                    quiet = rule.quiet(problem, f0)
                    for f in losses_here:
                        for iteration, elapsed in ((6, 0.4), (7, 0.5), (8, 0.6)):
                            ctx = Context(iteration, elapsed, f, f0, math.nan,
                                          problem.suboptimality(f), 1.0)
                            if rule.check(HOST_OPS, ctx, ())[0]:
                                assert not (quiet.low < f <= quiet.high
                                            and iteration < quiet.iterations
                                            and elapsed < quiet.seconds), (rule, f, f0)


def test_a_run_that_stops_itself_at_a_skipped_iterate_ends_its_trace_with_that_iterate():
    """SciPy's methods may stop by themselves at an iterate whose full check was skipped: the
    trace's last row is that iterate's loss, suboptimality and gradient norm."""
    problem = PROBLEMS["least-squares"]()
    monitor = driver.RuleMonitor(problem, build_rules(tol=1e-12, max_iter=10**6))
    losses = [2 * problem.f_star + 1.0 / (1 + k) for k in range(156)]
    for k, f in enumerate(losses):
        monitor.iteration = k
        assert not monitor.check(f, lambda k=k: 0.5 + k)
    assert monitor.skipped is not None  # 155 is off the schedule: skipped
    monitor.finish()
    last = {column: values[-1] for column, values in monitor.trace.items()}
    assert last["iteration"] == 155 and last["loss"] == losses[-1]
    assert last["suboptimality"] == problem.suboptimality(losses[-1])
    assert last["grad_norm"] == 0.5 + 155
    assert monitor.trace["iteration"][-2] == 150  # the schedule's, then the last


def test_the_full_checks_fall_on_the_schedule_the_budget_and_outside_the_region():
    """Inside the quiet region the monitor checks in full exactly at the iterates the trace
    keeps (`next_on_schedule` finds the next one) and at the iteration budget; an iterate
    outside the region (a loss past divergence's limit) is checked in full, and fires."""
    from optimizers.result import next_on_schedule, on_trace_schedule

    kept = [i for i in range(20_001) if on_trace_schedule(i)]
    assert all(next_on_schedule(i) == b for a, b in zip(kept, kept[1:], strict=False)
               for i in range(a, b))
    problem = PROBLEMS["least-squares"]()
    for diverges_at, last in ((None, 1234), (777, 777)):
        monitor = driver.RuleMonitor(problem, build_rules(max_iter=1234))
        checked = []
        for k in range(2000):
            monitor.iteration = k
            loss = 1e9 * problem.f_star if k == diverges_at else 2 * problem.f_star
            if monitor.check(loss, lambda k=k, checked=checked: checked.append(k) or 1.0):
                break
        assert checked == [i for i in kept if i < last] + [last], diverges_at
        assert monitor.iteration == last and monitor.ending().status == (
            "max_iter" if diverges_at is None else "diverged")
