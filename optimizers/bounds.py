"""The iterations a method's classical convergence bound allows, from the problem's
conditioning alone (datasets.reference), set beside every run before any clock.

k is the smallest count for which the bound takes the relative suboptimality from eps0 at the
start to the target eps. The bounds hold in exact arithmetic (momentum's is asymptotic): a run
that needs more than SLOWER_FACTOR times its bound is a finding, flagged in its row.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

# Room for what the bounds do not model: rounding (CG's lost conjugacy, the run's own dtype), the
# iteration sweep's schedule (scipy-lsqr/lsmr, within 2.5%), heavy ball's (1 + 2k) transient.
SLOWER_FACTOR = 2.0
# A relative suboptimality target below this cannot be seen by a float32 run's own checks.
FLOAT32_FLOOR = float(np.finfo(np.float32).eps)


class Prediction(NamedTuple):
    iterations: float | None  # None: no bound applies
    bound: str  # a short name of the bound used
    leading: float | None = None  # the bound's leading term (kappa or sqrt(kappa) times the log)
    kappa: float | None = None  # the kappa it read
    method: object = None  # the bound as a function of (kappa, eps0, eps): what-ifs re-read it


def _log_ratio(eps0: float, eps: float, constant: float = 1.0) -> float:
    """ln(constant eps0 / eps), at least 0: a start at the target (or below f*) needs none."""
    ratio = constant * eps0 / eps
    return math.log(ratio) if ratio > 1 else 0.0


def _unusable(kappa, eps0: float, eps: float) -> str | None:
    """Why no bound can be read at this kappa and start, or None: no input ever raises."""
    if kappa is None or not kappa == kappa:
        return ("no bound: kappa unknown (the Hessian's mu is not known: an optimum that is not "
                "finite, or a data cache written before it was stored)")
    if kappa == math.inf:
        return ("no bound: kappa is past float64's range (the Hessian's smallest eigenvalue is "
                "0 or below what float64 holds)")
    if not kappa > 0:
        return f"no bound: kappa {kappa:.3g} is not a condition number"
    if not (math.isfinite(eps0) and eps > 0):
        return f"no bound: initial suboptimality {eps0:.3g} (tol {eps:g})"
    return None


def _count(log: float, rate: float, bound: str, leading: float) -> Prediction:
    """The smallest k with k rate >= log, `rate` -ln of the bound's factor per iteration (with
    log1p, so that it stays > 0 however large kappa is)."""
    if log == 0:
        return Prediction(0.0, bound, 0.0)
    k = log / rate if rate > 0 else math.inf
    if not math.isfinite(k):
        return Prediction(None, f"no bound: {bound} passes float64's range")
    return Prediction(float(math.ceil(k)), bound, leading)


def gradient_descent(kappa: float, eps0: float, eps: float) -> Prediction:
    """GD with step 1/L on an L-smooth, mu-strongly convex f: f_k - f* <= (1 - 1/kappa)^k
    (f_0 - f*), kappa = L/mu (Polyak 1963; Nesterov 2004, Thm 2.1.15; Karimi, Nutini and Schmidt
    2016, Thm 1). k = ln(eps0/eps) / -ln(1 - 1/kappa) <= kappa ln(eps0/eps)."""
    if why := _unusable(kappa, eps0, eps):
        return Prediction(None, why)
    log, kappa = _log_ratio(eps0, eps), max(kappa, 1.0)  # below 1: rounding
    rate = -math.log1p(-1.0 / kappa) if kappa > 1 else max(log, 1.0)
    return _count(log, rate, "gd 1/L: kappa ln(eps0/eps)", kappa * log)


def diagonal_step(kappa_diag_step: float, eps0: float, eps: float) -> Prediction:
    """GD with the original program's step 1/(d diag H) (gd step "diag"): GD with step 1/d on
    the unit-diagonal D^-1/2 H D^-1/2, whose largest eigenvalue is at most d; the same rate as
    `gradient_descent` with kappa = d / lambda_min(D^-1/2 H D^-1/2) (datasets.reference)."""
    k = gradient_descent(kappa_diag_step, eps0, eps)
    if k.iterations is None:
        return k
    return k._replace(bound="gd diag: d/lambda_min(D^-1/2 H D^-1/2) ln(eps0/eps)")


def nesterov(kappa: float, eps0: float, eps: float) -> Prediction:
    """Nesterov's constant-step scheme (step 1/L, beta = (sqrt L - sqrt mu)/(sqrt L + sqrt mu)):
    f_k - f* <= (1 - 1/sqrt(kappa))^k (f_0 - f* + mu/2 ||w0 - w*||^2) <= 2 (1 - 1/sqrt(kappa))^k
    (f_0 - f*) (Nesterov 2004, Thm 2.2.3; mu/2 ||w0 - w*||^2 <= f_0 - f*)."""
    if why := _unusable(kappa, eps0, eps):
        return Prediction(None, why)
    root, log = math.sqrt(max(kappa, 1.0)), _log_ratio(eps0, eps, 2.0)
    rate = -math.log1p(-1.0 / root) if root > 1 else max(log, 1.0)
    return _count(log, rate, "nesterov: sqrt(kappa) ln(2 eps0/eps)", root * log)


def _chebyshev_rate(root: float, log: float) -> float:
    """-ln of the loss's factor per iteration, ((sqrt(kappa) - 1)/(sqrt(kappa) + 1))^2:
    2 ln(1 + 2/(sqrt(kappa) - 1)); one iteration at kappa 1."""
    return 2 * math.log1p(2.0 / (root - 1)) if root > 1 else max(log, 1.0)


def heavy_ball(kappa: float, eps0: float, eps: float) -> Prediction:
    """Heavy ball with Polyak's optimal constants on a quadratic: the error shrinks
    asymptotically by (sqrt(kappa) - 1)/(sqrt(kappa) + 1) per iteration, the loss by its square
    (Polyak 1964): k ~ sqrt(kappa)/4 ln(eps0/eps). Asymptotic only (a (1 + 2k) transient in
    front, which SLOWER_FACTOR covers at these counts)."""
    if why := _unusable(kappa, eps0, eps):
        return Prediction(None, why)
    root, log = math.sqrt(max(kappa, 1.0)), _log_ratio(eps0, eps)
    return _count(log, _chebyshev_rate(root, log),
                  "heavy ball (asymptotic): sqrt(kappa)/4 ln(eps0/eps)", root / 4 * log)


def conjugate_gradient(kappa: float, eps0: float, eps: float) -> Prediction:
    """CG on the normal equations (CGLS, LSQR, LSMR: the same Krylov iterates on least squares):
    the Chebyshev bound in the energy norm, ||e_k||_H <= 2 ((sqrt(kappa) - 1)/(sqrt(kappa) + 1))^k
    ||e_0||_H, and f - f* = ||e||_H^2 / 2 on a quadratic, so f_k - f* <= 4 rho^(2k) (f_0 - f*)
    (Golub and Van Loan 2013, Thm 11.3.3; Trefethen and Bau, Thm 38.5): k ~ sqrt(kappa)/4
    ln(4 eps0/eps). Finite termination (k <= d in exact arithmetic) is not used: rounding
    loses it when kappa is large."""
    if why := _unusable(kappa, eps0, eps):
        return Prediction(None, why)
    root, log = math.sqrt(max(kappa, 1.0)), _log_ratio(eps0, eps, 4.0)
    return _count(log, _chebyshev_rate(root, log),
                  "cg (Chebyshev): sqrt(kappa)/4 ln(4 eps0/eps)", root / 4 * log)


def lbfgs_first_phase(kappa: float, eps0: float, eps: float) -> Prediction:
    """L-BFGS has no global rate better than R-linear with an unknown constant (Liu and Nocedal
    1989, Thm 7.1): GD's bound (its first step is a scaled gradient step) as a loose ceiling,
    named as such and never flagged."""
    k = gradient_descent(kappa, eps0, eps)
    if k.iterations is None:
        return k
    return k._replace(bound="l-bfgs: no rate bound; GD's kappa ln(eps0/eps) as a ceiling")


NO_BOUND = "none applies (adaptive per-coordinate steps: no rate in kappa)"
ADAPTIVE = ("adadelta", "adam", "rmsprop", "adagrad")
OTHER_STEP = "none computed for this step (the bounds here are for the 1/L and textbook steps)"
NO_FAMILY = "none: the method declares no family (its class's `family`)"
STEPPED = ("gd", "momentum", "nesterov")  # shipped methods whose other steps have no bound
# Which bound speaks for which optimizer (and its step) is `predict`'s choice; the adaptive
# methods get NO_BOUND, another step of GD or momentum OTHER_STEP.
KRYLOV = ("cgls", "scipy-lsqr", "scipy-lsmr")
QUASI_NEWTON = ("lbfgs", "scipy-lbfgs", "lbfgs-tfp", "optax-lbfgs")


def predict(optimizer: str, hyperparameters: dict, conditioning: dict, eps0: float,
            eps: float | None, objective: str = "least-squares",
            family: str | None = None) -> Prediction:
    """The prediction of one run: `conditioning` holds kappa_gd, kappa_diag_step and kappa_raw,
    eps is the target tol (None: nothing to predict)."""
    if eps is None or not eps > 0:
        return Prediction(None, "no target")
    step = hyperparameters.get("step")
    least_squares = objective == "least-squares"
    if family is not None:  # a user's own method, by the bound it declares
        bound = FAMILIES[family]
        if bound is conjugate_gradient and not least_squares:
            return Prediction(None, "none computed: the Krylov bound is for least squares")
    elif optimizer == "gd" and step == "1/L":
        bound = gradient_descent
    elif optimizer == "gd" and step == "diag" and least_squares:
        bound = diagonal_step
    elif optimizer in ("nesterov", "momentum") and step == "textbook" and not least_squares:
        return Prediction(None, "none computed: on logistic regression the textbook step reads "
                                "the global mu = lam, not the Hessian at the optimum")
    elif optimizer == "nesterov" and step == "textbook":
        bound = nesterov
    elif optimizer == "momentum" and step == "textbook":
        bound = heavy_ball
    elif optimizer in KRYLOV:
        bound = conjugate_gradient
    elif optimizer in QUASI_NEWTON:
        bound = lbfgs_first_phase
    elif optimizer == "closed-form":
        return Prediction(None, "none: a direct solve, not an iteration")
    elif optimizer in ADAPTIVE:
        return Prediction(None, NO_BOUND)
    elif ":" in optimizer:  # keras:<Class>, torch:<Class>
        return Prediction(None, "none computed for a library's optimizer")
    elif optimizer in STEPPED:
        return Prediction(None, OTHER_STEP)
    else:  # a user's own method (optimizers.from_file) that declares no family
        return Prediction(None, NO_FAMILY)
    kappa = conditioning.get(READS.get(bound, "kappa_gd"))
    kappa = float("nan") if kappa is None else float(kappa)
    return bound(kappa, float(eps0), eps)._replace(kappa=kappa, method=bound)


# the bound a user's own method may declare (Optimizer.family)
FAMILIES = {"gd": gradient_descent, "nesterov": nesterov, "heavy-ball": heavy_ball,
            "krylov": conjugate_gradient, "quasi-newton": lbfgs_first_phase}
BOUNDS = (gradient_descent, diagonal_step, nesterov, heavy_ball, conjugate_gradient,
          lbfgs_first_phase)
# the conditioning each bound reads (`predict`'s conditioning keys, the rows' columns): kappa_gd
# (L/mu as run) unless named here
READS = {diagonal_step: "kappa_diag_step", conjugate_gradient: "kappa_raw"}


def named(bound):
    """The bound whose name a row's `bound` column holds, or None: the report reads the row's
    bound rather than choosing one again."""
    return next((method for method in BOUNDS if method(10.0, 1.0, 0.1).bound == bound), None)


def verdict(prediction: Prediction, iterations: int, reached: bool | None, dtype: str,
            eps: float | None) -> tuple[bool, str]:
    """(slower_than_bound, what the row says of the run against its bound)."""
    if prediction.iterations is None:
        return False, prediction.bound
    past = iterations > SLOWER_FACTOR * max(prediction.iterations, 1)
    ceiling = prediction.bound.startswith("l-bfgs")
    if not past:
        if reached and ceiling:
            return False, "within GD's ceiling (L-BFGS has no bound of its own)"
        if reached:
            return False, "matched: within the bound" + (
                "" if iterations <= prediction.iterations else f" times {SLOWER_FACTOR:g}")
        return False, "stopped before the bound's iterations"
    if dtype == "float32" and eps is not None and eps < FLOAT32_FLOOR:
        return False, (f"float32 floor: tol {eps:g} is below what float32 resolves "
                       f"({FLOAT32_FLOOR:.2g})")
    if ceiling:
        return False, "past GD's ceiling (no L-BFGS bound to break)"
    return True, f"slower than the bound (more than {SLOWER_FACTOR:g}x its iterations)"


def count(iterations: float) -> str:
    """A bound's iterations, one way everywhere: in full below 10,000, else 3 digits."""
    return f"{iterations:.0f}" if iterations < 1e4 else f"{iterations:.3g}"


