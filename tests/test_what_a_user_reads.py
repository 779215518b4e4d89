"""What a user reads is true (issue 36): a report on your own CSV asks your question and names
your data, answers measured on a busy machine give no verdict, a file data set's seeds are
repeats of one instance, `study compare` works on a folder of every study, and nothing runs
without a word (regress's time budget, a sweep's log lines, a report without figures)."""

import json

import numpy as np
import pandas as pd
import pytest
from test_compare import feed_runs, regression_runs, slowed, write
from test_plots_report import build_report, make_tables

from study import compare
from study.__main__ import build_parser, main
from study.conclusions import BUSY, conclusions
from study.regression.labels import with_instances
from study.results import load

HOUSES = {"features": ["area", "rooms"], "labels": ["price"]}


def your_csv(runs: pd.DataFrame, path) -> pd.DataFrame:
    """make_tables' runs as if measured on your own CSV (one data set, zero initialisation)."""
    params = json.dumps({"path": str(path), **HOUSES})
    return runs.assign(dataset="tabular", dataset_params=params)


def test_a_report_on_your_own_csv_asks_your_question_and_says_what_won(tmp_path):
    runs, traces = make_tables(data_sets=({"rows": 100},))
    md, page = build_report(tmp_path, (your_csv(runs, tmp_path / "houses.csv"), traces))
    text, html = md.read_text(), page.read_text()
    title = text.splitlines()[0]
    assert title == "# Convergence study report: houses.csv: price from area, rooms"
    assert "<title>Convergence study report: houses.csv" in html
    answers = text[text.index("## Answers"):text.index("## On houses.csv")]
    assert "On houses.csv: price from area, rooms: which optimizer and engine reach 1e-08 " \
        "first?" in answers
    assert "Fastest to 1e-08 on houses:" in answers and "tabular(" not in text  # by its stem
    assert f"Files by their short names: houses is {tmp_path / 'houses.csv'}." in text
    assert "lbfgs tf-fused+xla/cpu float64" in answers  # what won on this data
    for words in ("Q1", "NumPy really", "3x faster"):
        assert words not in text, words
    # the three seeds of one file from zeros are repeats of one instance, with their interval
    assert "typical over 3 runs, repeats of 1 instance, 95% interval: Welch t from repeats, " \
        "this instance only" in answers
    assert "too few" not in answers
    assert "the seed changes neither the data" in text


def test_the_seeds_of_a_file_from_zeros_are_repeats_and_other_seeds_instances(tmp_path):
    runs, _ = make_tables(data_sets=({"rows": 100},))
    eve = with_instances(runs)
    assert (eve["instance_seed"] == eve["seed"]).all()  # eve's seed draws its rows
    csv = with_instances(your_csv(runs, tmp_path / "houses.csv"))
    assert (csv["instance_seed"] == -1).all()
    random_start = with_instances(your_csv(runs, tmp_path / "houses.csv").assign(init="normal"))
    assert (random_start["instance_seed"] == random_start["seed"]).all()


def test_answers_measured_on_a_busy_machine_give_no_verdict(tmp_path):
    runs = regression_runs()
    quiet = conclusions(load(write(tmp_path, "quiet", runs.assign(noisy=False))))
    assert any(c.firm for c in quiet) and not [c for c in quiet if BUSY in c.sentence]
    noisy = np.arange(len(runs)) % 4 != 0  # three runs in four flagged
    found = conclusions(load(write(tmp_path, "busy", runs.assign(noisy=noisy))))
    compared = [c for c in found if c.comparison is not None]
    assert compared and all(BUSY in c.sentence and not c.firm for c in compared)
    assert all(c.claim == BUSY for c in compared)
    assert not [c for c in found if c.sentence.startswith("Fastest")]  # no winner named
    for c in compared:
        assert " less (" not in c.sentence and "not distinguishable" not in c.sentence


