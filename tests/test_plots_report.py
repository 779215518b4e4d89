"""Figures and report from a small synthetic results table: what is drawn is what the data says."""

import json
import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from study.feedmode import figures as feed_figures
from study.feedmode import report as feed_report
from study.figures import PNG_DPI
from study.regression import figures as plots
from study.regression import headline, report, style
from study.regression.labels import label_runs
from study.report import blocks, build

CONFIGS = [("gd", {"step": "1/L"}, "numpy", None, None, 0.01, 100),
           ("lbfgs", {}, "tensorflow", "fused", True, 0.03, 8),
           ("adadelta", {"learning_rate": 1.0}, "tensorflow", "tf1", None, 0.02, 500)]


def make_tables(configs=CONFIGS, data_sets=({"rows": 100}, {"rows": 100, "standardize": True})):
    """Two data sets, three configurations, three seeds; Adadelta never converges."""
    runs, traces = [], []
    for data in data_sets:
        for optimizer, hp, backend, feed, xla, per_iteration, iterations in configs:
            for seed in range(3):
                run_id = f"{optimizer}-{len(runs)}"
                ok = optimizer != "adadelta"
                seconds = per_iteration * iterations * (1 + 0.1 * seed)
                runs.append({
                    "run_id": run_id, "dataset": "eve", "dataset_params": json.dumps(data),
                    "optimizer": optimizer, "hyperparameters": json.dumps(hp),
                    "backend": backend, "device": "cpu", "feed": feed, "xla": xla,
                    "dtype": "float64", "init": "zeros", "seed": seed, "repeat": 0,
                    "status": "converged" if ok else "max_iter", "target_reached": ok,
                    "suboptimality": 1e-9 if ok else 0.1,
                    "iterations": iterations, "seconds": seconds, "setup_seconds": 0.5,
                    "seconds_per_iteration": seconds / iterations,
                    "read_pass_seconds": 0.004, "stop_tol": 1e-8, "env_host": "h",
                })
                its = np.arange(iterations + 1)
                sub = 10.0 ** (-9 * its / iterations) if ok else 10.0 ** (-its / iterations)
                traces.append(pd.DataFrame({"run_id": run_id, "iteration": its,
                                            "seconds": its * seconds / iterations,
                                            "loss": 1 + sub, "suboptimality": sub,
                                            "grad_norm": sub}))
    runs.append({**runs[0], "run_id": "skip", "device": "gpu", "status": "skipped",
                 "iterations": np.nan, "seconds": np.nan})
    return pd.DataFrame(runs), pd.concat(traces, ignore_index=True)


@pytest.fixture(scope="module")
def tables():
    return make_tables()


ENGINES = [("numpy", None, None), ("tensorflow", "fused", None), ("tensorflow", "feed", None),
           ("tensorflow", "fused", True), ("tensorflow", "tf1", None)]


@pytest.fixture(scope="module")
def default_size_tables():
    """The default study's size: ten optimizer families, each on two engines, on seven data
    sets."""
    families = ["gd", "momentum", "nesterov", "adam", "rmsprop", "adagrad", "adadelta", "cgls",
                "lbfgs", "scipy-lsqr"]
    configs = [(family, {}, *ENGINES[(k + j) % len(ENGINES)], 0.001 * (1 + k + j), 20 + 40 * k)
               for k, family in enumerate(families) for j in range(2)]
    return make_tables(configs, [{"rows": 100 * (k + 1)} for k in range(7)])


