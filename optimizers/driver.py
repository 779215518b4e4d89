"""Runs an optimizer on a backend until a stopping rule fires, and builds the run record.

The host loop serves every backend that steps from Python (NumPy, TensorFlow per-step): the
clock covers the first evaluation, every iteration and the stopping checks, and is paused while
the trace is written. Data conversion and the optimizer's setup are timed apart as setup.
"""

from __future__ import annotations

import math
from time import perf_counter

import numpy as np
import pandas as pd

from convergence_study.errors import InputError, Uncertifiable
from optimizers.base import unsupported
from optimizers.bounds import predict, verdict
from optimizers.objective import make_objective, rebound
from optimizers.result import (
    TRACE_COLUMNS,
    Outcome,
    RunResult,
    Stopwatch,
    next_on_schedule,
    on_trace_schedule,
)
from optimizers.stopping import HOST_OPS, Context, Ending

INITS = ("zeros", "normal")

def initial_point(problem, init: str, seed: int) -> np.ndarray:
    """Zeros (the original NumPy program) or standard normal (the original TF program's init)."""
    if init == "zeros":
        return np.zeros((problem.d, problem.k))
    if init == "normal":
        return np.random.default_rng(seed).standard_normal((problem.d, problem.k))
    raise InputError(f"unknown init '{init}'; allowed: {', '.join(INITS)}")


class RuleMonitor:
    """The stopping rules and the trace of one run, checked at each iterate on the host (the
    host loop's and SciPy's callback). Its clock starts when it is made and pauses while a trace
    row is written; the caller advances `iteration`.

    Off the trace's schedule, an iterate inside the region where no rule can fire
    (StoppingRules.quiet: a few comparisons) skips the full check: the same rules fire at the
    same iterates, at a fraction of the cost per iteration on small problems."""

    def __init__(self, problem, rules):
        self.problem, self.rules, self.ops = problem, rules, HOST_OPS
        self.states = rules.init_state(self.ops)
        self.trace = {c: [] for c in TRACE_COLUMNS}
        self.iteration, self.fired = 0, -1
        self.f0, self.f_prev, self.last = None, float("nan"), None
        self.quiet = None  # found at the first check (the divergence limit needs f0)
        self.checked_from = 0  # the next iterate the trace keeps or the budget ends at
        self.skipped = None  # (f, grad_norm) of the last iterate when its full check was skipped
        self.clock = Stopwatch()

    def check(self, f: float, grad_norm) -> bool:
        """The rules at the iterate `iteration` (loss f, the gradient norm or a function that
        computes it on the host); True when one fires."""
        quiet = self.quiet
        if (self.iteration < self.checked_from and quiet.low < f <= quiet.high
                and (quiet.seconds == math.inf or self.clock.elapsed() < quiet.seconds)):
            self.f_prev, self.skipped = f, (f, grad_norm)
            return False
        self.skipped = None
        if self.f0 is None:
            self.f0 = f
            self.quiet = self.rules.quiet(self.problem, f)
        if self.quiet is not None:  # the skip test's one compare (the schedule's: 0.2 us)
            self.checked_from = min(next_on_schedule(self.iteration), self.quiet.iterations)
        if callable(grad_norm):
            grad_norm = grad_norm()
        suboptimality = self.problem.suboptimality(f)
        ctx = Context(self.iteration, self.clock.elapsed(), f, self.f0, self.f_prev,
                      suboptimality, grad_norm)
        fired, self.states = self.rules.check(self.ops, ctx, self.states)
        self.last = (f, suboptimality, grad_norm)
        if on_trace_schedule(self.iteration):
            paused = perf_counter()  # (a `with clock.paused()` cost 1 us an iteration)
            self._append(ctx.elapsed)
            self.clock.exclude_since(paused)
        self.f_prev = f
        if any(fired):
            self.fired = self.rules.first(fired)
        return self.fired >= 0

    def finish(self) -> float:
        """Seconds of the run; the last iterate joins the trace if the schedule left it out (a
        method that stopped by itself may stop at an iterate whose full check was skipped)."""
        seconds = self.clock.elapsed()
        if self.skipped is not None:
            f, grad_norm = self.skipped
            self.last = (f, self.problem.suboptimality(f),
                         grad_norm() if callable(grad_norm) else grad_norm)
        if self.trace["iteration"][-1] != self.iteration:
            self._append(seconds)
        return seconds

    def ending(self) -> Ending:
        return self.rules.ending(self.fired, self.iteration)

    def _append(self, seconds):
        row = (self.iteration, seconds, *self.last)
        for column, value in zip(TRACE_COLUMNS, row, strict=True):
            self.trace[column].append(value)


