"""keras:<Class>: the Keras object's own update on the TensorFlow backend, against ours."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("tensorflow")

import tomllib  # noqa: E402

from tolerances import loss_condition, twin  # noqa: E402

from datasets import InputError, make_problem  # noqa: E402
from optimizers import build_rules, make_optimizer, run  # noqa: E402
from study.frameworks.registry import make_backend  # noqa: E402
from study.regression.plugin import code_files  # noqa: E402
from study.regression.spec import RunSpec  # noqa: E402
from study.sweep.grid import ConfigError, parse_study  # noqa: E402

MODES = [("resident", False), ("fused", False), ("fused", True)]
MODE_IDS = ["resident", "fused", "fused-xla"]
# float32-representable rates and betas: Keras turns beta_1 and beta_2 into tensors through
# float32 before its bias-correction powers (ops.cast of a Python float), so only these give
# float64-equal iterates; see test_default_betas_differ_by_their_float32_rounding
EXACT = {"learning_rate": 2**-5, "beta_1": 0.875, "beta_2": 1 - 2**-9, "epsilon": 1e-7}


@pytest.fixture(scope="module")
def problem():
    return make_problem("synthetic", n=2000, d=5, kappa=100.0, seed=3)


def relative(a, b) -> float:
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def side_by_side(problem, keras_name, keras_hp, ours_name, ours_hp, dtype="float64",
                 feed="fused", xla=False, steps=50):
    rules = build_rules(max_iter=steps)
    keras = run(problem, make_optimizer(keras_name, **keras_hp), rules, init="normal", seed=1,
                backend=make_backend("tensorflow", dtype, feed=feed, xla=xla))
    ours = run(problem, make_optimizer(ours_name, **ours_hp), rules, init="normal", seed=1,
               backend=make_backend("numpy", dtype))
    assert keras.iterations == ours.iterations == steps
    return keras, ours


@pytest.mark.numerical
@pytest.mark.parametrize(("feed", "xla"), MODES, ids=MODE_IDS)
def test_keras_adam_and_ours_have_equal_iterates_in_float64(problem, feed, xla):
    keras, ours = side_by_side(problem, "keras:Adam", EXACT, "adam", EXACT, feed=feed, xla=xla)
    bound = twin(50, problem.reference.kappa_raw)  # tests/tolerances.py: 5.5e-12 here
    np.testing.assert_allclose(keras.trace["loss"], ours.trace["loss"],
                               rtol=bound * loss_condition(problem))
    assert relative(keras.w, ours.w) <= bound
    assert (keras.nfev, keras.ngev) == (51, 51)  # from Keras's own iteration counter


@pytest.mark.numerical
def test_default_betas_differ_by_their_float32_rounding(problem):
    """beta_2 = 0.999 becomes 0.99900001 in Keras's powers: lr_t is 6e-6 smaller, relatively."""
    keras, ours = side_by_side(problem, "keras:Adam", {"learning_rate": 2**-5}, "adam",
                               {"learning_rate": 2**-5})
    # steps 6e-6 shorter move the iterates by about as much (3.7e-6 measured), far above the
    # twins' rounding (twin(50, 100) = 5.5e-12) and below 2e-5, a few times the cause
    assert 1e-7 < relative(keras.w, ours.w) <= 2e-5


@pytest.mark.numerical
def test_keras_adam_and_ours_agree_in_float32(problem):
    keras, ours = side_by_side(problem, "keras:Adam", EXACT, "adam", EXACT, dtype="float32")
    assert keras.dtype == ours.dtype == "float32"
    # Adam's step m / sqrt(v) is normalized: each of 50 steps rounds by a few eps32 of lr,
    # not amplified by kappa as a gradient step is: 5 k eps32 = 3e-5 (equal bits measured)
    assert relative(keras.w, ours.w) <= 1e-4


@pytest.mark.numerical
def test_keras_sgd_nesterov_and_ours_have_equal_iterates(problem):
    hp = {"learning_rate": 0.5, "momentum": 0.5}
    keras, ours = side_by_side(problem, "keras:SGD", {**hp, "nesterov": True}, "nesterov",
                               {"step": "fixed", **hp}, feed="resident")
    assert relative(keras.w, ours.w) <= twin(50, problem.reference.kappa_raw)


def test_keras_reaches_the_target_and_the_record_holds_the_object(well_conditioned):
    result = run(well_conditioned, make_optimizer("keras:Adam", learning_rate=0.05),
                 build_rules(tol=1e-8, max_iter=5000), backend=make_backend("tensorflow"))
    assert result.status == "converged" and result.suboptimality <= 1e-8
    record = result.record()
    assert record["optimizer"] == "keras:Adam" and record["hp_learning_rate"] == 0.05
    assert record["keras_class"] == "Adam" and record["keras_version"]
    config = json.loads(record["keras_config"])
    # Keras holds the rate in a float32 variable, and its config says so
    assert config["learning_rate"] == float(np.float32(0.05)) and config["epsilon"] == 1e-7