def test_convergence_figure_has_a_panel_per_data_set_and_a_line_per_optimizer(tables):
    runs, traces = tables
    for x, scale in (("seconds", "log"), ("iterations", "symlog")):
        fig = plots.figure_convergence(runs, traces, x=x)
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in panels] == ["eve(rows=100)",
                                                     "eve(rows=100,standardize=True)"]
        for ax in panels:  # each family once, at its best configuration, in its colour
            lines = {line.get_label(): line for line in ax.get_lines()}
            assert sorted(lines) == ["adadelta tf1/cpu", "gd numpy/cpu",
                                    "lbfgs tf-fused+xla/cpu"]
            for label, line in lines.items():
                family, engine = label.split()
                assert line.get_color() == style.color(family)
                assert line.get_linestyle() == plt.Line2D([], [], ls=style.line_style(
                    engine)).get_linestyle()
            assert ax.get_yscale() == "log" and ax.get_xscale() == scale
            failed = [c for c in ax.collections if c.get_offsets().shape[0] == 3
                      and c.get_paths()]
            assert [c.get_facecolor()[0].tolist() for c in failed] == [
                list(to_rgba(style.color("adadelta")))], "the 3 Adadelta runs, no other"
            assert x.split("s")[0] in ax.get_xlabel()
        if x == "seconds":  # setup is an offset: no line starts before 0.5 s
            assert min(line.get_xdata()[~np.isnan(line.get_ydata())].min()
                       for ax in panels for line in ax.get_lines()) >= 0.5
        families, engines = ([t.get_text() for t in legend.get_texts()]
                             for legend in fig.legends)
        assert families == ["lbfgs", "gd", "adadelta"]  # those that reached the target first
        assert engines == ["numpy", "tf1", "tf-fused+xla", "run did not converge"]
        assert len({ax.get_ylim() for ax in panels}) == 1  # one y range, as sharey draws it
        fig.canvas.draw()
        labelled = [any(t.get_text() for t in ax.get_yticklabels()) for ax in panels]
        assert labelled == [True, False]
        assert covered_by_legends(fig) == []
        plt.close(fig)


@pytest.mark.slow
def test_convergence_at_the_default_study_size_reads_at_full_size(default_size_tables):
    """Ten families on seven data sets: every family drawn on every panel, in a figure that
    fits a screen at 100% (it was 3005 px tall for ten families on four data sets)."""
    runs, traces = default_size_tables
    for x in ("seconds", "iterations"):
        fig = plots.figure_convergence(runs, traces, x=x)
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert len(panels) == 7
        assert all(len(ax.get_lines()) == 10 for ax in panels)
        assert len(fig.legends[0].get_texts()) == 10
        fig.set_dpi(PNG_DPI)
        drawn = fig.get_tightbbox(fig.canvas.get_renderer())
        assert drawn.width * PNG_DPI <= 1600 and drawn.height * PNG_DPI <= 1300
        assert covered_by_legends(fig) == []
        plt.close(fig)


def test_a_family_not_run_on_a_data_set_is_absent_there_and_the_panels_start_under_the_legends(
        tables):
    runs, traces = tables
    standardized = runs["dataset_params"].str.contains("standardize")
    dropped = runs["run_id"][standardized & (runs["optimizer"] == "gd")]
    runs, traces = runs[~runs["run_id"].isin(dropped)], traces[~traces["run_id"].isin(dropped)]
    fig = plots.figure_convergence(runs, traces, x="seconds")
    raw, standardized = fig.axes
    assert [line.get_label().split()[0] for line in standardized.get_lines()] == ["lbfgs",
                                                                                 "adadelta"]
    assert len(raw.get_lines()) == 3
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    families, engines = (legend.get_window_extent(renderer) for legend in fig.legends)
    panels_top = max(ax.get_tightbbox(renderer).y1 for ax in fig.axes)
    assert fig._suptitle.get_window_extent(renderer).y0 > families.y1  # no overlap
    assert families.y0 > engines.y1
    gap = (engines.y0 - panels_top) / fig.dpi
    assert 0 < gap < 0.35, f"{gap:.2f} in between the legends and the panels' titles"
    plt.close(fig)


def test_median_band_matches_numpy_where_runs_start_late_and_keeps_diverged_runs():
    rng = np.random.default_rng(0)
    for _ in range(100):
        curves = [rng.standard_normal(30) for _ in range(rng.integers(1, 7))]
        for curve in curves:
            curve[:rng.integers(0, 31)] = np.nan  # before a run's first point
        stack = np.vstack(curves)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # columns with no run yet: NaN
            expected = (np.nanmedian(stack, axis=0), np.nanpercentile(stack, 25, axis=0),
                        np.nanpercentile(stack, 75, axis=0))
        # interpolating between two order statistics of normal draws (|x| < 5) rounds by a few
        # eps of them, absolutely: a result near 0 has no relative accuracy to offer
        for got, want in zip(plots._median_band(curves), expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-14, equal_nan=True)
    # one of three seeds diverged (inf from then on): the median is the middle run, not NaN
    median, q1, q3 = plots._median_band([np.array([1.0, 1.0]), np.array([2.0, 2.0]),
                                         np.array([3.0, np.inf])])
    assert list(median) == [2.0, 2.0] and list(q1) == [1.5, 1.5] and list(q3) == [2.5, np.inf]
    median, _, _ = plots._median_band([np.array([np.inf]), np.array([np.inf])])
    assert median[0] == np.inf