def train_runs() -> pd.DataFrame:
    """A train study's rows: one model on one data set, Adam and L-BFGS on two frameworks,
    six seeds; L-BFGS on JAX never reaches the target."""
    rows = []
    rng = np.random.default_rng(2)
    for optimizer, backend, seconds in (("keras:Adam", "tensorflow", 2.0), ("keras:Adam", "jax",
                                                                          1.5),
                                        ("lbfgs", "tensorflow", 1.0), ("lbfgs", "jax", None)):
        for seed in range(6):
            took = None if seconds is None else seconds * (1 + 0.02 * rng.standard_normal())
            rows.append({
                "run_id": f"{optimizer}-{backend}-{seed}", "model": "mlp", "data": "houses.npz",
                "data_params": "{}", "loss": "mse", "metric": "mae", "optimizer": optimizer,
                "hyperparameters": "{}", "backend": backend, "batch_size": 0, "seed": seed,
                "loop": "loop", "target_metric": "val_loss", "target_mode": "min",
                "target_how": "given", "target_value": 0.1, "repeat": 0,
                "status": "reached" if took else "timeout", "seconds_to_target": took,
                "steps_to_target": 40 if took else None, "seconds_per_step": 0.01,
                "setup_seconds": 0.5, "eval_seconds": 0.1})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("kind", ["regression", "logistic", "feedmode", "train"])
def test_compare_works_on_a_folder_of_every_study(tmp_path, capsys, kind):
    runs = {"regression": regression_runs, "feedmode": feed_runs, "train": train_runs,
            "logistic": lambda: regression_runs().assign(dataset="synthetic-logistic")}[kind]()
    folder_kind = "regression" if kind == "logistic" else kind
    slow = runs["optimizer" if "optimizer" in runs else "mode"].isin(["lbfgs", "placeholder"])
    a = write(tmp_path, "a", runs, kind=folder_kind)
    if kind == "train":
        time = runs["seconds_to_target"]
        b = write(tmp_path, "b", runs.assign(seconds_to_target=time.where(~slow, time * 10)),
                  kind=folder_kind)
    else:
        b = write(tmp_path, "b", slowed(runs, slow, 10.0), kind=folder_kind)
    assert main(["compare", str(a), str(b)]) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert f"({folder_kind} study)" in text and "Conclusions, derived in A and in B:" in text
    result = compare.compare_folders(a, b)
    moved = [c for c in result.changes if c.distinguishable]
    assert moved and all(c.comparison.ratio > 5 for c in moved)
    if kind == "train":  # the slowed L-BFGS on TensorFlow; on JAX it never reached the target
        assert [c.config for c in moved] == ["mlp on houses: lbfgs on tensorflow (batch full)"]
        assert {c.quantity for c in result.changes if "lbfgs on jax" in c.config} == {
            "time per step (target reached in neither)"}
        assert [id for id, _, _, _ in result.conclusions] == ["train.fastest.mlp on houses"]


def test_regress_has_a_time_budget_by_default_stated_in_its_help(capsys):
    parser = build_parser("regress")
    assert parser.parse_args(["regress"]).time_budget == 60.0
    assert parser.parse_args(["regress", "--time-budget", "off"]).time_budget is None
    with pytest.raises(SystemExit):
        parser.parse_args(["regress", "--help"])
    assert "(default 60; 'off' for none" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("value, words", [("-1", "time_budget must be a finite number > 0"),
                                          ("0", "time_budget must be"), ("inf", "finite"),
                                          ("abc", "invalid budget value")])
def test_a_bad_time_budget_is_one_line(tmp_path, capsys, value, words):
    try:
        code = main(["regress", "--rows", "300", "--time-budget", value,
                     "--out", str(tmp_path / "r.parquet")])
    except SystemExit as exc:  # a usage error: argparse's exit, status 2
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.iterdir())


