"""The learning-rate tuning protocol (study/sweep/tuning.py): the choice, the config, and
a real sweep in which only one rate of the grid converges."""

import json
import math

import pandas as pd
import pytest

from study.regression.report import tuning_blocks
from study.regression.summary import summarize
from study.sweep.grid import ConfigError, parse_study
from study.sweep.runner import run_study
from study.sweep.tuning import NO_RATE, TUNED, choose, measured_runs, tuning_axes, tuning_columns


def row(status, iterations, suboptimality, seconds=1.0, target_reached=None):
    return {"status": status, "iterations": iterations, "suboptimality": suboptimality,
            "seconds": seconds,
            "target_reached": status == "converged" if target_reached is None else target_reached}


def test_the_fastest_to_the_target_wins_by_the_criterion():
    rows = [row("converged", 300, 1e-9, seconds=0.1), row("converged", 90, 5e-9, seconds=0.3),
            row("max_iter", 1000, 1e-3)]
    assert choose([0.1, 1.0, 0.01], rows) == 1.0  # fewest iterations
    assert choose([0.1, 1.0, 0.01], rows, "seconds") == 0.1


def test_without_a_run_at_the_target_the_lowest_suboptimality_wins():
    rows = [row("max_iter", 200, 3e-2), row("timeout", 50, 4e-4), row("stalled", 80, 1e-3)]
    assert choose([0.001, 0.01, 0.1], rows) == 0.01


def test_a_diverged_or_failed_rate_is_never_chosen():
    rows = [row("diverged", 3, 1e-12), row("error", 0, float("nan")), row("max_iter", 200, 1e-1)]
    assert choose([10.0, 3.0, 0.01], rows) == 0.01
    assert choose([10.0, 3.0], rows[:2]) is None


def test_a_run_whose_float64_check_missed_the_target_did_not_reach_it():
    rows = [row("converged", 5, 2e-8, target_reached=False), row("converged", 400, 1e-9)]
    assert choose([1.0, 0.1], rows) == 0.1


def test_ties_go_to_the_smaller_rate():
    rows = [row("converged", 90, 1e-9), row("converged", 90, 1e-9)]
    assert choose([0.5, 1.0], rows) == 0.5


def config(**tuning) -> dict:
    return {"name": "t", "seeds": [0, 1], "stopping": {"tol": 1e-8, "max_iter": 2000},
            "tuning": {"grid": [0.01, 1.0, 3.0], "seed": 5, "stopping": {"max_iter": 200},
                       **tuning},
            "datasets": [{"name": "synthetic", "n": 300}],
            "optimizers": [{"name": "gd", "step": "fixed", "learning_rate": "tuned"},
                           {"name": "gd"}],
            "backends": [{"name": "numpy"}]}


@pytest.mark.parametrize("tuning, message", [
    ({"seed": 1}, "tuning: seed: 1 is one of the measured seeds [0, 1]"),
    ({"grid": [1.0, 0.1]}, "tuning: grid: must be at least two increasing rates"),
    ({"grid": [0.1, -1.0]}, "tuning: grid: must be at least two increasing rates"),
    ({"criterion": "loss"}, "tuning: criterion must be one of: iterations, seconds, got 'loss'"),
    ({"stopping": {"max_iter": -3}}, "tuning: stopping"),
    ({"rates": [1]}, "unknown key in optimizers: 'gd': tuning 'rates'"),
])
def test_a_bad_tuning_table_is_one_line_naming_the_key(tuning, message):
    with pytest.raises(ConfigError) as error:
        parse_study(config(**tuning), "t.toml")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_tuned_needs_a_tuning_table_and_a_tuning_table_needs_tuned():
    raw = config()
    del raw["tuning"]
    with pytest.raises(ConfigError, match="needs a \\[tuning\\] table"):
        parse_study(raw, "t.toml")
    raw = config()
    raw["optimizers"][1]["tuning"] = {"grid": [0.1, 1.0]}
    with pytest.raises(ConfigError, match="'gd': tuning: is given, but learning_rate"):
        parse_study(raw, "t.toml")
    raw = config()
    raw["optimizers"][0] = {"name": "adam", "learning_rate": "tuned", "beta_1": 2.0}
    with pytest.raises(ConfigError, match="beta_1"):  # every grid point is checked
        parse_study(raw, "t.toml")


