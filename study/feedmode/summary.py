"""The feed-mode study's terminal summary: one line per run, each call in the two views of
study.feedmode.measure (`first s`: the result on the host; `first compute s`: the output left on
the device; their difference is the fetch, `steady fetch s` the later calls' median)."""

from __future__ import annotations

import pandas as pd


def checksum_deviation(runs: pd.DataFrame) -> pd.Series:
    """|checksum - median checksum of the finished runs of the same dtype and N| / |median|:
    whether every mode computed the same full-size output."""
    checksum = pd.to_numeric(runs["checksum"], errors="coerce")
    finished = checksum.where(runs["status"].isin(["ok", "mismatch"]))
    median = finished.groupby([runs["dtype"], runs["n"]]).transform("median")
    return (checksum - median).abs() / median.abs()


def summary_table(runs: pd.DataFrame) -> str:
    if runs.empty:
        return "(no runs)"

    def number(column):
        if column not in runs:   # results from before the column existed
            return pd.Series(float("nan"), index=runs.index)
        return pd.to_numeric(runs[column], errors="coerce")

    table = pd.DataFrame({
        "mode": runs["mode"], "grappler": runs["grappler"], "dtype": runs["dtype"],
        "n": runs["n"], "status": runs["status"],
        "build s": number("build_seconds"), "session s": number("session_seconds"),
        "data s": number("data_seconds"), "first s": number("first_call_seconds"),
        "first compute s": number("first_compute_seconds"),
        "compile s": number("compile_seconds"),
        "steady s": number("steady_median_seconds"),
        "steady compute s": number("steady_compute_median_seconds"),
        "steady fetch s": number("steady_fetch_median_seconds"),
        "first/steady": number("first_over_steady"),
        "total s": number("total_seconds"), "graphdef MB": number("graphdef_bytes") / 1e6,
        "program MB": number("program_bytes") / 1e6,
        "peak GB": number("peak_memory_mb") * 2**20 / 1e9,
        "check err": number("check_max_abs_error"), "checksum dev": checksum_deviation(runs),
    })
    for column in table.columns[5:]:
        spec = ".1e" if column in ("check err", "checksum dev") else ".3g"
        table[column] = ["-" if pd.isna(v) else format(v, spec) for v in table[column]]
    with pd.option_context("display.width", 250, "display.max_rows", None,
                           "display.max_columns", None):
        return table.to_string(index=False)