def duration(seconds: float) -> str:
    """A predicted time in the unit a reader thinks in."""
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600),
                       ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:.2g} {unit}"
    return f"{seconds:.2g} s"


def no_bound(prediction: Prediction) -> str:
    """'no bound (why)', where the bound's text does not already start so."""
    said = prediction.bound
    return said if said.startswith("no bound") else f"no bound ({said})"


def explain(name: str, prediction: Prediction, eps0: float, eps: float, *,
            kappa_standardized: float = float("nan"), kappa_diag_step: float = float("nan"),
            standardized: bool = False, seconds_per_iteration: float | None = None) -> str:
    """One sentence: the bound's iterations at the run's kappa, their time at the measured
    seconds per iteration, and what standardizing (or GD's diagonal step) would make of them
    where it brings kappa down more than 10x."""
    name = f"{name}: " if name else ""
    if prediction.iterations is None:
        return f"{name}{no_bound(prediction)}."
    text = (f"{name}at kappa {prediction.kappa:.3g} the bound ({prediction.bound}) gives "
            f"about {count(prediction.iterations)} iterations from suboptimality {eps0:.3g} to "
            f"{eps:g}")
    if seconds_per_iteration and np.isfinite(seconds_per_iteration):
        text += (f", about {duration(prediction.iterations * seconds_per_iteration)} at the "
                 f"measured {seconds_per_iteration * 1e3:.3g} ms per iteration")
    what_ifs = []
    for applies, method, kappa, what, how in (
            (not standardized, prediction.method, kappa_standardized, "standardized columns",
             "`--standardize`, `standardize = true`"),
            (prediction.method is gradient_descent, diagonal_step, kappa_diag_step,
             "GD's diagonal step", '`--step diag`, `step = "diag"`')):
        if not (applies and np.isfinite(kappa) and kappa * 10 < prediction.kappa):
            continue
        then = method(kappa, eps0, eps).iterations
        if then is not None:
            what_ifs.append(f"with {what} kappa = {kappa:.3g} and about {count(then)} "
                            f"iterations ({how})")
    if what_ifs:
        text += "; " + "; ".join(what_ifs)
    return text + " (a prediction from the bound, not a measurement)."
