"""Section `peer` (issue 53, docs/bench.md): the NumPy L-BFGS and GD against SciPy's L-BFGS-B
and the hand-written loop, and what a sweep spends on each run beyond the runs' own time.

Ours is the run's timed loop; SciPy's the whole call. Each pair is timed side by side,
alternating which goes first, with BLAS held to `plan.peer_blas_threads` threads on both sides
(on a shared 2-core machine a BLAS call waiting for a descheduled second thread made single
timings of a 500 x 30 problem 10x slower).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from datasets import make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.objective import make_objective, problem_data
from study.bench.plan import PEER_GOALS, TARGET_TOL, Plan
from study.bench.runs import failed_row, progress, shown
from study.bench.timing import alternated, compared, median, samples
from study.bench.twins import twin_of
from study.frameworks.registry import make_backend

TRIVIAL = """name = "peer-sweep"
description = "trivial runs: one lstsq on 50 x 3 each"
seeds = {seeds}
repeats = 1

[stopping]
tol = 1e-8
max_iter = 100

[[datasets]]
name = "synthetic"
n = 50
d = 3

[[optimizers]]
name = "closed-form"

[[backends]]
name = "numpy"
dtype = "float64"
"""


def peer_problem(objective: str, n: int, d: int, kappa: float):
    """A synthetic problem of that objective and size (seed 0): least squares with condition
    number kappa, or L2-logistic with features of that condition number and overlap 0.1."""
    if objective == "logistic":
        return make_problem("synthetic-logistic", n=n, d=d, kappa=kappa, overlap=0.1)
    return make_problem("synthetic", n=n, d=d, kappa=kappa)


def scipy_lbfgs(problem, iterations: int, tol: float | None) -> tuple[float, int]:
    """(seconds, iterations) of SciPy's L-BFGS-B from zeros on the NumPy backend's objective;
    with `tol`, stopped by its callback at the first iterate whose suboptimality is <= tol."""
    import scipy.optimize

    backend = make_backend("numpy")
    objective = make_objective(backend, problem_data(backend, problem), "data",
                               problem.objective)
    d, k = problem.d, problem.k
    f_star, scale = problem.f_star, problem.reference.scale

    def fun(x):
        f, g = objective.value_and_grad(x.reshape(d, k))
        return float(f), g.ravel()

    def reached(intermediate_result):
        if (intermediate_result.fun - f_star) / scale <= tol:
            raise StopIteration

    start = time.perf_counter()
    result = scipy.optimize.minimize(fun, np.zeros(d * k), jac=True, method="L-BFGS-B",
                                     callback=None if tol is None else reached,
                                     options={"maxiter": iterations, "maxcor": 10,
                                              "gtol": 0.0, "ftol": 0.0})
    return time.perf_counter() - start, int(result.nit)


def ours(problem, optimizer: str, iterations: int, tol: float | None) -> tuple[float, int]:
    """(seconds of the timed loop, iterations) of our NumPy float64 run."""
    result = run(problem, make_optimizer(optimizer), build_rules(tol=tol, max_iter=iterations),
                 backend=make_backend("numpy"))
    return result.seconds, result.iterations


def pair_row(base: dict, check: str, goal: float, mine, theirs, repeats: int,
             per_iteration: bool) -> dict:
    """Our figure over the peer's, timed side by side `repeats` times, alternating."""
    row = {**base, "check": check, "goal": goal}
    try:
        runs, peer_runs = alternated(repeats, mine, theirs)  # each (seconds, iterations)
    except Exception as exc:  # noqa: BLE001 -- recorded on the row; the bench goes on
        return failed_row(row, exc)
    times, peer_times = ([seconds / max(count, 1) if per_iteration else seconds
                          for seconds, count in side] for side in (runs, peer_runs))
    return {**row, "status": "ok", "message": "", **compared(times, peer_times, goal),
            "seconds": median(times), "peer_seconds": median(peer_times),
            "iterations": runs[-1][1], "peer_iterations": peer_runs[-1][1],
            "seconds_samples": samples(times), "peer_samples": samples(peer_times)}