def test_a_sweep_without_a_terminal_logs_a_line_per_run(tmp_path, capsys):
    config = tmp_path / "c.toml"
    config.write_text('name = "c"\n[stopping]\nmax_iter = 50\n[[datasets]]\nname = "synthetic"'
                      '\nn = 200\n[[optimizers]]\nname = "gd"\nstep = ["1/L", "diag"]\n'
                      '[[backends]]\nname = "numpy"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "out"),
                 "--no-adaptive"]) == 0  # no --quiet; its instances fixed
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith(("[1/2] ", "[2/2] ")) for line in lines) == 2, lines


def test_a_report_without_its_figures_folder_says_so(results, capsys):
    missing = results / "no-figures"
    assert main(["report", "--results", str(results / "results"), "--studies", "regression",
                 "--figures", str(missing), "--out", str(results / "reports")]) == 0
    assert f"no figures for regression: '{missing}/<study>' does not exist" in \
        capsys.readouterr().out
    text = (results / "reports" / "report.md").read_text()
    assert f"regression: no figures, '{missing / 'regression'}' does not exist" in text
    assert not missing.exists()


def test_a_file_is_named_once_in_full_then_by_its_stem():
    from study.names import named_once, short_name, short_names

    assert short_name("/data/runs/harbour.csv") == "harbour"
    assert short_name("models/net.py:build") == "net"
    assert short_name("net.py:make_net") == "net:make_net"  # not the usual function: kept
    assert short_name("digits-cnn") == "digits-cnn"  # a shipped name is already short
    assert short_names(["/a/data.csv", "/b/data.csv", "/c/x.npz"]) == {
        "/a/data.csv": "a/data", "/b/data.csv": "b/data", "/c/x.npz": "x"}
    assert short_names(["/a/data.csv", "/a/data.parquet"]) == {  # one folder: the full text
        "/a/data.csv": "/a/data.csv", "/a/data.parquet": "/a/data.parquet"}
    assert named_once(["/c/x.npz", "digits"], "Files") == "Files: x is /c/x.npz."
    assert named_once(["digits"]) is None


def test_a_train_report_names_its_model_and_data_and_its_summary_flags_a_busy_machine(
        tmp_path, capsys):
    """The title names the model and data (not 'Convergence study report' alone), figure
    titles and sentences use the files' stems, and `summarize` gives the same no-verdict as
    the report where the runs were measured on a busy machine."""
    from study.report import build
    from study.train.sweep import figures, summary

    model, data = str(tmp_path / "models/mlp.py:build"), str(tmp_path / "houses.npz")
    runs = train_runs().assign(model=model, data=data, noisy=True)
    folder = write(tmp_path, "results", runs, kind="train")
    made = build.build_blocks(folder.parent, tmp_path / "figures", ["train"])
    text = "\n".join(str(b.content) for b in made)
    assert made[0].content == "Convergence study report: mlp on houses"
    assert f"Files by their short names: houses is {data}; mlp is {model}." in text
    assert text.count(model) == 1 and text.count(data) == 1, text  # said once, nowhere else
    assert "no verdict" in text
    table = summary.summary_table(runs)
    assert "busy machine (no verdict)" in table and str(tmp_path) not in table, table
    quiet = summary.summary_table(runs.assign(noisy=False))
    assert "busy machine" not in quiet and "x [" in quiet, quiet  # a ratio with its interval
    fig = figures.figure_headline(runs)
    assert [ax.get_title() for ax in fig.axes] == ["mlp on houses"]


def test_a_report_on_the_original_questions_says_so_first_in_its_title():
    """The reference report (regression on eve, the feed modes, train problems) is titled by
    the questions it answers first, not by the first train problems it lists."""
    from types import SimpleNamespace

    import pandas as pd

    from study.report.build import report_title
    from study.sweep.plugin import load_kind

    def results(kind, runs):
        return SimpleNamespace(kind=kind, plugin=load_kind(kind), runs=pd.DataFrame(runs))

    feedmode = results("feedmode", {"status": ["ok"]})
    eve = results("regression", {"status": ["converged"], "dataset": ["eve"]})
    assert report_title([eve, feedmode]) == "Convergence study report: the original questions"
    assert report_title([results("feedmode", {"status": ["skipped"]})]) == \
        "Convergence study report"