def test_one_y_range_ignores_empty_panels():
    fig, axes = plt.subplots(1, 2, squeeze=False)
    axes[0, 0].plot([1, 2], [1e-8, 1e-3])
    for ax in axes.flat:
        ax.set_yscale("log")
    plots.one_y_range(axes)
    low, high = axes[0, 1].get_ylim()
    assert axes[0, 0].get_ylim() == (low, high) and high < 1e-2 and low < 1e-8
    plt.close(fig)


@pytest.mark.parametrize("span, labels", [
    ((1e-3, 1e2), [f"$\\mathdefault{{10^{{{k}}}}}$" for k in range(-3, 3)]),
    ((0.005, 0.2), ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2"]),
    ((400, 2500), ["500", "1000", "2000"]),  # not 1e+03
    ((0.0137, 0.0155), ["0.014", "0.015"]),  # too short for two of 1, 2, 5 x 10^k
    ((1.000001, 1.000003), ["1.000001", "1.000002", "1.000003"]),
])
def test_log_axis_labels_stay_legible_at_any_span(span, labels):
    from study.figures import log_axis

    fig, ax = plt.subplots()
    ax.plot(span, [1, 2])
    log_axis(ax.xaxis)
    ax.set_xlim(*span)
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.get_xticklabels()
             if t.get_text() and span[0] <= t.get_position()[0] <= span[1]]
    assert shown == labels
    assert not len(ax.xaxis.get_minorticklocs())  # invisible in this style; costly to place
    plt.close(fig)


def test_time_to_target_marks_failures_and_lists_what_never_ran(tables):
    runs, _ = tables
    fig = plots.figure_time_to_target(runs)
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert len(axes) == 2
    ax = axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert any(label.startswith("adadelta") and "(0/3)" in label for label in labels)
    assert not any("gpu" in label for label in labels)  # skipped: not a bar
    assert ax.get_xscale() == "log" and "seconds" in axes[-1].get_xlabel()
    assert "max_iter 3" in [t.get_text().strip() for t in ax.texts]
    assert not [p for p in ax.patches if p.get_hatch()]
    assert any("skipped" in t.get_text() and "numpy/gpu" in t.get_text() for t in fig.texts)
    for ax in axes:  # the axis ends near the longest bar (it ran 30 times past it)
        ends = [p.get_x() + p.get_width() for p in ax.patches]
        assert max(ends) < ax.get_xlim()[1] < 2 * max(ends)
    fig.canvas.draw()
    failures = [t for t in ax.texts if t.get_text().strip() == "max_iter 3"]
    assert failures[0].get_window_extent().x0 >= ax.bbox.x1 - 1  # named beside the panel
    plt.close(fig)


def test_cost_tradeoff_is_log_log_with_equal_time_lines(tables):
    runs, _ = tables
    fig = plots.figure_cost_tradeoff(runs)
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert any(t.get_text().endswith(" s") for t in ax.texts)  # iso-time lines are labelled
    offsets = np.vstack([c.get_offsets() for c in ax.collections if len(c.get_offsets())])
    assert len(offsets) == 3  # 3 configurations on this data set's panel
    plt.close(fig)


def _legend_entries(fig) -> list[int]:
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    return [len(legend.get_texts()) for legend in legends]


