"""One configuration per row, tables that cannot be true refused, and the adaptive loop's
bounds and verdicts (issue: every row and every word true, round 6)."""

import json

import pandas as pd
from test_compare import regression_runs, write
from test_what_a_user_reads import train_runs

from study.__main__ import main
from study.results import load


def two_rates() -> pd.DataFrame:
    """optax:adamw on jax at two learning rates, two seeds each: 0.4 s and 1.5 s, and the slow
    rate misses the target on one seed."""
    rows = []
    for rate, seconds in ((0.005, 0.42), (0.0003, 1.51)):
        for seed in range(2):
            missed = rate == 0.0003 and seed == 1
            rows.append({
                "run_id": f"adamw-{rate}-{seed}", "model": "mlp", "data": "houses.npz",
                "data_params": "{}", "loss": "mse", "metric": "mae", "optimizer": "optax:adamw",
                "hyperparameters": json.dumps({"learning_rate": rate}),
                "hp_learning_rate": rate, "backend": "jax", "batch_size": 32, "seed": seed,
                "loop": "steps", "target_metric": "val_loss", "target_mode": "min",
                "target_how": "given", "target_value": 0.1, "repeat": 0,
                "status": "timeout" if missed else "reached",
                "seconds_to_target": None if missed else seconds * (1 + 0.01 * seed),
                "steps_to_target": 40, "seconds_per_step": 0.01, "setup_seconds": 0.5,
                "eval_seconds": 0.1})
    return pd.DataFrame(rows)


def test_two_learning_rates_are_two_configurations_in_the_summary(tmp_path, capsys):
    folder = write(tmp_path, "a", two_rates(), kind="train")
    assert main(["summarize", str(folder)]) == 0
    text = capsys.readouterr().out
    assert "4/4" not in text
    assert "optax:adamw on jax (batch 32) [learning_rate=0.005]" in text
    assert "optax:adamw on jax (batch 32) [learning_rate=0.0003]" in text
    lines = [line for line in text.splitlines() if "learning_rate=0.005]" in line]
    assert len(lines) == 1 and "2/2" in lines[0] and "fastest" in lines[0]


def test_two_learning_rates_are_two_configurations_in_the_report_and_compare(tmp_path):
    from study.compare import configuration_changes
    from study.conclusions import conclusions

    results = load(write(tmp_path, "a", two_rates(), kind="train"))
    (answer,) = conclusions(results)
    assert answer.claim == "optax:adamw on jax (batch 32) [learning_rate=0.005]"
    assert answer.comparison.instances == 2  # the two rates paired by seed, not pooled
    changes, only_a, only_b = configuration_changes(results, results)
    assert len(changes) == 2 and not only_a and not only_b


def test_the_key_comes_from_the_spec_where_the_rows_have_one():
    from study.regression.spec import RunSpec
    from study.sweep.grid import configuration, configurations
    from study.sweep.plugin import load_kind

    def spec(seed, stopping):
        return RunSpec("s", "eve", {"rows": 100}, "gd", {"step": "1/L"}, "numpy", {},
                       "float64", "zeros", seed, 0, stopping)

    specs = [spec(0, {"max_iter": 10}), spec(1, {"max_iter": 10}), spec(0, {"max_iter": 99})]
    runs = pd.DataFrame({"run_id": [s.run_id for s in specs],
                         "spec": [s.to_json() for s in specs]})  # no axis column at all
    keys = configurations(runs, load_kind("regression"))
    assert keys[0] == keys[1] == configuration(specs[0]) and keys[2] != keys[0]


def refused(tmp_path, capsys, runs, kind="regression") -> str:
    folder = write(tmp_path, "bad", runs, kind=kind)
    assert main(["summarize", str(folder)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err
    return captured.err


def test_a_duplicated_run_is_refused(tmp_path, capsys):
    runs = regression_runs()
    error = refused(tmp_path, capsys, pd.concat([runs, runs.iloc[[3]]], ignore_index=True))
    assert runs["run_id"].iloc[3] in error and "2 times" in error


def test_a_negative_time_is_refused(tmp_path, capsys):
    runs = regression_runs()
    runs.loc[5, "seconds"] = -0.25
    error = refused(tmp_path, capsys, runs)
    assert "column seconds holds -0.25" in error and runs["run_id"].iloc[5] in error
    train = train_runs()
    train.loc[0, "seconds_to_target"] = -1.0
    assert "seconds_to_target holds -1" in refused(tmp_path / "t", capsys, train, "train")


def test_an_unknown_status_is_refused(tmp_path, capsys):
    runs = regression_runs()
    runs.loc[2, "status"] = "great"
    error = refused(tmp_path, capsys, runs)
    assert "column status holds 'great'" in error and "converged" in error
    assert "'banana'" in refused(tmp_path / "t", capsys,
                                 train_runs().assign(status="banana"), "train")
