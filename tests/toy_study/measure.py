"""The toy's measurement: a cost drawn from the seed (B's `slower` times A's), nothing timed."""

import numpy as np

from study.sweep.plugin import Measurement


def measure(spec, ctx):
    base = 1.0 + np.random.default_rng(spec.seed).uniform(0, 0.1)
    return Measurement({"status": "ok", "message": "",
                        "cost": base * (spec.slower if spec.method == "B" else 1.0)})