def test_a_tuning_seed_that_rebuilds_the_measured_instance_is_refused():
    """Issue 28: with the data set's own seed fixed and a zero start, the 'held-apart' seed
    builds the very instance that is then measured (same data, same start)."""
    raw = config()
    raw["datasets"][0]["seed"] = 3
    with pytest.raises(ConfigError, match="the tuning seed 5 builds the very instance that is "
                                          "measured") as error:
        parse_study(raw, "t.toml")
    assert "\n" not in str(error.value)
    raw["init"] = "normal"  # another start: held apart, but only the start, and the rows say so
    tuned = [s for s in parse_study(raw, "t.toml").specs if s.tuning.get("role") == "tuned"]
    assert {s.axes()["tuning_holdout"] for s in tuned} == {"start point only"}
    del raw["datasets"][0]["seed"]
    tuned = [s for s in parse_study(raw, "t.toml").specs if s.tuning.get("role") == "tuned"]
    assert {s.axes()["tuning_holdout"] for s in tuned} == {"instance"}


def test_the_grid_runs_once_per_configuration_on_the_held_apart_seed():
    raw = config()
    raw["repeats"] = 2
    specs = parse_study(raw, "t.toml").specs
    grid = [s for s in specs if s.tuning.get("role") == "tuning"]
    tuned = [s for s in specs if s.tuning.get("role") == "tuned"]
    assert [s.hyperparameters["learning_rate"] for s in grid] == [0.01, 1.0, 3.0]
    assert {s.seed for s in grid} == {5} and {s.seed for s in tuned} == {0, 1}
    assert {s.repeat for s in grid} == {0} and len(tuned) == 4  # 2 seeds x 2 repeats
    assert all(s.stopping == {"tol": 1e-8, "max_iter": 200} for s in grid)
    assert specs.index(grid[-1]) < specs.index(tuned[0])
    untuned = [s for s in specs if not s.tuning]
    assert json.loads(untuned[0].to_json()).keys() >= {"stopping"} \
        and "tuning" not in json.loads(untuned[0].to_json())  # old run ids stand


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Only 1.0 converges within the grid's 200 iterations (L = 1: 3.0 > 2/L diverges, 0.01
    is far too slow); a second block's grid has no usable rate at all."""
    raw = config()
    raw["optimizers"].append({"name": "gd", "step": "fixed", "learning_rate": "tuned",
                              "tuning": {"grid": [3.0, 10.0]}})
    study = parse_study(raw, "t.toml")
    out = tmp_path_factory.mktemp("tuning") / "res"
    first = run_study(study, out, only=["tuning=tuning"], quiet=True)
    second = run_study(study, out, quiet=True)
    third = run_study(study, out, quiet=True)
    return pd.read_parquet(out / "runs.parquet"), first, second, third


@pytest.mark.slow
def test_the_measured_seeds_run_at_the_rate_only_one_converging_grid_value_gives(sweep):
    runs = sweep[0]
    tuning = runs[runs["tuning"] == "tuning"].set_index("hp_learning_rate")
    assert tuning.loc[[0.01, 1.0, 3.0], "status"].tolist() == ["max_iter", "converged",
                                                                "diverged"]
    assert set(tuning["seed"]) == {5}
    measured = runs[(runs["tuning"] == "tuned") & (runs["status"] != "skipped")]
    assert sorted(measured["seed"]) == [0, 1]
    assert (measured["hp_learning_rate"] == 1.0).all() and (measured["tuned_value"] == 1.0).all()
    assert set(measured["tuning_grid"]) == {"[0.01, 1.0, 3.0]"}
    assert set(measured["tuning_criterion"]) == {"iterations"}
    assert set(measured["tuning_seed"]) == {5}
    assert (measured["status"] == "converged").all()
    assert json.loads(measured["stopping"].iloc[0])["max_iter"] == 2000  # the full budget