def measure_problem(plan: Plan, objective: str, n: int, d: int) -> list[dict]:
    from threadpoolctl import threadpool_limits

    problem = peer_problem(objective, n, d, plan.peer_kappa)
    problem.reference  # noqa: B018 -- f* in float64, before any clock
    base = {"objective": objective, "n": n, "d": d, "kappa": plan.peer_kappa,
            "blas_threads": plan.peer_blas_threads}
    budget, repeats = plan.peer_iterations, plan.peer_repeats
    hand = twin_of("numpy").hand_numpy_gd  # the NumPy twin (study/frameworks/numpy/twin.py)
    lbfgs = {**base, "method": "lbfgs", "peer": "scipy L-BFGS-B"}
    gd_runs = [budget, plan.peer_long_iterations] if n <= plan.peer_long_rows else [budget]
    if problem.objective != "least-squares":
        gd_runs = []  # the hand loop's: least squares
    with threadpool_limits(limits=plan.peer_blas_threads, user_api="blas"):
        return [
            pair_row(lbfgs, "per iteration", PEER_GOALS["lbfgs per iteration"],
                     lambda: ours(problem, "lbfgs", budget, None),
                     lambda: scipy_lbfgs(problem, budget, None), repeats, True),
            pair_row(lbfgs, f"to {TARGET_TOL:g}", PEER_GOALS["lbfgs to target"],
                     lambda: ours(problem, "lbfgs", plan.peer_max_iter, TARGET_TOL),
                     lambda: scipy_lbfgs(problem, plan.peer_max_iter, TARGET_TOL), repeats,
                     False),
        ] + [gd_row(base, hand, problem, iterations, repeats) for iterations in gd_runs]


def gd_row(base: dict, hand, problem, iterations: int, repeats: int) -> dict:
    """GD (1/L) per iteration over the hand loop's, over a run of `iterations`: a short run
    checks and traces every iterate; in a long one most are off the trace's schedule."""
    check = "per iteration" if iterations <= 100 else f"per iteration over {iterations}"
    return pair_row({**base, "method": "gd", "peer": "hand loop"}, check,
                    PEER_GOALS["gd per iteration"], lambda: ours(problem, "gd", iterations, None),
                    lambda: (hand(problem, "float64", "data", iterations) * iterations,
                             iterations), repeats, True)


def measure_sweep(runs: int) -> dict:
    """A sweep of `runs` trivial runs in a fresh `python -m study run`: its wall per run, and
    per run beyond the runs' measured time (setup + loop, as each row records them)."""
    row = {"objective": "least-squares", "n": 50, "d": 3, "method": "closed-form",
           "peer": "its own measured time", "check": f"sweep of {runs} runs",
           "goal": PEER_GOALS["sweep overhead per run"]}
    try:
        with tempfile.TemporaryDirectory(prefix="peer-sweep-") as folder:
            config = Path(folder) / "trivial.toml"
            config.write_text(TRIVIAL.format(seeds=list(range(runs))))
            out = Path(folder) / "out"
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "study", "run", str(config), "--out",
                                   str(out), "--quiet"], capture_output=True, text=True)
            wall = time.perf_counter() - start
            if done.returncode != 0:
                raise RuntimeError(f"the sweep exited {done.returncode}: "
                                   f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
            rows = pd.read_parquet(out / "runs.parquet")
    except Exception as exc:  # noqa: BLE001
        return failed_row(row, exc)
    measured = float((rows["setup_seconds"] + rows["seconds"]).sum())
    beyond = (wall - measured) / runs
    return {**row, "status": "ok", "message": "", "ratio": beyond, "ratio_best": float("nan"),
            "meets_goal": bool(beyond <= row["goal"]), "seconds": wall / runs,
            "peer_seconds": measured / runs, "iterations": runs, "peer_iterations": runs,
            "seconds_samples": samples([wall]), "peer_samples": samples([measured])}


def bench_peer(plan: Plan) -> pd.DataFrame:
    rows = []
    for objective, n, d in plan.peer_problems:
        for row in measure_problem(plan, objective, n, d):
            rows.append(row)
            progress(f"[peer] {row['method']} {objective} {n}x{d} {row['check']} over "
                     f"{row['peer']}: {shown(row, 'ratio', 'x')}")
    if plan.peer_sweep_runs:
        rows.append(measure_sweep(plan.peer_sweep_runs))
        progress(f"[peer] {rows[-1]['check']}: {shown(rows[-1], 'ratio', ' s per run')} beyond "
                 "the runs' own time")
    return pd.DataFrame(rows)