def _plot_share(fig) -> float:
    """The panels' area over the whole drawn figure (legends and captions included)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    whole = fig.get_tightbbox(renderer)
    panels = sum(ax.get_window_extent(renderer).width * ax.get_window_extent(renderer).height
                 for ax in fig.axes if ax.get_visible()) / fig.dpi ** 2
    return panels / (whole.width * whole.height)


def _covers(box, artist, renderer) -> bool:
    """Whether `artist`, once drawn, has a point, segment, area or letter inside `box`."""
    from matplotlib.collections import Collection, PathCollection, PolyCollection
    from matplotlib.lines import Line2D
    from matplotlib.path import Path

    def any_point(xy):
        return any(box.contains(x, y) for x, y in xy if np.isfinite([x, y]).all())

    if isinstance(artist, Line2D):
        xy = artist.get_transform().transform(np.asarray(artist.get_xydata(), float))
        if artist.get_linestyle() in ("None", "none", "", " "):
            return any_point(xy)
        finite = np.isfinite(xy).all(axis=1)
        pieces = [piece[np.isfinite(piece).all(axis=1)]
                  for piece in np.split(xy, np.flatnonzero(~finite))]
        return any_point(xy) or any(Path(piece).intersects_bbox(box, filled=False)
                                    for piece in pieces if len(piece) > 1)
    if isinstance(artist, PathCollection):  # markers: where they are placed
        return any_point(artist.get_offset_transform().transform(artist.get_offsets()))
    if isinstance(artist, Collection):  # bands (filled) and error bars (lines)
        transform = artist.get_transform()
        return any(transform.transform_path(path).intersects_bbox(
            box, filled=isinstance(artist, PolyCollection))
            for path in artist.get_paths() if len(path.vertices))
    extent = artist.get_window_extent(renderer)  # bars and other patches, texts
    return bool(np.isfinite(extent.bounds).all() and extent.width * extent.height > 0
                and box.overlaps(extent))


def covered_by_legends(fig) -> list[str]:
    """What the legends of `fig` cover, in display coordinates once drawn: each legend's box
    against every visible panel's lines (points and the segments between them), bars and other
    patches, markers, bands and error bars, and texts written on the data; what a panel clips
    counts only inside the panel."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()] + list(fig.legends)
    found = []
    for legend in legends:
        whole = legend.get_window_extent(renderer)
        name = "legend " + "/".join(t.get_text() for t in legend.get_texts()[:2])
        for ax in (ax for ax in fig.axes if ax.get_visible()):
            clipped = Bbox.intersection(whole, ax.bbox)  # None when apart
            drawn = [*ax.get_lines(), *ax.patches, *ax.collections,
                     *(t for t in ax.texts if t.get_text())]
            for artist in (a for a in drawn if a.get_visible()):
                box = clipped if artist.get_clip_on() else whole
                if box is not None and _covers(box, artist, renderer):
                    label = artist.get_label() if not str(artist.get_label()).startswith("_") \
                        else ""
                    found.append(f"{name} covers {type(artist).__name__} '{label}' in panel "
                                 f"'{ax.get_title() or ax.get_ylabel()}'")
    return found


def test_the_legend_check_finds_a_legend_drawn_over_data():
    fig, (lines, bars) = plt.subplots(1, 2)
    lines.plot([0, 1], [0, 1], label="diagonal")  # two points, the middle under the legend
    lines.legend(loc="center")
    bars.bar([0, 1, 2], [3, 3, 3], label="bars")
    bars.legend(loc="upper center")
    found = covered_by_legends(fig)
    assert any("Line2D 'diagonal'" in f for f in found)
    assert any("Rectangle" in f for f in found)
    lines.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))  # outside the panel
    bars.set_ylim(0, 6)  # room above the bars
    assert covered_by_legends(fig) == []
    plt.close(fig)


@pytest.mark.slow
@pytest.mark.parametrize("size", ["tables", "default_size_tables"])
def test_every_figure_is_legible_and_no_legend_covers_data(size, request):
    runs, traces = request.getfixturevalue(size)
    made = {name: fig for name, make in plots.REGRESSION_FIGURES.items()
            if (fig := make(runs, traces)) is not None}  # None: nothing to draw (conditioning)
    made.update({f"feedmode {f.__name__}": f(feedmode_table())
                 for f in (feed_figures.figure_headline, feed_figures.figure_feedmode)})
    for name, fig in made.items():
        assert all(n <= 12 for n in _legend_entries(fig)), name
        assert _plot_share(fig) >= 0.5, name
        width, _ = fig.get_size_inches() * PNG_DPI  # pixels at the saved dpi
        assert width <= 1600, name
        assert covered_by_legends(fig) == [], name
        plt.close(fig)


