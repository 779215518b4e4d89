"""The feed-mode study's conclusions: Q2, the constant against the placeholder."""

from __future__ import annotations

import pandas as pd

from study.conclusions import Conclusion, paired

Q2 = "Q2: was tf.placeholder really faster than tf.constant?"


def feedmode_conclusions(runs: pd.DataFrame, study: str) -> list[Conclusion]:
    """Q2 at the mode table's N, per dtype: the constant against the placeholder, first call and
    later calls; the answers are float64's (the original question's), else the first dtype's."""
    from study.feedmode.figures import main_size  # heavy: matplotlib
    from study.feedmode.report import mode_comparison

    n = main_size(runs)
    dtypes = sorted(runs["dtype"].dropna().unique())
    main = "float64" if "float64" in dtypes else (dtypes[0] if dtypes else None)
    out = []
    for dtype in dtypes:
        for value, key, quantity in (("first_call_seconds", "first-call", "first-call time"),
                                     ("steady_median_seconds", "later-calls",
                                      "time per later call")):
            c = mode_comparison(runs, "constant", "placeholder", dtype, n, value)
            if not c.instances:
                continue
            out.append(paired(f"q2.{key}.{dtype}.n{n}", Q2, f"At N = {n} in {dtype}", c,
                               "tf.constant", "tf.placeholder", quantity, f"{study}-q2",
                               answer=dtype == main))
    return out
