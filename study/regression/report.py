"""The regression study's section of the report: every sentence with a number is generated from
the results tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from optimizers import blas_threads, bounds
from study.frameworks.registry import BACKENDS, FRAMEWORKS
from study.paired import compare
from study.regression import prediction
from study.regression.labels import data_titles, is_logistic, label_runs, original_data, target_tol
from study.regression.spec import RunSpec
from study.regression.summary import INSTANCE_COLUMNS, alarm_lines, summarize, time_to_target
from study.report.blocks import Block, figure_block, fmt_seconds
from study.sweep.tuning import TUNED, finite, measured_runs, tuning_runs


def _labelled_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """The summary of the measured (not skipped) runs with label columns: made once (seconds)
    and handed on to whatever reads it."""
    table = summarize(runs[runs["status"] != "skipped"])
    labels = label_runs(table.assign(status="converged"))
    return table.assign(config=labels["config"].to_numpy(), data=labels["data"].to_numpy())


def target_text(runs: pd.DataFrame) -> str:
    """The target the runs stopped at ('1e-08'), or 'the target' without a tol rule."""
    tol = target_tol(runs)
    return "the target" if tol is None else f"{tol:g}"


def fastest_to_target(runs: pd.DataFrame, part: pd.DataFrame, target: str):
    """The fastest iterative configuration on one data set (its rows `part` of
    `_labelled_summary`) and the paired comparison with the next: (sentence, the fastest or None
    where none reached the target in the median, Comparison or None where no other did)."""
    data = part["data"].iloc[0]
    iterative = part[part["optimizer"] != "closed-form"]
    solved = iterative[np.isfinite(iterative["typical_seconds"])].sort_values(
        ["typical_seconds", "ci_high"], kind="stable")
    if solved.empty:
        return f"On {data} no iterative configuration reached {target} in the median.", None, \
            None
    best = solved.iloc[0]
    sentence = (f"Fastest to {target} on {data}: {best['config']}, "
                f"{fmt_seconds(best['typical_seconds'])} "
                f"[{fmt_seconds(best['ci_low'])}, {fmt_seconds(best['ci_high'])}] "
                f"(typical over {over(best)}, 95% interval: {best['ci_method']}) in "
                f"{best['median_iterations']:.0f} iterations")
    if len(solved) == 1:
        return sentence + ", the only one to reach it in the median", best["config"], None
    second = solved.iloc[1]
    comparison = paired_time(runs, best["config"], second["config"], data)
    if comparison.busy:  # a typical time, but no winner: the runs say little about it
        sentence = sentence.replace(f"Fastest to {target} on {data}: ", f"On {data}, measured "
                                    f"on a busy machine, the shortest typical time to {target}: ",
                                    1)
    sentence += "; against the next, " + comparison.phrase(best["config"], second["config"])
    return sentence, best["config"], comparison


def over(row) -> str:
    """What a typical value is taken over: '3 instances', or '3 runs, repeats of 1 instance'
    where seeds drew no other instance (labels.with_instances)."""
    n, runs = int(row["instances"]), int(row["runs"])
    instances = f"{n} instance{'s' * (n != 1)}"
    return instances if runs <= n else f"{runs} runs, repeats of {instances}"


def repeats_sentence(runs: pd.DataFrame) -> str | None:
    """Where seeds are repeats, not instances, said once: a data set read from a file with a
    fixed starting point is the same problem whatever the seed."""
    labelled = label_runs(runs[runs["status"] != "skipped"])
    if labelled.empty or (labelled["instance_seed"] != -1).all():
        return None
    names = sorted(set(labelled.loc[labelled["instance_seed"] == -1, "data"]))
    return (f"On {', '.join(names)} the seed changes neither the data (read from a file or "
            "fixed by its own seed) nor the starting point (zeros): its runs of one "
            "configuration are repeats of one instance, and their intervals are the repeats' "
            "(for these data and this start only).")


def regression_findings(runs: pd.DataFrame, table: pd.DataFrame | None = None) -> list[str]:
    """Per data set: the fastest configuration to the target and what GD and the original
    Adadelta did, each number read from the summary of `runs`."""
    table = _labelled_summary(runs) if table is None else table
    runs = runs[runs["status"] != "skipped"]
    target = target_text(runs)
    out = []
    for data, part in table.groupby("data", sort=True):
        sentence, best, _ = fastest_to_target(runs, part, target)
        if best is None:
            out.append(sentence)
            continue
        reference = part[part["optimizer"] == "closed-form"]
        if len(reference) and np.isfinite(reference["typical_seconds"].min()):
            closed = reference.sort_values("typical_seconds").iloc[0]
            sentence += (f"; the closed-form solve took {fmt_seconds(closed['typical_seconds'])} "
                         f"({closed['config']})")
        out.append(sentence + ".")
        for optimizer, name in (("gd", "GD"), ("adadelta", "Adadelta")):
            rows = part[part["optimizer"] == optimizer].sort_values("typical_seconds")
            if rows.empty:
                continue
            row = rows.iloc[0]
            if np.isfinite(row["typical_seconds"]):
                out.append(f"  Best {name} on {data}: {row['config']} needed "
                           f"{row['median_iterations']:.0f} iterations "
                           f"({fmt_seconds(row['typical_seconds'])}).")
            else:
                out.append(f"  No {name} configuration on {data} reached {target} in the "
                           f"median; the best one, {row['config']}, ended {row['statuses']} "
                           f"after {row['median_iterations']:.0f} iterations.")
    return out


def _gd_and_adadelta(runs: pd.DataFrame) -> pd.DataFrame:
    """The GD and Adadelta runs that iterated: what per-iteration costs are read from."""
    return label_runs(runs[runs["optimizer"].isin(["gd", "adadelta"])
                           & ~runs["status"].isin(["skipped", "error", "oom"])
                           & (runs["iterations"] > 0)])


def per_iteration_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Median seconds per iteration and passes over X per engine, for GD and Adadelta."""
    runs = _gd_and_adadelta(runs)
    if runs.empty:
        return pd.DataFrame()
    runs = runs.assign(passes=runs["seconds_per_iteration"] / runs["read_pass_seconds"])
    return (runs.groupby(["data", "backend", "engine", "dtype"])
            .agg(ms_per_iteration=("seconds_per_iteration", lambda s: 1e3 * s.median()),
                 passes_over_X=("passes", "median"), runs=("run_id", "count"))
            .reset_index())