def test_the_headline_shows_time_to_target_beside_time_per_iteration(tables):
    runs, _ = tables
    fig = plots.figure_headline(runs, 1e-8)
    left, right = fig.axes
    labels = [t.get_text() for t in left.get_yticklabels()]
    assert labels == ["adadelta(learning_rate=1.0)  ·  tf1/cpu", "gd(step=1/L)  ·  numpy/cpu",
                      "lbfgs  ·  tf-fused+xla/cpu"]
    assert "1e-08" in left.get_xlabel() and "per iteration" in right.get_xlabel()
    assert any("not reached" in t.get_text() for t in left.texts)  # adadelta
    assert fig._suptitle.get_text().startswith("Q1, eve(rows=100)")
    plt.close(fig)


def test_one_headline_label_never_covers_two_step_rules():
    """GD's `diag` step (the original program's, NumPy only) reaches the target where every
    engine's `1/L` does not: the NumPy row beside JAX's is GD with 1/L, as JAX's is, and `diag`
    is a row apart that says it ran here only (it was 'gd · numpy/cpu', reached, above 'gd ·
    jax-fused/cpu', not reached)."""
    configs = [("gd", {"step": "diag"}, "numpy", None, None, 0.001, 50),
               ("gd", {"step": "1/L"}, "numpy", None, None, 0.001, 500),
               ("gd", {"step": "1/L"}, "jax", "fused", None, 0.002, 500),
               ("lbfgs", {}, "numpy", None, None, 0.01, 8),
               ("lbfgs", {}, "jax", "fused", None, 0.02, 8)]
    runs, _ = make_tables(configs, [{"rows": 100}])
    runs.loc[runs["hyperparameters"].str.contains("1/L"), ["status", "target_reached"]] = \
        ["timeout", False]
    table = headline.best_per_family_and_engine(runs, "eve(rows=100)")
    labelled = label_runs(runs[runs["status"] != "skipped"])
    for row in table.itertuples():  # every row: one algorithm, and its label names it
        behind = labelled[labelled["config"] == row.config]
        assert behind["hyperparameters"].nunique() == 1, row
        assert headline.headline_label(row).startswith(behind["algorithm"].iloc[0] + "  ·  ")
    rows = [(headline.headline_label(r), r.apart) for r in table.itertuples()]
    assert rows == [("gd(step=1/L)  ·  numpy/cpu", False),
                    ("gd(step=1/L)  ·  jax-fused/cpu", False),
                    ("lbfgs  ·  numpy/cpu", False), ("lbfgs  ·  jax-fused/cpu", False),
                    ("gd(step=diag)  ·  numpy/cpu  (only here)", True)]
    fig = plots.figure_headline(runs, 1e-8)
    shown = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert shown == [label for label, _ in rows]
    assert "run on some engines only" in fig._suptitle.get_text()
    plt.close(fig)


def test_performance_profile_counts_failures_as_infinite(tables):
    runs, _ = tables
    taus = np.array([1.0, 2.0, 10.0, 1e6])
    profile = plots.performance_profile(runs[runs["status"] != "skipped"], taus)
    share = profile.set_index(["config", "tau"])["share"]
    assert share[("adadelta(learning_rate=1.0) tf1/cpu float64", 1e6)] == 0.0
    assert share[("gd(step=1/L) numpy/cpu float64", 1.0)] == 0.0  # 1 s vs L-BFGS 0.24 s
    assert share[("lbfgs tf-fused+xla/cpu float64", 1.0)] == 1.0
    assert ((profile["low"] <= profile["share"]) & (profile["share"] <= profile["high"])).all()
    fig = plots.figure_performance_profile(runs)
    assert fig.axes[0].get_xscale() == "log" and len(fig.axes[0].get_lines()) == 3
    plt.close(fig)


def test_feed_mode_figure_has_a_read_pass_line(tables):
    runs, _ = tables
    fig = plots.figure_feed_modes(runs)
    ax = fig.axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["numpy", "tf1"]  # GD and Adadelta only, in the fixed order
    assert any(plots.READ_PASS_LABEL in line.get_label() for line in ax.get_lines())
    assert ax.get_yscale() == "log"
    plt.close(fig)


