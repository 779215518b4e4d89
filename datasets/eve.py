"""A deterministic stand-in for the 1M-row EVE Online activity data of the original question.

Four heavy-tailed, correlated count columns on very different scales, driven by one latent
log-normal "activity", and the target hour_of_week (0..167) weakly linear in them plus much
noise: raw, a badly conditioned least-squares problem, as the original data was; standardized,
a well-conditioned one. objective="logistic" thresholds the target at the middle of the week
(late_week, +1 or -1): weakly predicted, the classes overlap heavily; lam defaults to 1/n.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from datasets.declaration import Dataset
from datasets.memory import require_memory
from datasets.problem import OBJECTIVES, Problem
from datasets.values import boolean, choice, integer, number

FEATURES = ("ship_jumps", "npc_kills", "ship_kills", "pod_kills")
LABEL = "hour_of_week"
BINARY_LABEL = "late_week"


def validate_params(rows: int = 1_000_000, **_) -> None:
    """The memory the data set needs (the types and ranges: DATASET's parameters)."""
    # at its peak: the frame's columns and temporaries, X with its intercept, the reference's
    # scaled copy and factors, about 16 float64 values a row
    require_memory(f"eve with {rows} rows", 16 * 8 * rows)


def eve_frame(rows: int = 1_000_000, seed: int = 0) -> pd.DataFrame:
    """The data as the original program saw it: a pandas frame of int64 counts and the target."""
    DATASET.validate({"rows": rows, "seed": seed})
    rng = np.random.default_rng(seed)
    activity = rng.lognormal(mean=0.0, sigma=1.0, size=rows)
    ship_jumps = rng.poisson(60.0 * activity)
    npc_kills = rng.poisson(25.0 * activity**1.3 * rng.lognormal(0.0, 0.7, size=rows))
    ship_kills = rng.poisson(1.5 * activity**1.5)
    pod_kills = rng.binomial(ship_kills, 0.4)
    signal = 70.0 + 0.05 * ship_jumps + 0.02 * npc_kills + 1.5 * ship_kills - 1.0 * pod_kills
    hour = np.clip(np.rint(signal + rng.normal(0.0, 40.0, size=rows)), 0, 167)
    return pd.DataFrame({
        "ship_jumps": ship_jumps, "npc_kills": npc_kills, "ship_kills": ship_kills,
        "pod_kills": pod_kills, LABEL: hour.astype(np.int64),
    })


def load(rows: int = 1_000_000, seed: int = 0, standardize: bool = False,
         objective: str = "least-squares", lam: float | None = None) -> Problem:
    frame = eve_frame(rows, seed)
    labels, name = frame[LABEL].to_numpy(np.float64), LABEL
    if objective == "logistic":
        labels, name = np.where(labels >= 84, 1.0, -1.0), BINARY_LABEL
    return Problem.from_arrays(
        frame[list(FEATURES)].to_numpy(np.float64), labels,
        name="eve", params={"rows": rows, "seed": seed, "standardize": standardize},
        feature_names=FEATURES, label_names=(name,), standardize=standardize,
        objective=objective, lam=lam,
    )


DATASET = Dataset(
    "eve", load,
    {"rows": integer(1), "seed": integer(0), "standardize": boolean(),
     "objective": choice(*OBJECTIVES), "lam": number(0, optional=True)},
    seeded=True, objective=None, rows="rows", check=validate_params)
