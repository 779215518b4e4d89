"""What a library optimizer's numbers may be, checked before the library sees them.

Keras and PyTorch take a negative learning rate or epsilon without a word (and run), so the
library references (`keras:<Class>`, `torch:<Class>`, `optax:<name>`) check each parameter that
names a rate, a decay, a norm or a count here first, and refuse an impossible one in one line
naming it.
"""

from __future__ import annotations

import math

from convergence_study.errors import InputError

# (low, high, low included, high included); None: unbounded on that side
RATE = (0.0, None, False, None)  # > 0
FRACTION = (0.0, 1.0, True, False)  # [0, 1): a beta, a decay of an average
UNIT = (0.0, 1.0, True, True)  # [0, 1]
NONNEGATIVE = (0.0, None, True, None)  # >= 0: a weight decay, an initial accumulator
# parameters that count something (iterations, evaluations, stored pairs, steps): an integer
# >= 1 in every library, whichever caller names them. torch's LBFGS takes max_iter = 0 and then
# moves nothing at each step (a run "timed out" at its initial weights); optax's lbfgs takes
# memory_size = 0.
COUNTS = ("history_size", "max_iter", "max_eval", "memory_size", "ns_steps")


def check_ranges(where: str, config: dict, ranges: dict, counts=()) -> None:
    """Refuse a number outside its parameter's range (`ranges[name]`), a non-finite one, or a
    count (a name in `counts` or COUNTS) that is not an integer >= 1, naming `where: name`, the
    range and the value. None (a library's 'off') is left alone, and so are booleans and what is
    not a number where a count is not expected."""
    for key, value in config.items():
        name = f"{where}: {key}"
        if key in counts or key in COUNTS:
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise InputError(f"{name} must be an integer >= 1, got {value!r}")
            continue
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if not math.isfinite(value):
            raise InputError(f"{name} must be a finite number, got {value!r}")
        low, high, low_in, high_in = ranges.get(key, (None, None, None, None))
        if (low is not None and (value < low or (value == low and not low_in))) or \
                (high is not None and (value > high or (value == high and not high_in))):
            interval = (("[" if low_in else "(") + ("-inf" if low is None else f"{low:g}") + ", "
                        + ("inf" if high is None else f"{high:g}") + ("]" if high_in else ")"))
            raise InputError(f"{name} must be in {interval}, got {value!r}")