def test_report_sentences_match_the_table(tables):
    runs, _ = tables
    findings = report.regression_findings(runs)
    fastest = [f for f in findings if f.startswith("Fastest")]
    assert len(fastest) == 2
    # L-BFGS: 8 iterations at 0.03 s -> 0.24, 0.264, 0.288 s; geometric mean 0.263 s
    assert fastest[0].startswith("Fastest to 1e-08 on eve(rows=100): lbfgs tf-fused+xla/cpu "
                                 "float64, 263 ms [210 ms, 330 ms] (typical over 3 instances")
    assert "in 8 iterations" in fastest[0]
    assert any("No Adadelta configuration on eve(rows=100) reached 1e-08" in f and
               "max_iter=3" in f for f in findings)
    assert any("Best GD on eve(rows=100): gd(step=1/L) numpy/cpu float64 needed 100 "
               "iterations (1.1 s)" in f for f in findings)


def test_the_report_says_why_each_run_stalled(tables):
    runs, _ = tables
    assert report.stalled_table(runs).empty
    message = ("no improvement over the best loss (reached at iteration 63) by more than rel_tol "
               "1e-12 for 50 iterations at iteration 113; the target (suboptimality <= tol 1e-08) "
               "was not reached: 1.65")
    stalled = [{**runs.iloc[0], "run_id": "n1", "optimizer": "nesterov", "seed": 1,
                "hyperparameters": json.dumps({"step": "textbook"}), "status": "stalled",
                "message": message, "iterations": 113, "suboptimality": 1.65,
                "momentum_beta": 0.995, "momentum_source": "textbook: mu 0.89 and L 1.4e+05"},
               {**runs.iloc[0], "run_id": "g1", "status": "stalled", "iterations": 7,
                "message": "the RMSE repeated exactly at iteration 7", "suboptimality": 0.5},
               {**runs.iloc[0], "run_id": "g2", "seed": 2, "status": "stalled", "iterations": 9,
                "message": "suboptimality reached tol 1e-08 at iteration 9, but the float64 "
                           "suboptimality of the final iterate is 2e-08, above tol 1e-08",
                "suboptimality": 2e-8}]
    table = report.stalled_table(pd.concat([runs, pd.DataFrame(stalled)], ignore_index=True))
    assert table[["seed", "iteration", "suboptimality"]].values.tolist() == [
        [0, 7, "0.5"], [2, 9, "2e-08"], [1, 113, "1.65"]]
    assert table["rule that fired"].tolist() == [
        "the RMSE repeated exactly",
        "suboptimality reached tol 1e-08, but the float64 suboptimality of the final iterate is "
        "2e-08, above tol 1e-08",
        "no improvement over the best loss (reached at iteration 63) by more than rel_tol 1e-12 "
        "for 50 iterations"]
    assert table["momentum and its source"].tolist() == [
        "", "", "beta 0.995, textbook: mu 0.89 and L 1.4e+05"]


def build_report(root, tables):
    """results/, figures/ and reports/ under `root` from the tables, as `make reproduce` lays
    them out; returns (report.md, report.html)."""
    from study.results import load

    runs, traces = tables
    results = root / "results" / "regression"
    results.mkdir(parents=True)
    runs.assign(kind="regression").to_parquet(results / "runs.parquet")
    traces.to_parquet(results / "traces.parquet")
    plots.draw(load(results), root / "figures" / "regression")
    made = build.build_blocks(root / "results", root / "figures", ["regression"])
    return blocks.write_report(made, root / "reports", made[0].content)  # as `report` does


@pytest.mark.slow
def test_report_renders_markdown_and_self_contained_html(tmp_path, tables):
    md, page = build_report(tmp_path, tables)
    text = md.read_text()
    assert "](../figures/regression/convergence_time.png)" in text
    assert "| data set | configuration |" in text
    assert "data:image/png;base64," in page.read_text()
    assert "src=\"../" not in page.read_text()


def feedmode_table():
    rows = []
    for n, scale in ((500, 1.0), (2000, 4.0)):
        for dtype in ("float64", "float32"):
            for mode, grappler, first, steady, graph in (
                    ("constant", "default", 2.0, 0.01, 8e6), ("constant", "off", 0.5, 0.2, 8e6),
                    ("numpy", "default", 2.1, 0.01, 8e6), ("placeholder", "default", 0.4, 0.2,
                                                           2e3),
                    ("function-arg", "default", 0.6, 0.2, None)):
                rows.append({"mode": mode, "grappler": grappler, "dtype": dtype, "n": n,
                             "status": "ok", "first_call_seconds": first * scale,
                             "steady_median_seconds": steady * scale,
                             "graphdef_bytes": graph * scale if graph else None,
                             "env_host": "h"})
    rows.append({**rows[0], "mode": "variable", "n": 2000, "status": "timeout"})
    return pd.DataFrame(rows)


