"""`study compare` and the conclusions behind the report's answers, from synthetic tables: the
same runs twice change nothing, one method slowed on purpose is found with the conclusions it
flips, mismatched folders are refused, and the answers block follows the tables."""

import json
import re

import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from test_plots_report import build_report, feedmode_table, make_tables

from study import compare
from study.__main__ import main
from study.results import load

LBFGS = "lbfgs tf-fused+xla/cpu float64"
DATA = ("eve(rows=100)", "eve(rows=100,standardize=True)")


def regression_runs() -> pd.DataFrame:
    """make_tables' runs on six seeds, each run twice with 2% noise, so every comparison has an
    interval."""
    runs, _ = make_tables()
    rng = np.random.default_rng(0)
    frames = []
    for repeat in range(2):
        for shift in (0, 3):
            frame = runs.assign(seed=runs["seed"] + shift, repeat=repeat,
                                run_id=runs["run_id"] + f"-{shift}-{repeat}")
            noise = 1 + 0.02 * rng.standard_normal(len(frame))
            frames.append(frame.assign(seconds=frame["seconds"] * noise,
                                       seconds_per_iteration=frame["seconds_per_iteration"]
                                       * noise))
    return pd.concat(frames, ignore_index=True)


def slowed(runs: pd.DataFrame, rows: pd.Series, factor: float) -> pd.DataFrame:
    runs = runs.copy()
    for column in ("seconds", "seconds_per_iteration", "first_call_seconds"):
        if column in runs:
            runs.loc[rows, column] *= factor
    return runs


def write(root, name: str, runs: pd.DataFrame, kind: str = "regression"):
    folder = root / name / kind
    folder.mkdir(parents=True)
    runs.assign(kind=kind).to_parquet(folder / "runs.parquet")
    (folder / "study.json").write_text(json.dumps({"kind": kind}))
    return folder


def test_the_same_runs_twice_change_nothing(tmp_path):
    runs = regression_runs()
    result = compare.compare_folders(write(tmp_path, "a", runs), write(tmp_path, "b", runs))
    assert len(result.changes) == 6 and not [c for c in result.changes if c.distinguishable]
    assert {c.quantity for c in result.changes if "adadelta" in c.config} == {
        "time per iteration (target reached in neither)"}  # no run reached it: its step speed
    assert result.differ == [] and not result.only_a and not result.only_b
    verdicts = {id: word for id, word, _, _ in result.conclusions}
    assert set(verdicts.values()) == {compare.HELD}
    assert {"q1.to-target", *(f"fastest.{d}" for d in DATA)} <= set(verdicts)


@pytest.mark.slow
def test_a_method_slowed_on_purpose_is_the_change_found_with_the_conclusions_it_flips(
        tmp_path, capsys):
    runs = regression_runs()
    lbfgs = runs["optimizer"] == "lbfgs"
    a, b = write(tmp_path, "a", runs), write(tmp_path, "b", slowed(runs, lbfgs, 10.0))
    result = compare.compare_folders(a, b)
    moved = [c for c in result.changes if c.distinguishable]
    assert sorted(c.config for c in moved) == [f"{d} {LBFGS}" for d in DATA]
    assert all(9 < c.comparison.ratio < 11 and compare.change_word(c) == "slower in B"
               for c in moved)
    changed = {id: (ca, cb) for id, word, ca, cb in result.conclusions
               if word == compare.CHANGED}
    assert set(changed) == {"q1.to-target", *(f"fastest.{d}" for d in DATA)}
    assert [w for _, w, _, _ in result.conclusions if w not in (compare.HELD,
                                                                 compare.CHANGED)] == []
    before, after = changed[f"fastest.{DATA[0]}"]
    assert before.claim == LBFGS and after.claim == "gd(step=1/L) numpy/cpu float64"
    assert changed["q1.to-target"][0].claim == "less time"
    assert changed["q1.to-target"][1].claim == "more time"

    fig = compare.figure(result)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert len(labels) == 6 and sorted(labels[-2:]) == [f"{d} {LBFGS}" for d in DATA]  # on top
    assert fig.axes[0].get_xscale() == "log"
    plt.close(fig)
    assert main(["compare", str(a), str(b), "--figure", str(tmp_path / "ab.png")]) == 0
    text = capsys.readouterr().out
    assert "2 of 6 changed distinguishably" in text
    assert f"* {DATA[0]} {LBFGS}" in text and "changed (3):" in text
    image = matplotlib.image.imread(tmp_path / "ab.png")
    assert image.shape[0] > 200 and image.shape[1] > 800
    assert main(["compare", str(a), str(b), "--markdown"]) == 0
    markdown = capsys.readouterr().out
    assert f"| {DATA[0]} {LBFGS} | time to target | " in markdown
    assert "| q1.to-target | " in markdown and "| **changed** |" in markdown