def paired_time(runs: pd.DataFrame, a: str, b: str, data: str):
    """Configuration a's time to target against b's on data set `data`, paired on instances."""
    labelled = label_runs(runs)  # rows labelled already keep their labels
    labelled = labelled.assign(time_to_target=time_to_target(labelled))
    on = labelled[labelled["data"] == data]
    return compare(on[on["config"] == a], on[on["config"] == b], INSTANCE_COLUMNS,
                   "time_to_target")


def paired_per_iteration(runs: pd.DataFrame, a: tuple[str, str], b: tuple[str, str]):
    """Seconds per iteration of engine/dtype `a` over `b`, pairing each instance and algorithm
    (optimizer and its hyperparameters) with itself."""
    runs = _gd_and_adadelta(runs)

    def side(engine, dtype):
        return runs[(runs["engine"] == engine) & (runs["dtype"] == dtype)]

    return compare(side(*a), side(*b), [*INSTANCE_COLUMNS, "optimizer", "hyperparameters"],
                   "seconds_per_iteration")


def framework_title(engine: str) -> str:
    """'jax-fused/cpu' -> 'JAX': the title of the framework whose backend labels that engine."""
    mode = engine.split("/")[0]
    for backend in BACKENDS.values():
        if backend.framework and mode.split("+")[0] in {e.split("+")[0]
                                                         for e in backend.engines()}:
            return FRAMEWORKS[backend.framework].title
    return mode


