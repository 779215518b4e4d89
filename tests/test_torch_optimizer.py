"""torch:<Class>: torch.optim's own optimizer objects driven by our loop on the torch backend."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tomllib  # noqa: E402

import library_nist  # noqa: E402

from datasets import InputError, make_problem  # noqa: E402
from optimizers import build_rules, make_optimizer, run  # noqa: E402
from study.frameworks.registry import make_backend  # noqa: E402
from study.regression.plugin import SCHEMA, code_files  # noqa: E402
from study.sweep.grid import ConfigError, parse_study  # noqa: E402

# a setting of each class that reaches 1e-8 on both problems below in at most ~1000 iterations
REFERENCES = {
    "LBFGS": {},
    "SGD": {"lr": 0.3, "momentum": 0.9, "nesterov": True},
    "Adam": {"lr": 0.1},
    "RMSprop": {"lr": 0.03},
    "Adagrad": {"lr": 1.0},
    "Adadelta": {"lr": 1.0},
}


@pytest.fixture(scope="module")
def problems():
    return {"least-squares": make_problem("synthetic", n=1000, d=5, kappa=100.0, seed=3),
            "logistic": make_problem("synthetic-logistic", n=1000, d=5, seed=3)}


def reference_run(problem, class_name, feed="resident", dtype="float64", max_iter=5000):
    optimizer = make_optimizer(f"torch:{class_name}", **REFERENCES[class_name])
    result = run(problem, optimizer, build_rules(tol=1e-8, max_iter=max_iter),
                 backend=make_backend("torch", dtype, feed=feed))
    return optimizer, result


@pytest.mark.parametrize("kind", ["least-squares", "logistic"])
@pytest.mark.parametrize("class_name", list(REFERENCES))
def test_every_class_reaches_the_certified_optimum(problems, class_name, kind):
    optimizer, result = reference_run(problems[kind], class_name)
    assert result.status == "converged", result.message
    assert result.suboptimality <= 1e-8
    record = result.record()
    assert record["optimizer"] == f"torch:{class_name}"
    assert record["torch_class"] == class_name and record["torch_version"] == torch.__version__
    config = json.loads(record["torch_config"])
    assert all(config[k] == v for k, v in REFERENCES[class_name].items())
    if class_name == "LBFGS":  # every closure call, plus the start point
        library = optimizer._library.state[optimizer._param]
        assert result.nfev == 1 + library["func_evals"] >= 1 + 2 * result.iterations
        assert config["line_search_fn"] == "strong_wolfe" and config["max_iter"] == 1
        assert config["tolerance_grad"] == config["tolerance_change"] == 0
    else:
        assert result.nfev == result.ngev == 1 + result.iterations


@pytest.mark.parametrize(("class_name", "kind", "feed"), [
    ("Adam", "least-squares", "feed"), ("LBFGS", "logistic", "feed"),
    ("Adagrad", "logistic", "compiled"), ("LBFGS", "logistic", "compiled"),
])
@pytest.mark.slow
def test_the_other_modes_reach_it_with_the_resident_iterates(problems, class_name, kind, feed):
    _, resident = reference_run(problems[kind], class_name)
    _, other = reference_run(problems[kind], class_name, feed=feed)
    assert other.status == "converged" and other.suboptimality <= 1e-8, other.message
    assert other.extra["feed"] == feed and other.nfev == resident.nfev
    assert other.iterations == resident.iterations
    np.testing.assert_allclose(other.w, resident.w, rtol=1e-9)


def test_float32_reaches_what_float32_can(problems):
    _, result = reference_run(problems["logistic"], "LBFGS", dtype="float32", max_iter=100)
    assert result.dtype == "float32" and result.suboptimality <= 1e-5


def test_sgd_nesterov_follows_our_nesterov_exactly(problems):
    """The library's update on our gradient: torch's Nesterov form (buf = m buf + g,
    w -= lr (g + m buf)) is ours, so the iterates agree to rounding."""
    rules, problem = build_rules(max_iter=60), problems["least-squares"]
    hp = {"momentum": 0.5}
    theirs = run(problem, make_optimizer("torch:SGD", lr=0.3, nesterov=True, **hp), rules,
                 backend=make_backend("torch"), init="normal", seed=1)
    ours = run(problem, make_optimizer("nesterov", step="fixed", learning_rate=0.3, **hp),
               rules, backend=make_backend("numpy"), init="normal", seed=1)
    assert theirs.iterations == ours.iterations == 60
    assert float(np.max(np.abs(theirs.w - ours.w)) / np.max(np.abs(ours.w))) <= 1e-10


@pytest.mark.parametrize(("name", "hp", "message"), [
    ("torch:Adamm", {}, "unknown torch optimizer 'Adamm'; allowed: LBFGS, SGD, Adam, "),
    ("torch:Optimizer", {}, "unknown torch optimizer 'Optimizer'"),
    ("torch:Adam", {"lrr": 0.1}, "torch:Adam has no parameter 'lrr'; allowed: lr, betas, "),
    ("torch:Adam", {"lr": -0.01}, r"torch:Adam: lr must be in \(0, inf\), got -0.01"),
    ("torch:SGD", {"lr": float("nan")}, "torch:SGD: lr must be a finite number"),
    ("torch:Adam", {"betas": [0.9, 1.0]}, r"torch:Adam: betas\[1\] must be in \[0, 1\), got 1.0"),
    ("torch:Adam", {"betas": [0.9]}, r"betas must be a pair \[beta1, beta2\]"),
    ("torch:RMSprop", {"eps": -1e-8}, r"torch:RMSprop: eps must be in \(0, inf\)"),
    ("torch:RMSprop", {"alpha": 1.5}, r"alpha must be in \[0, 1\)"),
    ("torch:Adadelta", {"rho": -0.1}, r"rho must be in \[0, 1\)"),
    ("torch:Adagrad", {"lr_decay": -1.0}, r"lr_decay must be in \[0, inf\)"),
    ("torch:Adam", {"weight_decay": -0.1}, r"weight_decay must be in \[0, inf\)"),
    ("torch:SGD", {"momentum": 1.0}, r"momentum must be in \[0, 1\)"),
    ("torch:LBFGS", {"history_size": 0}, "history_size must be an integer >= 1"),
    ("torch:LBFGS", {"max_iter": 20}, r"torch:LBFGS: max_iter is set by the harness \(1\)"),
    ("torch:LBFGS", {"line_search_fn": None}, "line_search_fn is set by the harness"),
    ("torch:Adam", {"maximize": True}, "maximize is set by the harness"),
    ("torch:SGD", {"nesterov": "yes"}, "torch:SGD: nesterov must be true or false"),
    # torch's own check, in one line
    ("torch:SGD", {"lr": 0.1, "nesterov": True}, "torch:SGD: Nesterov momentum requires"),
])
def test_bad_class_or_parameter_is_one_line(name, hp, message):
    with pytest.raises(InputError, match=message) as info:
        make_optimizer(name, **hp)
    assert "\n" not in str(info.value)


def test_the_ranges_allow_what_torch_documents():
    for name, hp in (("torch:SGD", {"momentum": 0.0}), ("torch:Adam", {"weight_decay": 0.0}),
                     ("torch:Adagrad", {"initial_accumulator_value": 0.0}),
                     ("torch:Adam", {"betas": [0.0, 0.5], "foreach": None, "amsgrad": True}),
                     ("torch:SGD", {"dampening": 1.0}), ("torch:LBFGS", {"history_size": 5})):
        make_optimizer(name, **hp)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_another_backend_is_refused_in_one_line(problems, backend):
    if backend == "jax":
        pytest.importorskip("jax")
    with pytest.raises(InputError, match=f"torch:Adam runs on the torch backend only, not "
                                         f"'{backend}'") as info:
        run(problems["least-squares"], make_optimizer("torch:Adam"), build_rules(max_iter=3),
            backend=make_backend(backend))
    assert "\n" not in str(info.value)


def test_the_record_columns_are_declared(problems):
    _, result = reference_run(problems["least-squares"], "Adagrad")
    for column in ("torch_class", "torch_config", "torch_version"):
        assert column in result.extra and SCHEMA.kind_of(column) == "str"


@pytest.mark.parametrize("arguments", [
    ["--optimizer", "torch:Nope"], ["--optimizer", "torch:Adam", "--opt-param", "lrr=0.1"],
    ["--optimizer", "torch:Adam", "--opt-param", "lr=-1"],
    ["--optimizer", "torch:Adam", "--backend", "numpy"],
])
def test_cli_refusals_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, arguments):
    from study.__main__ import main

    out = tmp_path / "run.parquet"
    backend = [] if "--backend" in arguments else ["--backend", "torch"]  # an option once
    code = main(["regress", "--dataset", "synthetic", "--rows", "300", *backend,
                 "--max-iter", "5", "--out", str(out), *arguments])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "torch" in err
    assert not out.exists()


def test_cli_runs_torch_lbfgs_and_records_it(tmp_path, capsys):
    import pandas as pd

    from study.__main__ import main

    out = tmp_path / "run.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer",
                 "torch:LBFGS", "--backend", "torch", "--opt-param", "history_size=5",
                 "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    row = pd.read_parquet(out).iloc[0]
    assert row["optimizer"] == "torch:LBFGS" and row["status"] == "converged"
    assert row["hp_history_size"] == 5 and row["torch_class"] == "LBFGS"
    assert json.loads(row["torch_config"])["history_size"] == 5


CONFIG = """
name = "t"
[stopping]
max_iter = 5
[[datasets]]
name = "synthetic"
n = 300
[[optimizers]]
name = "torch:Adam"
lr = [0.01, 0.1]
[[backends]]
name = "torch"
"""


def test_config_checks_torch_names_and_fingerprints_their_module():
    study = parse_study(tomllib.loads(CONFIG), "t.toml")
    assert [s.hyperparameters for s in study.specs] == [{"lr": 0.01}, {"lr": 0.1}]
    files = code_files(study.specs[0])
    assert "study/frameworks/torch/optimizers.py" in files
    assert "study/frameworks/keras/optimizers.py" not in files
    for old, new, message in (("torch:Adam", "torch:Adamm", "unknown torch optimizer 'Adamm'"),
                              ("lr = ", "lrr = ", "torch:Adam has no parameter 'lrr'"),
                              ("0.01", "-0.01", r"lr must be in \(0, inf\), got -0.01"),
                              ("torch:Adam", "torchy:Adam", "allowed: .*torch:<Class>")):
        with pytest.raises(ConfigError, match=message):
            parse_study(tomllib.loads(CONFIG.replace(old, new)), "t.toml")


@pytest.mark.slow
def test_checking_a_torch_config_keeps_tensorflow_out(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "t.toml"
    config.write_text(CONFIG)
    code = ("import sys; from study.sweep.grid import load_study; "
            f"study = load_study({str(config)!r}); "
            "print(len(study.specs), 'tensorflow' in sys.modules, 'keras' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2", "False", "False"]


@library_nist.requires_nist
@pytest.mark.parametrize("name", library_nist.SETS)
def test_lbfgs_on_nist_is_converged_to_the_exact_optimum_or_honest(name, tmp_path, capsys):
    """NIST StRD as stored (not standardized): where torch's L-BFGS claims convergence the
    loss has 7 correct digits against the exact rational optimum; where it does not (on
    Pontius, Filip, Longley and Wampler2 its strong-Wolfe search returns a zero step at every
    iteration) the status says so; on the sets conditioned as given it converges."""
    library_nist.check(name, ["torch:LBFGS", "--backend", "torch"], tmp_path, capsys)