def test_what_differs_is_printed_first(tmp_path, capsys):
    runs = regression_runs().assign(env_numpy="2.0.0", env_blas_kernel="Haswell",
                                    env_cpu="Test CPU")
    b = runs.assign(env_numpy="2.1.0", env_blas_kernel="SkylakeX")
    assert main(["compare", str(write(tmp_path, "a", runs)), str(write(tmp_path, "b", b))]) == 0
    text = capsys.readouterr().out
    differs = text[text.index("What differs"):text.index("Time per configuration")]
    lines = [line.split() for line in differs.splitlines()]
    assert ["numpy", "A:", "2.0.0"] in lines and ["B:", "2.1.0"] in lines
    assert "blas_kernel" in differs and "SkylakeX" in differs
    assert "the same in both:" in differs and "cpu" in differs.split("the same in both:")[1]


def test_mismatched_folders_are_refused_in_one_line(tmp_path, capsys):
    runs = regression_runs()
    a = write(tmp_path, "a", runs)
    feed = feedmode_table().assign(run_id=lambda t: [f"f{i}" for i in range(len(t))])
    other = write(tmp_path, "b", feed, kind="feedmode")
    assert main(["compare", str(a), str(other)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "same study" in error and "feedmode" in error
    elsewhere = runs.assign(dataset_params=runs["dataset_params"].str.replace("100", "200"))
    assert main(["compare", str(a), str(write(tmp_path, "c", elsewhere))]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "share no configuration" in error
    named = runs.assign(study="regression"), runs.assign(study="regression-full")
    assert main(["compare", str(write(tmp_path, "d", named[0])),
                 str(write(tmp_path, "e", named[1]))]) == 2
    assert "regression-full" in capsys.readouterr().err


def feed_runs() -> pd.DataFrame:
    """feedmode_table's runs, three repeats with 2% noise."""
    base = feedmode_table().assign(seed=0, device="cpu")
    rng = np.random.default_rng(1)
    frames = [base.assign(repeat=r, run_id=[f"r{r}-{i}" for i in range(len(base))],
                          first_call_seconds=base["first_call_seconds"]
                          * (1 + 0.02 * rng.standard_normal(len(base))),
                          steady_median_seconds=base["steady_median_seconds"]
                          * (1 + 0.02 * rng.standard_normal(len(base))))
              for r in range(3)]
    return pd.concat(frames, ignore_index=True)


def test_feedmode_compare_finds_the_slowed_first_call_and_the_q2_answer_it_flips(tmp_path):
    runs = feed_runs()
    a = write(tmp_path, "a", runs, kind="feedmode")
    same = compare.compare_folders(a, write(tmp_path, "b", runs, kind="feedmode"))
    assert not [c for c in same.changes if c.distinguishable]
    assert {w for _, w, _, _ in same.conclusions} == {compare.HELD}
    holder = runs["mode"] == "placeholder"
    result = compare.compare_folders(a, write(tmp_path, "c", slowed(runs, holder, 10.0),
                                        kind="feedmode"))
    moved = {(c.config, c.quantity) for c in result.changes if c.distinguishable}
    assert moved == {(f"placeholder (default) {dtype} N={n} cpu", "first call")
                     for dtype in ("float32", "float64") for n in (500, 2000)}
    changed = {id for id, word, _, _ in result.conclusions if word == compare.CHANGED}
    assert changed == {"q2.first-call.float32.n2000", "q2.first-call.float64.n2000"}
    answer = next(c for _, _, _, c in result.conclusions if c.id == "q2.first-call.float64.n2000")
    assert answer.answer and answer.sentence.startswith(
        "At N = 2000 in float64, tf.constant took 0.5")


@pytest.mark.slow
def test_the_answers_block_opens_the_report_and_follows_the_tables(tmp_path):
    runs, traces = make_tables()
    machine = {"env_cpu": "Test CPU", "env_cores": 4, "env_memory_gb": 15.5,
               "env_blas": "openblas 0.3.30 (4 threads)", "env_blas_kernel": "Haswell",
               "env_numpy": "2.0.0", "env_tensorflow": "2.16.1"}
    runs = runs.assign(**machine)
    md, page = build_report(tmp_path / "before", (runs, traces))
    text, html = md.read_text(), page.read_text()
    answers = text[text.index("## Answers"):text.index("## The first question")]
    sentence = ("To 1e-08 on eve(rows=100), TensorFlow's fastest (lbfgs tf-fused+xla/cpu float64) "
                "took 0.24x the time of NumPy's fastest (gd(step=1/L) numpy/cpu float64), "
                "i.e. 4.17x less")
    assert sentence in answers and "[evidence](#regression-q1)" in answers
    assert '<a id="regression-q1"></a>' in text and 'id="regression-q1"' in html
    assert 'href="#regression-q1"' in html and html.index("Answers") < html.index("<figure")
    links = set(re.findall(r'href="#([^"]+)"', html))
    assert links and links <= set(re.findall(r' id="([^"]+)"', html))  # every link lands
    assert ("Machine: Test CPU, 4 cores, 15.5 GiB memory, no GPU; BLAS openblas 0.3.30 "
            "(4 threads), Haswell kernel; NumPy 2.0.0, TensorFlow 2.16.1.") in answers
    assert "regression: Machine noise" in answers or "regression: No row carries" in answers

    slower = slowed(runs, runs["optimizer"] == "lbfgs", 10.0)
    md, _ = build_report(tmp_path / "after", (slower, traces))
    answers = md.read_text()[:md.read_text().index("## The first question")]
    assert sentence not in answers
    assert ("TensorFlow's fastest (lbfgs tf-fused+xla/cpu float64) took 2.4x the time of NumPy's "
            "fastest (gd(step=1/L) numpy/cpu float64)") in answers


def test_the_environment_records_memory_and_the_blas_kernel():
    from study.sweep import environment

    env = environment.collect()
    assert env["env_memory_gb"] > 0 and "env_blas_kernel" in env
    assert environment.fingerprint({**env, "env_blas_kernel": "Haswell"}) != \
        environment.fingerprint({**env, "env_blas_kernel": "SkylakeX"})
    assert environment.fingerprint({**env, "env_memory_gb": 1.0}) == \
        environment.fingerprint({**env, "env_memory_gb": 2.0})
    from study.sweep.schema import ENGINE

    assert {"env_memory_gb", "env_blas_kernel"} <= set(ENGINE.names)


@pytest.mark.parametrize("kind", ["regression", "feedmode"])
def test_conclusions_of_a_results_folder(tmp_path, kind):
    from study.conclusions import conclusions

    runs = regression_runs() if kind == "regression" else feed_runs()
    found = conclusions(load(write(tmp_path, "a", runs, kind=kind)))
    ids = [c.id for c in found]
    assert len(ids) == len(set(ids))
    assert all(c.sentence.endswith(".") and c.evidence for c in found)
    # regression: to the target (make_tables runs no algorithm on both NumPy and TF1, so no
    # per-iteration pair); feedmode: first and later calls in float64
    assert [c.answer for c in found].count(True) == (1 if kind == "regression" else 2)


def test_the_logistic_study_answers_with_its_fastest_configuration_per_data_set(tmp_path):
    from study.conclusions import conclusions
    from study.regression.conclusions import LOGISTIC

    runs = regression_runs().assign(dataset="synthetic-logistic")
    found = conclusions(load(write(tmp_path, "a", runs)))
    assert [c.id for c in found] == [f"fastest.synthetic-logistic({d[4:]}" for d in DATA]
    assert all(c.answer and c.question == LOGISTIC and c.claim == LBFGS and c.firm
               for c in found)