def per_iteration_answers(runs: pd.DataFrame):
    """The original question's per-iteration comparisons on raw eve (else the first data set
    with GD or Adadelta runs): the original TF1 program, TensorFlow's compiled loop and each
    other framework's fastest engine against NumPy float64, paired on data, seed and
    algorithm. (data or None, [(engine, its per_iteration_table row, NumPy's, Comparison)])."""
    table = per_iteration_table(runs)
    if table.empty:
        return None, []
    raw = table[table["data"].str.startswith("eve") & ~table["data"].str.contains(
        "standardize=True")]
    focus = raw if len(raw) else table
    data = focus["data"].iloc[0]

    def cost(engine, dtype):
        row = focus[(focus["engine"] == engine) & (focus["dtype"] == dtype)]
        return None if row.empty else row.iloc[0]

    numpy64 = cost("numpy/cpu", "float64")
    fused = cost("tf-fused+xla/cpu", "float64")
    fused = cost("tf-fused/cpu", "float64") if fused is None else fused
    if numpy64 is None:
        return data, []
    others = []  # each other framework's fastest on the CPU in float64
    for backend in [b for b in BACKENDS if b not in ("numpy", "tensorflow")]:
        own = focus[(focus["backend"] == backend) & focus["engine"].str.endswith("/cpu")
                    & (focus["dtype"] == "float64")]
        if len(own):
            others.append(own.sort_values("ms_per_iteration").iloc[0])
    raw_runs = runs[label_runs(runs)["data"] == data]
    return data, [(row["engine"], row, numpy64,
                   paired_per_iteration(raw_runs, (row["engine"], row["dtype"]),
                                        ("numpy/cpu", "float64")))
                  for row in (cost("tf1/cpu", "float32"), fused, *others) if row is not None]


PAIRED_NOT_QUOTIENT = (
    "The ratios above are paired: the geometric mean of each instance's ratio (same data, "
    "seed and algorithm); the ms beside them are each engine's median over all its runs, so "
    "their quotient need not equal the ratio ({:.3g}/{:.3g} = {:.3g} against {:.3g}).")


def original_regression_answer(runs: pd.DataFrame,
                               summary: pd.DataFrame | None = None) -> list[str]:
    """Why NumPy looked 3x faster than TensorFlow: the numbers behind each flaw."""
    data, pairs = per_iteration_answers(runs)
    if data is None:
        return ["No GD or Adadelta runs with iterations are in the results."]
    out = []

    def cost(row, per: str = "", passes: str = "passes over X") -> str:
        return f"{row['ms_per_iteration']:.3g} ms{per} ({row['passes_over_X']:.2g} {passes})"

    for engine, row, numpy64, c in pairs:
        versus = c.phrase("TF1" if engine == "tf1/cpu" else engine, "NumPy", "time per iteration")
        if engine == "tf1/cpu":
            out.append(f"Per iteration on {data}: the original TF1 pattern (feed_dict of the "
                       f"whole frame every step, float32) took {cost(row)}, NumPy float64 "
                       f"{cost(numpy64, passes='passes')}; paired on the same data, seed and "
                       f"algorithm, {versus}.")
        elif engine.startswith("tf-"):
            out.append(f"With the data resident and the whole loop compiled ({engine}), "
                       f"TensorFlow took {cost(row, ' per iteration')}: {versus}.")
        else:
            out.append(f"{framework_title(engine)}'s fastest engine per iteration ({engine}, "
                       f"float64) took {cost(row)}: {versus}.")
    if out:  # the first answer's medians, their quotient and its paired ratio
        _, row, numpy64, c = pairs[0]
        a, b = row["ms_per_iteration"], numpy64["ms_per_iteration"]
        out.append(PAIRED_NOT_QUOTIENT.format(a, b, a / b if b > 0 else float("nan"), c.ratio))
    summary = _labelled_summary(runs) if summary is None else summary
    on_data = summary[summary["data"] == data]
    original = on_data[(on_data["optimizer"] == "adadelta")
                       & on_data["hyperparameters"].str.contains('"learning_rate": 1.0')]
    iterative = on_data[on_data["optimizer"] != "closed-form"]
    best = iterative[np.isfinite(iterative["typical_seconds"])].sort_values("typical_seconds")
    if len(original):
        row = original.sort_values("median_iterations").iloc[0]
        out.append(f"Time per epoch is not time to converge: Adadelta with the original "
                   f"learning rate 1 ({row['config']}) ended {row['statuses']} after "
                   f"{row['median_iterations']:.0f} iterations on {data}.")
    if len(best):
        row = best.iloc[0]
        out.append(f"The fastest iterative configuration to the target on {data} was "
                   f"{row['config']}: "
                   f"{fmt_seconds(row['typical_seconds'])} in {row['median_iterations']:.0f} "
                   f"iterations, at {fmt_seconds(row['median_seconds_per_iteration'])} each.")
    return out