@pytest.mark.parametrize(("name", "hp", "message"), [
    ("keras:Adamm", {}, "unknown Keras optimizer 'Adamm'; allowed: "),
    ("keras:Adam", {"learning_rat": 0.1}, "keras:Adam: "),
    ("keras:Optimizer", {}, "unknown Keras optimizer 'Optimizer'"),
    # issue 28: impossible numbers, which Keras itself accepts and runs
    ("keras:Adam", {"learning_rate": -0.01}, r"keras:Adam: learning_rate must be in \(0, inf\)"),
    ("keras:SGD", {"learning_rate": float("nan")}, "learning_rate must be a finite number"),
    ("keras:Adam", {"beta_2": 1.0}, r"beta_2 must be in \[0, 1\), got 1.0"),
    ("keras:RMSprop", {"epsilon": -1e-7}, "epsilon must be in"),
    ("keras:AdamW", {"weight_decay": -0.1}, r"weight_decay must be in \[0, inf\)"),
    ("keras:Adam", {"clipnorm": 0.0}, "clipnorm must be in"),
    ("keras:Ftrl", {"learning_rate_power": 0.5}, r"learning_rate_power must be in \(-inf, 0\]"),
    ("keras:Adam", {"gradient_accumulation_steps": 0}, "must be an integer >= 1"),
])
def test_bad_class_or_parameter_is_an_input_error(name, hp, message):
    with pytest.raises(InputError, match=message) as info:
        make_optimizer(name, **hp)
    assert "\n" not in str(info.value)


def test_the_ranges_allow_what_keras_documents():
    """Lion's betas may be 1, an epsilon may be tiny, decays may be 0: refusals stay honest."""
    for name, hp in (("keras:Lion", {"beta_1": 1.0}), ("keras:Adam", {"epsilon": 1e-30}),
                     ("keras:AdamW", {"weight_decay": 0.0}), ("keras:SGD", {"momentum": 0.0}),
                     ("keras:Adam", {"clipnorm": None})):
        make_optimizer(name, **hp)


def test_numpy_backend_is_refused(problem):
    with pytest.raises(InputError, match="tensorflow backend only"):
        run(problem, make_optimizer("keras:Adam"), build_rules(max_iter=3),
            backend=make_backend("numpy"))


@pytest.mark.parametrize("arguments", [["--optimizer", "keras:Nope"],
                                       ["--optimizer", "keras:Adam", "--opt-param", "lr=0.1"]])
def test_cli_bad_keras_class_or_parameter_is_one_line_and_exit_2(tmp_path, capsys, arguments):
    from study.__main__ import main

    out = tmp_path / "run.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--backend",
                 "tensorflow", "--max-iter", "5", "--out", str(out), *arguments])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "keras" in err.lower()
    assert not out.exists()


def test_cli_runs_a_keras_optimizer_with_its_parameters(tmp_path, capsys):
    import pandas as pd

    from study.__main__ import main

    out = tmp_path / "run.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--backend",
                 "tensorflow", "--feed", "resident", "--optimizer", "keras:Adam",
                 "--opt-param", "learning_rate=0.01", "--max-iter", "5", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    row = pd.read_parquet(out).iloc[0]
    assert row["optimizer"] == "keras:Adam" and row["hp_learning_rate"] == 0.01
    assert json.loads(row["keras_config"])["learning_rate"] == float(np.float32(0.01))


CONFIG = """
name = "k"
[stopping]
max_iter = 5
[[datasets]]
name = "synthetic"
n = 300
[[optimizers]]
name = "keras:Adam"
learning_rate = [0.01, 0.1]
[[backends]]
name = "tensorflow"
feed = "fused"
"""


@pytest.mark.slow
def test_config_accepts_keras_names_and_fingerprints_their_module(tmp_path):
    study = parse_study(tomllib.loads(CONFIG), "k.toml")
    assert [s.hyperparameters for s in study.specs] == [{"learning_rate": 0.01},
                                                        {"learning_rate": 0.1}]
    assert "study/frameworks/keras/optimizers.py" in code_files(study.specs[0])
    with pytest.raises(ConfigError, match="unknown Keras optimizer 'Adamm'"):
        parse_study(tomllib.loads(CONFIG.replace("keras:Adam", "keras:Adamm")), "k.toml")
    with pytest.raises(ConfigError, match="keras:Adam: "):
        parse_study(tomllib.loads(CONFIG.replace("learning_rate", "learning_rat")), "k.toml")