def test_feedmode_figure_reads_back_the_table():
    runs = feedmode_table()
    swept = runs[runs["mode"].isin(["constant", "placeholder"]) & (runs["n"] == 500)]
    runs = pd.concat([runs, swept.assign(n=1000), swept.assign(n=4000)], ignore_index=True)
    fig = feed_figures.figure_feedmode(runs)
    first, graph, ablation, sweep = fig.axes[:4]
    assert "N = 2000" in first.get_title()  # the size where most modes ran
    assert first.get_xscale() == "log" and graph.get_xscale() == "log"
    assert {t.get_text() for t in first.get_yticklabels()} == {
        "constant", "numpy", "placeholder", "function-arg"}
    widths = sorted(round(p.get_width(), 6) for p in graph.patches if p.get_width() > 0)
    assert widths == [0.008, 0.008, 32.0, 32.0, 32.0, 32.0]  # MB: placeholder tiny, constants big
    assert ablation.get_yscale() == "log"
    assert {t.get_text() for t in ablation.get_legend().get_texts()} == {"default", "off"}
    assert sweep.get_xscale() == sweep.get_yscale() == "log" and len(sweep.get_lines()) >= 3
    fig.canvas.draw()  # a tick at every N swept, in one plain format
    assert list(sweep.get_xticks()) == [500, 1000, 2000, 4000]
    assert [t.get_text() for t in sweep.get_xticklabels()] == ["500", "1000", "2000", "4000"]
    assert any("variable float64 N=2000 (timeout)" in t.get_text() for t in fig.texts)
    plt.close(fig)


def test_feedmode_answer_matches_the_table():
    lines = feed_report.original_feedmode_answer(feedmode_table())
    assert lines[0].startswith("N = 2000, float32: tf.constant's first call took 8 s and later "
                               "calls 40 ms; the placeholder's first call 1.6 s and later calls "
                               "800 ms (medians over repeats).")
    # one run a mode: a ratio, and no verdict
    assert "first-call time ratio 5x (1 common instance): 1 instance without repeats on both " \
        "sides: too few for an interval" in lines[0] and "no verdict" in lines[0]
    assert "faster" not in lines[0] and "slower" not in lines[0]
    assert "32 MB GraphDef against 0.008 MB" in lines[1]
    assert "all graph optimisations off, the constant's first call took 2 s" in lines[2]
    assert any("grew from 2 s at N = 500 to 8 s at N = 2000" in line for line in lines)
    assert lines[-1].startswith("Did not finish: variable float64 N=2000")


def test_feedmode_comparisons_are_paired_over_repeats_and_say_when_noise_decides():
    base = feedmode_table()
    rng = np.random.default_rng(0)
    rows = []
    for repeat in range(3):
        jitter = base.assign(repeat=repeat, seed=0, device="cpu")
        jitter["first_call_seconds"] *= 1 + 0.01 * rng.standard_normal(len(jitter))
        # later calls: constant 20x faster at float32, indistinguishable at float64
        steady = np.where(jitter["dtype"] == "float64", 0.2 * (1 + 0.3 * rng.standard_normal(
            len(jitter))), jitter["steady_median_seconds"])
        rows.append(jitter.assign(steady_median_seconds=steady))
    lines = feed_report.original_feedmode_answer(pd.concat(rows, ignore_index=True))
    f32 = next(line for line in lines if line.startswith("N = 2000, float32"))
    f64 = next(line for line in lines if line.startswith("N = 2000, float64"))
    assert "First call: constant took " in f32 and "x the first-call time of placeholder" in f32
    assert "later calls: constant took 0.05" in f32 and "20x less" in f32
    assert "later calls: constant and placeholder: not distinguishable" in f64


