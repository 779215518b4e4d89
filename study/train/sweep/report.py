"""The train study's section of the report, and its conclusions for the answers block: per model
and data set, which optimizer and framework reached the validation target first, L-BFGS against
the fastest library optimizer, and the loop's overhead against model.fit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from study.conclusions import Conclusion
from study.paired import compare
from study.report.blocks import Block, fmt_seconds
from study.train.sweep.summary import (
    INSTANCE,
    keyed,
    measured,
    named,
    overhead,
    summarize,
    with_time,
)

QUESTION = "Train: which optimizer and framework train this model to this target first?"


def _config_rows(runs: pd.DataFrame, row) -> pd.DataFrame:
    """The runs of a summary row's configuration (its spec's, every parameter included)."""
    return runs[runs["config_key"] == row["config_key"]]


def problem_sentences(runs: pd.DataFrame) -> list[tuple[str, str, object, bool]]:
    """(problem, sentence, comparison, firm) per model and data set."""
    runs = keyed(with_time(measured(runs)))
    table = summarize(runs)
    out = []
    for (model, data), part in table.groupby(["model", "data"], sort=True):
        part = part.sort_values("to_target")
        target = _target_text(runs, model, data)
        title = problem_title(runs, model, data)
        best = part.iloc[0]
        if not np.isfinite(best["to_target"]):
            out.append((title, f"{title}: no configuration reached {target}.", None, False))
            continue
        sentence = (f"{title}: {best['configuration']} had the shortest typical "
                    f"time to {target}, {fmt_seconds(best['to_target'])} of training "
                    f"({best['reached']}/{best['runs']} seeds reached it; ranked by training "
                    f"time, setup excluded)")
        c, firm = None, True
        if len(part) > 1:
            second = part.iloc[1]
            c = compare(_config_rows(runs, best), _config_rows(runs, second), INSTANCE,
                        "to_target")
            sentence += "; against the runner-up, " + c.phrase(best["configuration"],
                                                                second["configuration"])
            firm = c.distinguishable and c.ratio < 1
        sentence += _with_setup(part)
        out.append((title, sentence + ".", c, firm))
    return out


def train_conclusions(runs: pd.DataFrame, study: str) -> list[Conclusion]:
    """Per model and data set, the configuration that reached the validation target first, firm
    when it is distinguishable from the runner-up."""
    return [Conclusion(f"train.fastest.{problem}", QUESTION, sentence, c,
                       sentence.split(": ", 1)[-1].split(" had the")[0], firm,
                       f"{study}-train", answer=True)
            for problem, sentence, c, firm in problem_sentences(runs)]


def _with_setup(part: pd.DataFrame) -> str:
    """The same problem counted as AlgoPerf counts it, compilation (setup) in."""
    first = part.sort_values("to_target_with_setup").iloc[0]
    if not np.isfinite(first["to_target_with_setup"]):
        return ""
    best = part.iloc[0]
    text = (f"; with setup counted in (AlgoPerf's count), "
            f"{fmt_seconds(best['to_target_with_setup'])}")
    if first["configuration"] != best["configuration"]:
        text += (f", and {first['configuration']} would be first with "
                 f"{fmt_seconds(first['to_target_with_setup'])}")
    return text


def problem_title(runs: pd.DataFrame, model: str, data: str) -> str:
    """A problem as the config names it (its [[problems]] name), the model and data it is in
    parentheses; `model on data` where no name was recorded (one `study train` run, old rows)."""
    part = runs[(runs["model"] == model) & (runs["data"] == data)]
    names = part["problem"].dropna().unique() if "problem" in part else []
    return f"{', '.join(map(str, names))} ({model} on {data})" if len(names) else \
        f"{model} on {data}"


def _target_text(runs, model, data) -> str:
    part = runs[(runs["model"] == model) & (runs["data"] == data)]
    metric = part["target_metric"].dropna()
    values = pd.to_numeric(part["target_value"]).dropna()
    if metric.empty or values.empty:
        return "its target"
    how = part["target_how"].dropna()
    text = f"{metric.iloc[0]} {'<=' if part['target_mode'].iloc[0] == 'min' else '>='} " \
           f"{values.median():.4g}"
    if not how.empty and how.iloc[0] == "round":
        text += " (set by the target-setting round)"
    return text


def lbfgs_sentences(runs: pd.DataFrame) -> list[str]:
    """Per problem and framework: our L-BFGS against the fastest library optimizer."""
    runs = keyed(with_time(measured(runs)))
    table = summarize(runs)
    out = []
    for (model, data, backend), part in table.groupby(["model", "data", "backend"], sort=True):
        lbfgs = part[part["optimizer"] == "lbfgs"]
        keras = part[part["optimizer"] != "lbfgs"].sort_values("to_target")
        if lbfgs.empty or keras.empty:
            continue
        a, b = lbfgs.iloc[0], keras.iloc[0]
        c = compare(_config_rows(runs, a), _config_rows(runs, b), INSTANCE, "to_target")
        out.append(f"{problem_title(runs, model, data)}, {backend}: "
                   + c.phrase(a["configuration"], b["configuration"]) + ".")
    return out


def overhead_sentences(runs: pd.DataFrame) -> list[str]:
    table = overhead(runs)
    named_runs = named(runs)
    return [f"{problem_title(named_runs, r['model'], r['data'])}, {r['configuration']}: "
            f"our loop takes "
            f"{r['loop_ms_per_step']:.3g} ms per step, model.fit {r['fit_ms_per_step']:.3g} ms "
            f"(ratio {r['loop_over_fit']:.3g})" for r in table.to_dict("records")]


def summary_frame(runs: pd.DataFrame) -> pd.DataFrame:
    table = summarize(runs)
    if table.empty:
        return table

    def interval(row):
        if not np.isfinite(row["to_target"]):
            return "not reached"
        text = fmt_seconds(row["to_target"])
        if np.isfinite(row["low"]) and np.isfinite(row["high"]):
            text += f" [{fmt_seconds(row['low'])}, {fmt_seconds(row['high'])}]"
        return text

    return pd.DataFrame({
        "model": table["model"], "data": table["data"], "configuration": table["configuration"],
        "reached": [f"{r}/{n}" for r, n in zip(table["reached"], table["runs"], strict=True)],
        "time to target [95%]": table.apply(interval, axis=1),
        "with setup": table["to_target_with_setup"].map(
            lambda v: fmt_seconds(v) if np.isfinite(v) else "not reached"),
        "ms per step": table["ms_per_step"].map(lambda v: f"{v:.3g}"),
        "setup (compile)": table["setup_s"].map(fmt_seconds),
        "evaluation (apart)": table["eval_s"].map(fmt_seconds)})


def _initial_text(runs: pd.DataFrame) -> str:
    """Where the initial weights came from, true for each model kind in the results: only a
    Keras model's (and a shipped native twin's) are checked across frameworks."""
    kind = runs["model_kind"].astype(object) if "model_kind" in runs else \
        pd.Series("keras", index=runs.index)
    reference = runs["reference_val_loss"] if "reference_val_loss" in runs else \
        pd.Series(np.nan, index=runs.index)
    initial = runs["initial"] if "initial" in runs else pd.Series(None, index=runs.index)
    native = kind.notna() & kind.ne("keras")
    parts = []
    if kind.eq("keras").any():
        parts.append("made once by Keras's NumPy backend and checked against its validation "
                     "loss on every framework before training" + (" (Keras models)"
                                                                  if native.any() else ""))
    if (native & reference.notna()).any():
        parts.append("for a shipped native example, its Keras twin's, checked against the "
                     "twin's validation loss")
    if (native & reference.isna() & initial.notna()).any():
        parts.append("for a native model given `initial`, the .npz it names")
    mine = sorted(kind[native & reference.isna() & initial.isna()].unique())
    if mine:
        parts.append(f"for a native model ({', '.join(mine)}), drawn by its own initialization "
                     "under the seed, on its own framework only (no other framework checks "
                     "them)")
    return "; ".join(parts) or "drawn per seed"


def section(results, figures: Path) -> list[Block]:
    runs = results.runs
    anchor = f"{results.folder.name}-train"
    blocks = [Block("h2", "Your own model: time to a validation target", anchor=anchor),
              Block("p", "Each configuration trains the same instances (per seed: the same "
                         f"initial weights, {_initial_text(runs)}; the "
                         "same split and shuffling order). Time to target is training time "
                         "to the first evaluation at or past the target; setup (tracing "
                         "and compilation, before step 1) and every evaluation are timed "
                         "apart and not counted in it, and configurations are ranked by it. "
                         "The time with setup counts it in, as AlgoPerf counts compilation; it is "
                         "shown beside. Steps run in segments between two evaluations with "
                         "no read from the device inside one. A run that did not reach the "
                         "target counts as infinite time.")]
    headline = figures / "headline.png"
    if headline.exists():
        blocks.append(Block("figure", headline, "Time to the validation target per optimizer "
                                                "and framework, with 95% intervals over seeds."))
    blocks.append(Block("list", [s for _, s, _, _ in problem_sentences(runs)]))
    lbfgs = lbfgs_sentences(runs)
    if lbfgs:
        blocks += [Block("h3", "Quasi-Newton against first-order on a real model"),
                   Block("list", lbfgs)]
    extra = overhead_sentences(runs)
    if extra:
        blocks += [Block("h3", "The loop against model.fit"), Block("list", extra)]
    figure = figures / "convergence.png"
    if figure.exists():
        blocks.append(Block("figure", figure, "Validation metric against training time (the "
                                              "first seed), a colour per optimizer, a line "
                                              "style per framework; the target dashed."))
    blocks += [Block("h3", "Every configuration"),
               Block("table", summary_frame(runs), "time to target per configuration")]
    return blocks