STALL_RULE = (
    "A run is stalled when its loss has not beaten its best by more than rel_tol (relative) for "
    "`patience` iterations, as Keras's EarlyStopping counts. Momentum and Nesterov wait at least "
    "10 of their time constants 1/(1 - sqrt(beta)): their loss rises before it falls (textbook "
    "heavy ball on raw eve climbs to 3e4 times f* and takes about 1450 iterations to come back "
    "below its start), so a shorter wait would call that a stall. Rows measured before issue 27 "
    "compared each loss with the previous one instead (their message says 'in a row').")


def stalled_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Why each stalled run stopped, from its own record: the rule's words (its message up to
    the iteration: what stalled, for how long and, where a momentum method raised the patience,
    why), the iteration, the suboptimality there, and a momentum method's beta and its source."""
    stalled = label_runs(runs[runs["status"] == "stalled"])
    if stalled.empty:
        return pd.DataFrame()
    stalled = stalled.sort_values(["data", "config", "seed"], kind="stable")
    beta = stalled["momentum_beta"] if "momentum_beta" in stalled else None
    source = stalled["momentum_source"] if "momentum_source" in stalled else None
    momentum = [
        "" if optimizer not in ("momentum", "nesterov") else
        "not recorded (before issue 27)" if beta is None or pd.isna(beta[i]) else
        f"beta {beta[i]:.6g}, {source[i]}"
        for i, optimizer in zip(stalled.index, stalled["optimizer"], strict=True)]
    return pd.DataFrame({
        "data set": stalled["data"], "configuration": stalled["config"],
        "seed": stalled["seed"],
        "rule that fired": stalled["message"].str.split(";").str[0].str.replace(
            r" at iteration \d+(?=,|$)", "", regex=True),
        "iteration": stalled["iterations"],
        "suboptimality": stalled["suboptimality"].map(lambda x: f"{x:.3g}"),
        "momentum and its source": momentum}).reset_index(drop=True)


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    """The report's table of `_labelled_summary`."""
    return pd.DataFrame({
        "data set": table["data"], "configuration": table["config"],
        "runs": table["runs"], "converged": table["success_rate"].map(lambda r: f"{r:.0%}"),
        "typical time to target [95% interval]": [
            f"{fmt_seconds(m)} [{fmt_seconds(lo)}, {fmt_seconds(hi)}]"
            for m, lo, hi in zip(table["typical_seconds"], table["ci_low"], table["ci_high"],
                                 strict=True)],
        "setup": table["median_setup_seconds"].map(fmt_seconds),
        "iterations": table["median_iterations"].map(lambda x: f"{x:.0f}"),
        "bound's iterations (predicted)": table.get(
            "median_predicted_iterations", pd.Series(np.nan, index=table.index)).map(
            lambda x: "–" if np.isnan(x) else bounds.count(x)),
        "per iteration": table["median_seconds_per_iteration"].map(fmt_seconds),
        "statuses": table["statuses"],
    })