def test_every_optimizer_has_a_colour_of_its_own():
    from optimizers import OPTIMIZERS
    from study.regression import style

    families = [*OPTIMIZERS, "adadelta [original rule]"]
    colours = {family: style.color(family) for family in families}
    assert [f for f, c in colours.items() if c == style.OTHER_COLOR] == []
    assert len(set(colours.values())) == len(families)  # no two families drawn alike
    assert set(style.FAMILY_COLORS) == set(families)  # no key that names no optimizer


def test_feedmode_headline_axis_ends_near_the_bars_and_names_graph_sizes_beside_them():
    fig = feed_figures.figure_headline(feedmode_table())
    fig.canvas.draw()
    for ax in fig.axes:
        ends = [p.get_x() + p.get_width() for p in ax.patches if np.isfinite(p.get_width())]
        assert max(ends) < ax.get_xlim()[1] < 2 * max(ends)  # it ran 40 times past them
        sizes = [t for t in ax.texts if "GraphDef" in t.get_text()]
        assert len(sizes) == 3 and all(t.get_window_extent().x0 >= ax.bbox.x1 - 1
                                       for t in sizes)
    assert covered_by_legends(fig) == []
    plt.close(fig)


def overlapping_tick_labels(fig) -> list[tuple[str, str]]:
    """Pairs of neighbouring x tick labels of one panel that overlap once drawn: level ones by
    their boxes, slanted ones (parallel lines of text) by the distance between their lines
    against the text's height."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        ticks = [(ax.transData.transform((x, 0))[0], t)
                 for x, t in zip(ax.get_xticks(), ax.get_xticklabels(), strict=False)
                 if t.get_text() and t.get_visible()]
        for (x_a, a), (x_b, b) in zip(ticks, ticks[1:], strict=False):
            angle = np.radians(a.get_rotation())
            if np.isclose(np.sin(angle), 0):
                hit = a.get_window_extent(renderer).overlaps(b.get_window_extent(renderer))
            else:
                hit = abs(x_b - x_a) * abs(np.sin(angle)) < renderer.points_to_pixels(
                    a.get_fontsize())
            if hit:
                found.append((a.get_text(), b.get_text()))
    return found


def test_the_feed_mode_figure_names_every_engine_legibly():
    """make reproduce's regression study runs 13 engines on one CPU: their names under the
    bars overlapped (tf-fused+xla over jax-feed, ...)."""
    every = [("numpy", None, None), ("tensorflow", "tf1", None), ("tensorflow", "feed", None),
             ("tensorflow", "resident", None), ("tensorflow", "fused", None),
             ("tensorflow", "fused", True), ("jax", "feed", None), ("jax", "resident", None),
             ("jax", "fused", None), ("torch", "resident", None), ("torch", "feed", None),
             ("torch", "compiled", None)]
    runs, _ = make_tables([("gd", {}, *engine, 0.001 * (k + 1), 50)
                           for k, engine in enumerate(every)], [{"rows": 100000}])
    fig = plots.figure_feed_modes(runs)
    assert len(fig.axes[0].get_xticklabels()) == len(every)
    assert overlapping_tick_labels(fig) == []
    plt.close(fig)


def test_no_instance_every_configuration_ran_draws_nothing_and_says_so(tmp_path, capsys):
    """Configurations that share no seed cannot be drawn side by side: the figures say so in
    one line and leave no stale figure behind (they ended in a pandas traceback)."""
    from types import SimpleNamespace

    runs, traces = make_tables()
    runs.loc[runs["optimizer"] == "lbfgs", "seed"] += 10
    (tmp_path / "headline.png").write_bytes(b"older results")
    written = plots.draw(SimpleNamespace(runs=runs, table=lambda name: traces), tmp_path)
    assert written == [] and not (tmp_path / "headline.png").exists()
    assert "no data set has an instance (seed) that each of its configurations ran" in \
        capsys.readouterr().err


def test_the_machine_sentence_names_each_distribution_once():
    """keras is recorded by two frameworks (TensorFlow's and Keras's own entry): one column, so
    the sentence names its version once."""
    frame = pd.DataFrame({"env_keras": ["3.15.1"], "env_tensorflow": ["2.21.0"],
                          "env_numpy": ["2.4.6"]})
    sentence = build.machine_sentence(frame)
    assert sentence.lower().count("keras 3.15.1") == 1 and "TensorFlow 2.21.0" in sentence
