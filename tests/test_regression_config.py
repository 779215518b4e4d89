"""The regression config's per-section validators (study.regression.config): each says the
same one line it said inside the former single expand_specs, and the sections are checked in
the config's order (seeds, init, [stopping], [tuning], datasets, optimizers, backends)."""

from __future__ import annotations

import pytest

from study.regression import config
from study.sweep.grid import ConfigError
from study.sweep.tuning import tuning_axes

DATASETS = [{"name": "synthetic", "n": 50, "d": 3}]
OPTIMIZERS = [{"name": "gd", "step": "1/L"}]
BACKENDS = [{"name": "numpy"}]
TUNING = {"grid": [0.01, 0.1], "seed": 9, "stopping": {"max_iter": 5}}


def raw(**changes) -> dict:
    return {"datasets": DATASETS, "optimizers": OPTIMIZERS, "backends": BACKENDS, **changes}


def test_seeds_and_inits():
    assert config.check_seeds(3, "c.toml") == [3]
    with pytest.raises(ConfigError, match=r"^c.toml: seeds: is an empty list; give at least one"):
        config.check_seeds([], "c.toml")
    with pytest.raises(ConfigError, match=r"^c.toml: seeds: each seed must be an integer >= 0"):
        config.check_seeds([0, -1], "c.toml")
    assert config.check_inits("normal", "c.toml") == ["normal"]
    with pytest.raises(ConfigError, match=r"^c.toml: init must be one of: zeros, normal"):
        config.check_inits(["zeros", "ones"], "c.toml")


def test_stopping_over_its_base():
    rules = config.check_stopping({"tol": "off", "exact_repeat": True}, "c.toml", "stopping",
                                  config.DEFAULT_STOPPING)
    assert rules == {"tol": None, "max_iter": 100_000, "exact_repeat": True}
    with pytest.raises(ConfigError, match=r"^c.toml: stopping: must be a table"):
        config.check_stopping(3, "c.toml", "stopping", {})
    with pytest.raises(ConfigError, match=r"unknown key in \[stopping\] 'tl'"):
        config.check_stopping({"tl": 1}, "c.toml", "stopping", {}, "[stopping]")
    with pytest.raises(ConfigError, match=r"^c.toml: stopping: stopping rule: max_iter"):
        config.check_stopping({"max_iter": -1}, "c.toml", "stopping", {})


def test_tuning_protocol():
    tuning = config.check_tuning(TUNING, "c.toml", "optimizers: 'gd'", {"tol": 1e-8}, [0])
    assert tuning == {"role": "tuned", "grid": [0.01, 0.1], "seed": 9,
                      "stopping": {"max_iter": 5}, "criterion": "iterations"}
    with pytest.raises(ConfigError, match=r"tuning: seed: 0 is one of the measured seeds"):
        config.check_tuning({**TUNING, "seed": 0}, "c.toml", "optimizers: 'gd'", {}, [0])
    with pytest.raises(ConfigError, match=r"tuning: grid: must be at least two increasing"):
        config.check_tuning({**TUNING, "grid": [0.1, 0.01]}, "c.toml", "optimizers: 'gd'", {},
                            [0])


def test_sections_points():
    points = config.section_points(raw(backends=[{"name": "numpy", "dtype": ["float32",
                                                                             "float64"]}]),
                                   "backends", "c.toml")
    assert points == [("numpy", {"dtype": "float32"}), ("numpy", {"dtype": "float64"})]
    with pytest.raises(ConfigError, match=r"^c.toml: datasets: unknown name 'nope'; allowed: "):
        config.section_points(raw(datasets=[{"name": "nope"}]), "datasets", "c.toml")
    block = {"name": "gd", "step": "fixed", "learning_rate": ["tuned", 0.1],
             "stopping": {"tol": "off"}}
    points, apart = config.optimizer_points(raw(optimizers=[block, {"name": "keras:Adam"}]),
                                            "c.toml", config.DEFAULT_STOPPING, TUNING, [0])
    (_, tuned, own, tuning), (_, plain, _, untuned), (name, *_) = points
    assert tuned["learning_rate"] == "tuned" and tuning["grid"] == [0.01, 0.1]
    assert own == {"tol": None, "max_iter": 100_000}
    assert plain["learning_rate"] == 0.1 and untuned is None
    # checked apart (Keras's: in a child), after the backends
    assert name == "keras:Adam" and apart == {"keras:": [("keras:Adam", {})]}


@pytest.mark.parametrize(("changes", "first"), [
    ({"seeds": [], "init": "ones"}, "seeds"),
    ({"init": "ones", "stopping": 3}, "init"),
    ({"stopping": 3, "tuning": 4}, "stopping"),
    ({"datasets": [{"name": "nope"}], "optimizers": [{"name": "nope"}]}, "datasets: unknown"),
    ({"optimizers": [{"name": "nope"}], "backends": [{"name": "nope"}]}, "optimizers: unknown"),
])
def test_the_first_section_in_error_is_the_one_said(changes, first):
    with pytest.raises(ConfigError, match=rf"^c.toml: {first}"):
        config.expand_specs(raw(**changes), "c.toml", "study", 1)


def test_the_grid_and_its_tuning_columns():
    specs = config.expand_specs(raw(optimizers=[{"name": "gd", "step": "fixed",
                                                 "learning_rate": "tuned"}], tuning=TUNING,
                                    seeds=[0, 1], init=["zeros", "normal"]),
                                "c.toml", "study", 2)
    assert len(specs) == 8 and specs[0].stopping == config.DEFAULT_STOPPING
    axes = specs[0].axes()
    assert [k for k in axes if k.startswith("tun")] == [
        "tuning", "tuned_value", "tuning_grid", "tuning_seed", "tuning_holdout", "tuning_stopping",
        "tuning_criterion"]
    assert axes["tuning_holdout"] == "instance" and axes["tuned_value"] is None


def test_one_tuning_axes_for_every_study():
    assert tuning_axes({}) == {} and tuning_axes({"role": "tuning"}) == {"tuning": "tuning"}
    tuned = {"role": "tuned", "grid": [0.1, 1.0], "seed": 3, "stopping": {"max_iter": 9},
             "value": 0.1}  # the train study's protocol has no criterion
    assert tuning_axes(tuned) == {"tuning": "tuned", "tuned_value": 0.1,
                                  "tuning_grid": "[0.1, 1.0]", "tuning_seed": 3,
                                  "tuning_stopping": '{"max_iter": 9}'}
    assert tuning_axes({**tuned, "criterion": "seconds"}, holdout=lambda: "nothing") == {
        **tuning_axes(tuned), "tuning_holdout": "nothing", "tuning_criterion": "seconds"}