def test_a_grid_where_every_rate_diverges_records_the_measured_runs_as_skipped(sweep):
    runs = sweep[0]
    tuning = runs[(runs["tuning"] == "tuning") & runs["hp_learning_rate"].isin([10.0])]
    assert tuning["status"].tolist() == ["diverged"]
    skipped = runs[(runs["tuning"] == "tuned") & (runs["status"] == "skipped")]
    assert len(skipped) == 2 and set(skipped["message"]) == {NO_RATE}
    assert skipped["tuned_value"].isna().all()


def test_resume_never_runs_the_grid_again(sweep):
    runs, first, second, third = sweep
    assert sum(first.values()) == 4  # the two grids' runs: 3.0 is in both, run once
    assert sum(second.values()) == 2 + 4  # the untuned block, then the tuned measured runs
    assert not third  # nothing to do
    assert len(runs) == 4 + 2 + 4


def test_summaries_leave_the_grid_runs_out_and_the_report_states_the_rates(sweep):
    runs = sweep[0]
    assert len(measured_runs(runs)) == 6
    table = summarize(runs)
    assert sorted(table["runs"]) == [2, 2, 2] and not (table["tuning"] == "tuning").any()
    blocks = tuning_blocks(runs)
    report = blocks[-1].content
    assert len(report) == 2
    chosen = report[report["tuned rate"] == "1"].iloc[0]
    assert "0.01: max_iter 200 it" in chosen.iloc[3] and "3: diverged" in chosen.iloc[3]
    assert "1: converged" in chosen.iloc[3] and chosen["held-apart seed"] == 5
    assert set(report["tuned rate"]) == {"1", "none usable"}
    assert math.isclose(float(chosen["tuned rate"]), 1.0)


def test_the_tuning_columns_are_declared_once_and_are_what_a_tuned_run_writes():
    from study.regression.schema import RUN_COLUMNS as regression
    from study.train.sweep.schema import RUN_COLUMNS as train

    tuning = {"role": TUNED, "value": 0.1, "grid": [0.1, 1.0], "seed": 9, "stopping": {},
              "criterion": "iterations"}
    for schema, holdout in ((regression, lambda: "instance"), (train, None)):
        declared = tuning_columns("the study's own criterion", holdout=holdout is not None)
        assert set(tuning_axes(tuning, holdout=holdout)) == {c.name for c in declared}
        assert [(c.name, c.kind) for c in schema.columns if c.name.startswith("tun")] == [
            (c.name, c.kind) for c in declared]
        assert all(c.name in schema.axes for c in declared)


def test_an_instance_the_loop_added_to_a_tuned_configuration_is_held_as_it_ran():
    """`study run` measures again, when stale, the instances an earlier adaptive loop added; a
    tuned one's row is under its chosen rate's id, not the id of the spec that waits for it."""
    from dataclasses import replace

    from study.sweep.adaptive import with_held
    from study.sweep.grid import waits
    from study.sweep.plugin import load_kind

    study = parse_study(config(), "t.toml")
    plugin = load_kind(study.kind)
    tuned = next(s for s in study.specs if waits(plugin, s))
    plain = next(s for s in study.specs if not waits(plugin, s) and s.seed == 0)
    added, added_plain = replace(tuned, seed=2), replace(plain, seed=2)
    rows = {p.run_id: {"run_id": p.run_id, "seed": p.seed, **row("converged", 10 + i, 1e-9)}
            for i, p in enumerate(plugin.prerequisites(added))}
    ran = plugin.resolve(added, rows)
    assert ran.run_id != added.run_id  # the rate chosen is in its id
    rows |= {s.run_id: {"run_id": s.run_id, "seed": 2, **row("converged", 9, 1e-9)}
             for s in (ran, added_plain)}
    held = {s.run_id for s in with_held(study, study.specs, pd.DataFrame(list(rows.values())))}
    assert {added.run_id, added_plain.run_id} <= held
    assert all(p.run_id in held for p in plugin.prerequisites(added))