CAPTIONS = {
    "convergence_time": "Relative suboptimality against seconds, setup included: a panel per "
                        "data set, a line per optimizer at its best configuration (its engine "
                        "as the line style).",
    "convergence_iterations": "Relative suboptimality against iterations (same layout).",
    "time_to_target": "Seconds to the target, setup (grey) and iterations, for the best "
                      "configuration of each optimizer on each engine; x = did not get there.",
    "cost_tradeoff": "Seconds per iteration against iterations, with lines of equal total "
                     "time: where cheap-but-many meets costly-but-few.",
    "performance_profile": "Performance profiles of each optimizer's best configuration over "
                           "data sets and seeds.",
    "regression_feed_modes": "Seconds per iteration per engine, beside one read pass over X.",
    "conditioning": "Iterations to the target against the condition number kappa = L/mu of "
                    "the Hessian as run, one line per optimizer at its best configuration; "
                    "dashed: the bounds' iterations (GD kappa ln(eps0/eps), Nesterov "
                    "sqrt(kappa) ln(2 eps0/eps), CG sqrt(kappa)/4 ln(4 eps0/eps)) from the "
                    "median start; x: did not reach the target, drawn where it stopped.",
}


def regression_blocks(runs: pd.DataFrame, figures: Path,
                      title: str = "Regression study: time to convergence",
                      summary: pd.DataFrame | None = None,
                      study: str = "regression") -> list[Block]:
    """The findings, figures and tables; `study` (the results folder's name) prefixes the
    anchors the answers link to (study.conclusions)."""
    summary = _labelled_summary(runs) if summary is None else summary
    alarms = alarm_lines(summary)  # first, never buried
    blocks = [Block("h2", title),
              *(Block("p", line) for line in alarms),
              Block("list", regression_findings(runs, summary)),
              *theory_blocks(runs, study)]
    for name, caption in CAPTIONS.items():
        blocks += figure_block(figures / f"{name}.png", caption)
    blocks.append(Block("h3", "Median time to target per configuration",
                        anchor=f"{study}-time-to-target"))
    blocks.append(Block("table", summary_table(summary), "every configuration"))
    stalled = stalled_table(runs)
    if not stalled.empty:
        blocks.append(Block("h3", "Why runs stalled", anchor=f"{study}-stalled"))
        blocks.append(Block("p", STALL_RULE))
        blocks.append(Block("table", stalled, "every run that ended stalled"))
    per_iteration = per_iteration_table(runs)
    if not per_iteration.empty:
        blocks.append(Block("h3", "Seconds per iteration and passes over X (GD, Adadelta)",
                            anchor=f"{study}-per-iteration"))
        blocks.append(Block("table", per_iteration.round(3), "per engine"))
    return blocks


def theory_blocks(runs: pd.DataFrame, study: str) -> list[Block]:
    """Why it took that long (study.regression.prediction): each configuration that missed the
    target against its method's bound, and the runs slower than theirs; none for rows written
    before the bounds were recorded."""
    missed = prediction.missed_target_sentences(runs)
    slower = prediction.slower_sentences(runs[runs["status"] != "skipped"])
    if not missed and not slower:
        return []
    return [Block("h3", "Why it took that long: each method against its bound",
                  anchor=f"{study}-bounds"),
            Block("p", prediction.INTRO), Block("list", [*missed, *slower])]


def stopping_sentence(runs: pd.DataFrame) -> str:
    spec = {c[5:]: runs[c].dropna().iloc[0] for c in runs.columns
            if c.startswith("stop_") and runs[c].notna().any()}
    spec = {k: v for k, v in spec.items() if v is not False}
    return "Stopping rules (any-of): " + json.dumps(spec, default=str) + "."


