"""Line searches written against backend ops (each one `ops.while_loop`), so they run in a
host loop, a compiled step and the fused `tf.while_loop` alike.

`strong_wolfe`: Nocedal and Wright's Algorithm 3.5 (bracketing, extrapolating by 2) and 3.6
(zoom: cubic interpolation, eq. 3.59, safeguarded to the bracket's middle 80%, else bisection),
accepting f(w + a p) <= f(w) + c1 a g.p and |g(w + a p).p| <= c2 |g.p| (c1 = 1e-4, c2 = 0.9).
After `max_evals` evaluations, or a bracket narrower than rounding, it returns the best point
with sufficient decrease it has seen, or no step at all.
`armijo`: backtracking by halves until sufficient decrease.

Both return (alpha, f, g, evaluations): the step, the loss and gradient there (evaluated once)
and how many loss-and-gradient evaluations the search made.
"""

from __future__ import annotations

import numpy as np

C1 = 1e-4
C2 = 0.9
MAX_EVALS = 20
GROW = 2.0
SHRINK = 0.5


def _cubic_step(ops, a_lo, f_lo, d_lo, a_hi, f_hi, d_hi):
    """The minimiser of the cubic through both ends (values and slopes), if it lies in the
    middle 80% of the bracket; else the midpoint."""
    tiny = ops.tiny
    width = a_lo - a_hi
    safe_width = ops.where(ops.abs(width) > tiny, width, 1)
    d1 = d_lo + d_hi - 3 * (f_lo - f_hi) / safe_width
    radicand = d1 * d1 - d_lo * d_hi
    d2 = ops.where(a_hi > a_lo, 1, -1) * ops.sqrt(ops.maximum(radicand, 0))
    denominator = d_hi - d_lo + 2 * d2
    safe_denominator = ops.where(ops.abs(denominator) > tiny, denominator, 1)
    cubic = a_hi - (a_hi - a_lo) * (d_hi + d2 - d1) / safe_denominator
    left, right = ops.minimum(a_lo, a_hi), ops.maximum(a_lo, a_hi)
    margin = (right - left) / 10
    usable = ops.logical_and(
        ops.logical_and(radicand >= 0, ops.abs(denominator) > tiny),
        ops.logical_and(cubic >= left + margin, cubic <= right - margin))
    return ops.where(usable, cubic, (a_lo + a_hi) / 2)