def host_loop(problem, rules, *, init, step, observe, glance=None):
    """Iterate `step` from `init()` until a rule fires; `observe(state)` -> host (f, grad_norm)
    as RuleMonitor.check takes them. `glance(state)`, where given, is observe's cheaper form
    for an iterate that the schedule leaves out (the loss, and the norm as a function: read
    only if the loss leaves the quiet region). Returns (state, iterations, seconds, ending,
    trace)."""
    monitor = RuleMonitor(problem, rules)
    state = init()
    glance = glance or observe
    while not monitor.check(*(observe(state) if monitor.iteration >= monitor.checked_from
                              else glance(state))):
        state = step(state)
        monitor.iteration += 1
    seconds = monitor.finish()
    return state, monitor.iteration, seconds, monitor.ending(), monitor.trace


def step_functions(ops, optimizer, formulation: str, kind: str, stats, *, eager=False):
    """The pure init and step a compiled backend compiles, each returning the state and
    `stats(state)` (what it reads back); the objective is built inside, which costs nothing
    once compiled. `eager`: steps run op by op (PyTorch's feed and resident), where building it
    costs about 8 us a step (1k x 5, CPU), so the objective of the last data is kept, and
    bound to new data when they change (a feed's fresh copy at every step)."""
    last = [None, None]  # (data, its objective), eager only

    def objective_of(data):
        if not eager:
            return make_objective(ops, data, formulation, kind)
        if last[0] is not data:
            last[:] = data, (make_objective(ops, data, formulation, kind) if last[1] is None
                             else rebound(last[1], data))
        return last[1]

    def init(data, params, w0):
        state = optimizer.init(objective_of(data), ops, params, w0)
        return state, stats(state)

    def step(data, params, state):
        state = optimizer.update(objective_of(data), ops, params, state)
        return state, stats(state)

    return init, step


def counts(optimizer, iterations: int) -> dict:
    """Evaluations of a run: one loss and gradient at the start, then `evaluations` per step."""
    per = optimizer.evaluations
    return {key: int(key != "nhvp") + iterations * per[key] for key in ("nfev", "ngev", "nhvp")}


def for_problem(optimizer, problem):
    """The optimizer as it runs on this problem, or InputError saying why it cannot (reads only
    its objective and lam: a config is checked with `datasets.ProblemKind` before any data)."""
    reason = unsupported(optimizer, problem)
    if reason is not None:
        raise InputError(reason)
    return optimizer.for_problem(problem)  # e.g. L-BFGS's line search made explicit