def tuning_blocks(runs: pd.DataFrame) -> list[Block]:
    """The tuned learning rates and the grid behind each (study.sweep.tuning)."""
    table = tuning_table(runs)
    if table.empty:
        return []
    return [Block("h3", "Learning rates tuned on a held-apart seed"),
            Block("p", "Each tuned rate was chosen from a log-spaced grid, each rate run once on "
                       "a seed no measured run uses, with a short budget: the fastest to the "
                       "target by the criterion; if none reached it, the lowest final "
                       "suboptimality; a rate that diverged or failed was never chosen. The "
                       "measured seeds then ran at that rate."),
            Block("table", table, "tuned rates and their grids")]


def logistic_section(results, figures: Path) -> list[Block]:
    """The section of a logistic-regression study: its reference, its line searches' cost, then
    the regression section's findings, figures and tables."""
    runs = label_runs(results.runs)  # once: subsets keep these labels
    wall = runs[(runs["status"] != "skipped") & runs["optimizer"].eq("lbfgs")]
    blocks = [Block("h2", "Logistic regression: L-BFGS with a strong-Wolfe line search"),
              Block("p", reference_sentence(runs[runs["status"] != "skipped"])),
              Block("p", "L-BFGS uses the strong-Wolfe line search of Nocedal and Wright "
                         "(Algorithms 3.5 and 3.6, cubic interpolation, c1 = 1e-4, c2 = 0.9), "
                         "the same code in the NumPy loop and inside the fused tf.while_loop; "
                         "GD uses 1/L from the global bound lambda_max(X^T X)/4n + lam, or "
                         "Armijo backtracking. Evaluation counts include every trial point.")]
    if len(wall):
        ratio = (wall["nfev"] - 1) / wall["iterations"].where(wall["iterations"] > 0)
        blocks.append(Block("p", f"L-BFGS needed {ratio.median():.2f} loss-and-gradient "
                                 f"evaluations per iteration in the median (over {len(wall)} "
                                 f"runs; {fmt_seconds(wall['seconds'].median())} median loop)."))
    blocks += regression_blocks(runs, figures, title="Logistic regression: time to convergence",
                                study=results.folder.name)
    blocks.append(Block("h3", "Iterations and evaluations"))
    blocks.append(Block("table", evaluation_table(runs), "every configuration"))
    blocks.append(Block("p", stopping_sentence(runs)))
    return [*blocks, *blas_blocks(runs)]