@pytest.mark.slow
def test_checking_a_keras_config_keeps_tensorflow_out_of_the_checking_process(tmp_path):
    """The sweep's own process checks the config: TensorFlow there would log to the terminal
    and, on a GPU machine, hold the device's memory beside the runs."""
    import subprocess
    import sys

    config = tmp_path / "k.toml"
    config.write_text(CONFIG)
    code = ("import sys; from study.sweep.grid import load_study; "
            f"study = load_study({str(config)!r}); "
            "print(len(study.specs), 'tensorflow' in sys.modules, 'keras' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "False", "False"]
    assert "absl" not in done.stderr and "cuda" not in done.stderr.lower()


def test_plain_optimizers_do_not_fingerprint_the_keras_module():
    spec = RunSpec("s", "synthetic", {}, "adam", {}, "numpy", {}, "float64", "zeros", 0, 0)
    files = code_files(spec)
    assert "optimizers/adam.py" in files and "study/frameworks/keras/optimizers.py" not in files


def test_a_checked_point_is_not_checked_again_in_this_process(monkeypatch):
    """Only points not seen before go to the child; the answers come back in the asked order."""
    from study.frameworks.keras import optimizers as keras_optimizer

    sent = []

    def child(args, points, timeout, what):
        sent.append(points)
        return [None if config.get("learning_rate", 0) > 0 else "bad rate"
                for _, config in points]

    monkeypatch.setattr(keras_optimizer, "_CHECKED", {})
    monkeypatch.setattr(keras_optimizer, "numpy_child", child)
    adam, bad = ("keras:Adam", {"learning_rate": 0.1}), ("keras:SGD", {"learning_rate": -1})
    assert keras_optimizer.check_optimizers([adam, bad, adam]) == [None, "bad rate", None]
    assert keras_optimizer.check_optimizers([bad, ("keras:SGD", {"learning_rate": 2})]) == \
        ["bad rate", None]
    assert sent == [[list(adam), list(bad)], [["keras:SGD", {"learning_rate": 2}]]]
    assert keras_optimizer.check_optimizers([]) == [] and len(sent) == 2


def test_the_check_child_is_bound_by_the_studys_run_timeout(monkeypatch):
    """The child that checks a config's Keras optimizers has the study's run_timeout: one that
    does not finish in it is one line naming that bound, not a wait of ten minutes."""
    from study.frameworks.keras import optimizers as keras_optimizer

    monkeypatch.setattr(keras_optimizer, "_CHECKED", {})
    with pytest.raises(InputError, match=r"did not finish within run_timeout = 0.05 s"):
        keras_optimizer.check_optimizers([("keras:Adam", {"learning_rate": 0.1})], 0.05)
    seen = []
    monkeypatch.setattr(keras_optimizer, "numpy_child",
                        lambda args, points, timeout, what: seen.append(timeout)
                        or [None] * len(points))
    parse_study(tomllib.loads("""name = "t"
run_timeout = 7
[[datasets]]
name = "synthetic"
[[optimizers]]
name = "keras:Adam"
[[backends]]
name = "tensorflow"
"""), "t.toml")
    assert seen == [7]


@pytest.mark.slow
def test_a_keras_optimizer_that_fails_in_its_update_is_one_line_before_the_clock(tmp_path,
                                                                                  capsys):
    """keras:Muon on float64 (its float32 constants meet the float64 variable): one line
    naming the optimizer and Keras's cause, exit 1, nothing written; the trial update in setup
    meets it before any clock starts."""
    from convergence_study.errors import LibraryFailure
    from study.__main__ import main

    out = tmp_path / "r.parquet"
    assert main(["regress", "--dataset", "eve", "--rows", "200", "--optimizer", "keras:Muon",
                 "--backend", "tensorflow", "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "keras:Muon failed inside Keras's update: " in err and "double" in err, err
    assert not out.exists()
    problem = make_problem("eve", rows=200)
    optimizer, backend = make_optimizer("keras:Muon"), make_backend("tensorflow", "float64")
    with pytest.raises(LibraryFailure, match="keras:Muon failed inside Keras's update"):
        run(problem, optimizer, build_rules(tol=1e-8, max_iter=10), backend=backend)


@pytest.mark.slow
def test_a_sweep_records_a_failing_keras_update_as_failed_with_its_line(tmp_path):
    from study.__main__ import main

    config = tmp_path / "t.toml"
    config.write_text("""name = "t"
run_timeout = 120
[stopping]
max_iter = 20
[[datasets]]
name = "eve"
rows = 200
[[optimizers]]
name = "keras:Muon"
[[backends]]
name = "tensorflow"
dtype = ["float64", "float32"]
""")
    assert main(["run", str(config), "--out", str(tmp_path / "r"), "--quiet",
                 "--no-adaptive"]) == 1
    rows = pd.read_parquet(tmp_path / "r" / "runs.parquet").set_index("dtype")
    assert rows.loc["float64", "status"] == "failed"
    assert rows.loc["float64", "message"].startswith("keras:Muon failed inside Keras's update")
    assert rows.loc["float32", "status"] != "failed"
