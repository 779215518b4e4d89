"""What running a fused TensorFlow loop in a worker thread (so that Ctrl-C stays prompt, see
`optimizers.interruptible`) costs the timed seconds: paired runs, alternating which goes first,
of the same configuration called directly in the main thread and through the worker thread.

    python scripts/interrupt_cost.py [PAIRS]

Prints, per configuration, the median of the per-pair ratios (thread / direct) of the loop's
seconds and of the setup seconds, with the range of the middle half. Shared machines are noisy:
read it as indicative, next to what else was running (printed: load average).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from datasets import make_problem  # noqa: E402
from optimizers import build_rules, make_optimizer  # noqa: E402
from optimizers.driver import initial_point  # noqa: E402
from optimizers.interruptible import call_interruptibly  # noqa: E402
from study.frameworks.registry import make_backend  # noqa: E402

CONFIGS = {  # (data set, optimizer, rules): loops of about 0.1 to 1 s on two cores
    "gd 1/L, eve 100k rows, 400 iterations": (
        ("eve", {"rows": 100_000}), ("gd", {}), {"tol": None, "max_iter": 400}),
    "lbfgs, synthetic 50k x 20 kappa 1e4, to 1e-10": (
        ("synthetic", {"n": 50_000, "d": 20, "kappa": 1e4}), ("lbfgs", {}),
        {"tol": 1e-10, "max_iter": 10_000}),
}


def paired(backend, dataset, params, name, hyper, stopping, pairs: int) -> tuple:
    """Per-pair ratios thread / direct of the loop's and the setup's seconds; iterations."""
    problem = make_problem(dataset, **params)
    problem.reference  # noqa: B018 -- f* before any clock
    arguments = (problem, make_optimizer(name, **hyper), build_rules(**stopping),
                 initial_point(problem, "zeros", 0))

    def direct():
        return backend._fused(*arguments)[0]

    def threaded():
        return call_interruptibly(backend._fused, *arguments)[0]

    direct()  # the first call of a process pays TensorFlow's own start-up
    loop, setup = [], []
    for pair in range(pairs):
        order = (direct, threaded) if pair % 2 == 0 else (threaded, direct)
        timed = {f: f() for f in order}
        loop.append(timed[threaded].seconds / timed[direct].seconds)
        setup.append(timed[threaded].setup_seconds / timed[direct].setup_seconds)
    return loop, setup, timed[direct].iterations


def main(pairs: int) -> None:
    backend = make_backend("tensorflow", "float64", feed="fused")
    print(f"load average before: {os.getloadavg()}")
    for label, ((dataset, params), (name, hyper), stopping) in CONFIGS.items():
        loop, setup, iterations = paired(backend, dataset, params, name, hyper, stopping, pairs)
        for what, ratios in (("loop", loop), ("setup", setup)):
            q1, median, q3 = np.percentile(ratios, [25, 50, 75])
            print(f"{label} ({iterations} iterations): {what} seconds, thread / direct: median "
                  f"{median:.3f} (middle half {q1:.3f}-{q3:.3f}) over {pairs} pairs")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