def strong_wolfe(objective, ops, w, f0, g0, p, alpha0, *, c1=C1, c2=C2, max_evals=MAX_EVALS):
    """A step along descent direction p from (w, f0, g0) with the strong Wolfe conditions."""
    d0 = ops.vdot(g0, p)
    zero = d0 * 0
    eps = ops.scalar(np.finfo(ops.dtype).eps)
    false = zero > 1

    def condition(count, alpha, a_prev, f_prev, d_prev, a_lo, f_lo, d_lo, a_hi, f_hi, d_hi,
                  zooming, done, f, g, best_a, best_f, best_g):
        collapsed = ops.logical_and(
            zooming, ops.abs(a_hi - a_lo) <= eps * ops.maximum(a_hi, a_lo))
        return ops.logical_and(ops.logical_not(ops.logical_or(done, collapsed)),
                               count < max_evals)

    def body(count, alpha, a_prev, f_prev, d_prev, a_lo, f_lo, d_lo, a_hi, f_hi, d_hi,
             zooming, done, f, g, best_a, best_f, best_g):
        f, g = objective.value_and_grad(w + alpha * p)
        slope = ops.vdot(g, p)
        count = count + 1
        decrease = f <= f0 + c1 * alpha * d0
        flat = ops.abs(slope) <= -c2 * d0
        # Algorithm 3.5 (bracketing)
        past = ops.logical_or(ops.logical_not(decrease),
                              ops.logical_and(count > 1, f >= f_prev))
        bracket_done = ops.logical_and(ops.logical_not(past), flat)
        turned = ops.logical_and(ops.logical_not(ops.logical_or(past, bracket_done)), slope >= 0)
        # Algorithm 3.6 (zoom)
        above = ops.logical_or(ops.logical_not(decrease), f >= f_lo)
        zoom_done = ops.logical_and(ops.logical_not(above), flat)
        move_lo = ops.logical_and(ops.logical_not(above), ops.logical_not(zoom_done))
        flip = ops.logical_and(move_lo, slope * (a_hi - a_lo) >= 0)

        done = ops.where(zooming, zoom_done, bracket_done)
        # the new bracket: [lo, hi] as the two algorithms set it
        to_prev_current = ops.logical_and(ops.logical_not(zooming), past)  # lo=prev, hi=current
        to_current_prev = ops.logical_and(ops.logical_not(zooming), turned)  # lo=current, hi=prev
        new_a_hi = ops.where(to_prev_current, alpha, ops.where(to_current_prev, a_prev, a_hi))
        new_f_hi = ops.where(to_prev_current, f, ops.where(to_current_prev, f_prev, f_hi))
        new_d_hi = ops.where(to_prev_current, slope, ops.where(to_current_prev, d_prev, d_hi))
        new_a_lo = ops.where(to_prev_current, a_prev, ops.where(to_current_prev, alpha, a_lo))
        new_f_lo = ops.where(to_prev_current, f_prev, ops.where(to_current_prev, f, f_lo))
        new_d_lo = ops.where(to_prev_current, d_prev, ops.where(to_current_prev, slope, d_lo))
        # zoom: hi = current when above; else lo = current (hi = old lo when the slope flips)
        zoom_hi = ops.logical_and(zooming, above)
        zoom_flip = ops.logical_and(zooming, flip)
        zoom_lo = ops.logical_and(zooming, move_lo)
        new_a_hi = ops.where(zoom_hi, alpha, ops.where(zoom_flip, a_lo, new_a_hi))
        new_f_hi = ops.where(zoom_hi, f, ops.where(zoom_flip, f_lo, new_f_hi))
        new_d_hi = ops.where(zoom_hi, slope, ops.where(zoom_flip, d_lo, new_d_hi))
        new_a_lo = ops.where(zoom_lo, alpha, new_a_lo)
        new_f_lo = ops.where(zoom_lo, f, new_f_lo)
        new_d_lo = ops.where(zoom_lo, slope, new_d_lo)
        zooming = ops.logical_or(zooming, ops.logical_or(past, turned))

        better = ops.logical_and(decrease, f < best_f)
        best_a, best_f = ops.where(better, alpha, best_a), ops.where(better, f, best_f)
        best_g = ops.where(better, g, best_g)
        following = ops.where(
            zooming, _cubic_step(ops, new_a_lo, new_f_lo, new_d_lo, new_a_hi, new_f_hi, new_d_hi),
            GROW * alpha)
        next_alpha = ops.where(done, alpha, following)
        return (count, next_alpha, alpha, f, slope, new_a_lo, new_f_lo, new_d_lo, new_a_hi,
                new_f_hi, new_d_hi, zooming, done, f, g, best_a, best_f, best_g)

    start = (zero, alpha0 + zero, zero, f0, d0, zero, f0, d0, zero, f0, d0, false, false,
             f0, g0, zero, f0, g0)
    out = ops.while_loop(condition, body, start)
    count, alpha, done, f, g, best_a, best_f, best_g = (out[0], out[1], out[12], out[13],
                                                        out[14], out[15], out[16], out[17])
    return (ops.where(done, alpha, best_a), ops.where(done, f, best_f),
            ops.where(done, g, best_g), count)


def armijo(objective, ops, w, f0, g0, p, alpha0, *, c1=C1, shrink=SHRINK, max_evals=40):
    """The first of alpha0, alpha0/2, ... with sufficient decrease; no step after max_evals."""
    d0 = ops.vdot(g0, p)
    zero = d0 * 0

    def condition(count, alpha, accepted, f, g):
        return ops.logical_and(ops.logical_not(accepted), count < max_evals)

    def body(count, alpha, accepted, f, g):
        f, g = objective.value_and_grad(w + alpha * p)
        accepted = f <= f0 + c1 * alpha * d0
        return count + 1, ops.where(accepted, alpha, shrink * alpha), accepted, f, g

    count, alpha, accepted, f, g = ops.while_loop(
        condition, body, (zero, alpha0 + zero, zero > 1, f0, g0))
    return (ops.where(accepted, alpha, zero), ops.where(accepted, f, f0),
            ops.where(accepted, g, g0), count)