def evaluation_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per data set and configuration: median iterations and loss/gradient evaluations (a line
    search's trial points included), and which step rule ran."""
    runs = label_runs(runs[runs["status"] != "skipped"])
    frame = runs.assign(rule=[step_rule(row) for _, row in runs.iterrows()],
                        reached=runs["target_reached"].map({True: 1.0, False: 0.0}))
    table = frame.groupby(["data", "config"], sort=True).agg(
        rule=("rule", "first"), runs=("run_id", "size"),
        iterations=("iterations", "median"), nfev=("nfev", "median"),
        ngev=("ngev", "median"), converged=("reached", "mean")).reset_index()
    return pd.DataFrame({
        "data set": table["data"], "configuration": table["config"], "step rule": table["rule"],
        "runs": table["runs"], "converged": table["converged"].map(lambda r: f"{r:.0%}"),
        "iterations": table["iterations"].map(lambda x: f"{x:.0f}"),
        "loss evaluations": table["nfev"].map(lambda x: f"{x:.0f}"),
        "gradient evaluations": table["ngev"].map(lambda x: f"{x:.0f}"),
    })


def step_rule(row) -> str:
    """How the optimizer of a row chooses its step."""
    if row["optimizer"] == "gd":
        return f"step {row.get('hp_step')}"
    if row["optimizer"] == "lbfgs":
        return f"{row.get('hp_line_search')} line search"
    if row["optimizer"] == "scipy-lbfgs":
        return "SciPy's own (More-Thuente)"
    return "its own rule"


def reference_sentence(runs: pd.DataFrame) -> str:
    """What f* is worth here: the Newton reference's accuracy and conditioning per data set."""
    parts = []
    for data, part in label_runs(runs).groupby("data", sort=True):
        parts.append(f"{data}: f* = {part['f_star'].iloc[0]:.12g} (relative accuracy "
                     f"{part['f_star_accuracy'].max():.1g}), Hessian kappa at w* "
                     f"{part['kappa'].iloc[0]:.3g}")
    return ("f* is Newton's method in float64 run until its decrement is at machine level, "
            "certified with an extended-precision loss and gradient (datasets/logistic.py); "
            + "; ".join(parts) + ".")


def section(results, figures: Path) -> list[Block]:
    if is_logistic(results.runs):  # configs/logistic.toml: not the original question
        return logistic_section(results, figures)
    tuning = tuning_blocks(results.runs)
    runs = label_runs(measured_runs(results.runs))  # once: subsets keep these labels
    summary = _labelled_summary(runs)
    study = results.folder.name
    repeats = repeats_sentence(runs)
    ran = runs[runs["status"] != "skipped"]
    if original_data(ran):
        title = "The first question: was NumPy really 3x faster than TensorFlow?"
        caption = "Best configuration of each optimizer on each engine"
    else:  # the user's own data: the user's question, named from the data
        title, caption = own_question(ran), "Each optimizer on each engine"
    return [Block("h2", title, anchor=f"{study}-q1"),
            *figure_block(figures / "headline.png", f"{caption}, one algorithm per row: time "
                          "to the target (left) against time per iteration (right)."),
            *([Block("p", repeats)] if repeats else []),
            Block("list", original_regression_answer(runs, summary)),
            *regression_blocks(runs, figures, summary=summary, study=study),
            *tuning,
            Block("p", stopping_sentence(runs)),
            *blas_blocks(runs)]


def blas_blocks(runs: pd.DataFrame) -> list[Block]:
    """The BLAS thread count the NumPy runs used, once (optimizers/blas_threads.py)."""
    sentence = blas_threads.report_sentence(runs)
    return [Block("p", sentence)] if sentence else []


def own_question(runs: pd.DataFrame) -> str:
    """The question a regression study of other data than the original (eve) asks, named from
    its own data sets and target: which configuration wins on the user's data."""
    titles = data_titles(runs)
    shown = "; ".join(titles[:3]) + (f" and {len(titles) - 3} more" if len(titles) > 3 else "")
    return (f"On {shown}: which optimizer and engine reach {target_text(runs)} first?")


def tuning_table(runs):
    """One row per tuned configuration: the rate chosen, the grid and what each rate did on the
    held-apart seed, read from the rows (the measured rows' specs name their grid's runs)."""
    if "tuning" not in runs:
        return pd.DataFrame()
    tuned = label_runs(runs[runs["tuning"].astype(object).eq(TUNED)])
    rows = {r["run_id"]: r for r in runs.to_dict("records")}
    out = []
    for (data, config), group in tuned.groupby(["data", "config"], sort=True):
        spec = RunSpec.from_json(group["spec"].iloc[0])
        grid = spec.tuning["grid"]
        outcomes = [_outcome(rate, rows.get(run.run_id))
                    for rate, run in zip(grid, tuning_runs(spec), strict=True)]
        value = spec.tuning.get("value")
        out.append({"data set": data, "configuration": config,
                    "tuned rate": "none usable" if value is None else f"{value:g}",
                    f"grid runs (criterion: {spec.tuning['criterion']})": "; ".join(outcomes),
                    "held-apart seed": spec.tuning["seed"],
                    "held apart": spec.tuning_holdout(),
                    "budget": json.dumps(spec.tuning["stopping"], sort_keys=True)})
    return pd.DataFrame(out)


def _outcome(rate, row) -> str:
    if row is None:
        return f"{rate:g}: no row"
    text = f"{rate:g}: {row['status']}"
    if finite(row.get("iterations")):
        text += f" {int(row['iterations'])} it"
    if row["status"] != "converged" and finite(row.get("suboptimality")):
        text += f", subopt {float(row['suboptimality']):.1e}"
    return text