def run(problem, optimizer, rules, *, backend, init: str = "zeros", seed: int = 0) -> RunResult:
    """One run: the backend minimises from the chosen start; the result is judged in float64."""
    optimizer = for_problem(optimizer, problem)
    w0 = initial_point(problem, init, seed)
    dtype = backend.dtype
    problem.check_dtype_range(dtype, w0)
    reference = problem.reference  # solved before any clock starts
    refusal = reference.refusal(rules.spec.get("tol"))
    if refusal is not None:
        raise Uncertifiable(refusal)
    tol = rules.spec.get("tol")
    prediction, eps0 = predicted(problem, optimizer, tol, w0)
    # a loss that is not monotone: the stall rule waits it out (worked out here, before any
    # clock: for a textbook momentum step, one more pass over X to form X^T X)
    settling = optimizer.settling(problem)
    if settling is not None:
        rules = rules.waiting(settling.patience, settling.why)
    # the backend's loop, or a self-driven reference method's own (SciPy, closed form)
    outcome: Outcome = optimizer.minimize(problem, rules, backend, w0)
    if outcome.nfev is None:
        outcome.nfev, outcome.ngev, outcome.nhvp = counts(optimizer, outcome.iterations).values()
    outcome.extra.setdefault("formulation", backend.formulation)
    outcome.extra.setdefault("stopping_via", "loop")
    outcome.extra.update(stall_patience=rules.stall_patience(),
                         **(settling.record if settling is not None else {}))
    w = np.asarray(outcome.w, dtype=np.float64)
    final_loss = problem.loss(w)
    suboptimality = problem.suboptimality(final_loss)
    target_reached = None if tol is None else bool(suboptimality <= tol)
    judge_status(outcome, tol, target_reached, suboptimality)
    if below_reference(problem, w, final_loss):
        outcome.status, outcome.message = "reference-error", (
            f"REFERENCE ERROR: the final loss {final_loss:.17g} is below the "
            f"certified f* {reference.f:.17g} by more than its accuracy "
            f"{reference.accuracy:.2g}; f* is wrong, no run here can be judged "
            f"(the run itself ended {outcome.status}: {outcome.message})")
    trace = pd.DataFrame(outcome.trace, columns=list(TRACE_COLUMNS))
    # the best the run reached on its way: above the final suboptimality, its loss rose
    outcome.extra["best_suboptimality"] = float(
        np.fmin(trace["suboptimality"].astype("float64").min(), suboptimality))
    return RunResult(
        optimizer=optimizer.name, hyperparameters=optimizer.hyperparameters(),
        backend=backend.name, device=outcome.device, dtype=dtype.name,
        dataset=problem.name, dataset_params=dict(problem.params), n=problem.n, d=problem.d,
        init=init, seed=seed, stopping=dict(rules.spec), iterations=outcome.iterations,
        nfev=outcome.nfev, ngev=outcome.ngev, nhvp=outcome.nhvp,
        setup_seconds=outcome.setup_seconds, seconds=outcome.seconds, final_loss=final_loss,
        suboptimality=suboptimality, target_reached=target_reached,
        grad_norm=float(np.linalg.norm(problem.grad(w))), status=outcome.status,
        message=outcome.message, f_star=reference.f, f_star_accuracy=reference.accuracy,
        suboptimality_floor=reference.floor, kappa=reference.kappa,
        kappa_raw=reference.kappa_raw, trace=trace, w=w, extra=outcome.extra,
        conditioning=reference.conditioning(),
        prediction=prediction_columns(prediction, outcome.iterations, target_reached,
                                      dtype.name, tol, eps0),
    )


def predicted(problem, optimizer, tol, w0):
    """(the run's prediction (optimizers.bounds), eps0), before any clock."""
    reference, eps0 = problem.reference, initial_suboptimality(problem, w0)
    return predict(optimizer.name, optimizer.hyperparameters(), {
        "kappa_gd": reference.kappa_gd, "kappa_diag_step": reference.kappa_diag_step,
        "kappa_raw": reference.kappa_raw}, eps0, tol, problem.objective,
        optimizer.family), eps0


def initial_suboptimality(problem, w0) -> float:
    """(f(w0) - f*) / f*: where a bound's log(eps0 / eps) starts."""
    return float(problem.suboptimality(problem.loss(w0)))


def prediction_columns(prediction, iterations: int, reached, dtype: str, tol,
                       eps0: float) -> dict:
    """The row's prediction (optimizers.bounds) beside what the run did."""
    slower, said = verdict(prediction, iterations, reached, dtype, tol)
    return {"initial_suboptimality": eps0,
            "predicted_iterations": prediction.iterations, "bound": prediction.bound,
            "slower_than_bound": slower if prediction.iterations is not None else None,
            "bound_verdict": said}


def judge_status(outcome: Outcome, tol, target_reached, suboptimality: float) -> None:
    """`converged` only where the float64 check of the final iterate confirms the target; any
    other ending says the target was missed, so that nothing reads as success where it was not."""
    if outcome.status == "converged" and not target_reached:
        # the run's own dtype claimed the target but could not resolve it
        outcome.status = "stalled"
        outcome.message += (f", but the float64 suboptimality of the final iterate is "
                            f"{suboptimality:.3g}, above tol {tol:g}")
    elif target_reached is False and outcome.status not in ("skipped", "failed"):
        outcome.message += (f"; the target (suboptimality <= tol {tol:g}) was not reached: "
                            f"{suboptimality:.3g}")


def below_reference(problem, w, final_loss: float) -> bool:
    """A loss below f* by more than f*'s accuracy: f* is wrong. The float64 loss screens, the
    extended-precision loss confirms (rounding never raises the alarm)."""
    ref = problem.reference
    margin = ref.accuracy * ref.scale
    return final_loss < ref.f - margin and problem.loss_extended(w) < ref.f - margin
