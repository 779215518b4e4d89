"""The framework seam (issues 35, 52): a fifth framework in one folder under tests/
(tests/toy_framework/, NumPy underneath, named 'toy', with the shipped frameworks' module names)
runs through the regression study's grid (least squares and logistic), its figures and the
report, through the feed-mode study, through every section of the bench (its engine against its
own hand-written twin), and through the train study (its native toy model, its library's
optimizer and our L-BFGS, one run and a sweep with its figures and report), with no file under
study/ naming it; a Keras model on it is refused in one line. Each command runs in a fresh
process with CONVERGENCE_STUDY_BACKENDS naming the folder, as a user's would (the sweep's runs
inherit it).
An unknown framework is one clear error everywhere."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.frameworks import registry

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "toy_framework"


def study(*args, plugins: str = str(TOY)) -> subprocess.CompletedProcess:
    """`python -m study ARGS` in a fresh process with the toy backend registered."""
    env = {**os.environ, registry.PLUGINS: plugins, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run([sys.executable, "-m", "study", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def one_line(done: subprocess.CompletedProcess) -> str:
    err = done.stderr.strip()
    assert done.returncode == 2 and len(err.splitlines()) == 1, done.stderr[-3000:]
    return err


def test_the_toy_backend_runs_the_regression_grid_figures_and_report(tmp_path):
    config = tmp_path / "toy.toml"
    config.write_text('name = "toy"\nrepeats = 1\nseeds = [0, 1]\n[stopping]\nmax_iter = 500\n'
                      '[[datasets]]\nname = "synthetic"\nn = 200\n'
                      '[[optimizers]]\nname = "gd"\nstep = "1/L"\n[[optimizers]]\nname = "lbfgs"\n'
                      '[[backends]]\nname = "numpy"\n[[backends]]\nname = "toy"\n'
                      'chunk = [1, 4]\n')
    results, figures, reports = tmp_path / "results", tmp_path / "figures", tmp_path / "reports"
    ok(study("run", config, "--out", results / "regression", "--quiet", "--no-adaptive"))
    runs = pd.read_parquet(results / "regression" / "runs.parquet")
    toy = runs[runs["backend"] == "toy"]
    assert len(toy) == 2 * len(runs) / 3 and set(toy["status"]) == {"converged"}, runs["message"]
    assert sorted(toy["option_chunk"]) == [1] * 4 + [4] * 4  # its own option, a column
    # NumPy under another name: the same iterations as NumPy's runs, instance by instance
    key = ["optimizer", "seed", "dtype"]
    both = toy.merge(runs[runs["backend"] == "numpy"], on=key, suffixes=("", "_numpy"))
    assert len(both) == len(toy)
    assert (both["iterations"] == both["iterations_numpy"]).all()
    ok(study("figures", "regression", "--results", results / "regression",
             "--out", figures / "regression"))
    assert (figures / "regression" / "headline.png").is_file()
    ok(study("report", "--results", results, "--studies", "regression", "--figures", figures,
             "--out", reports))
    assert "toy/cpu" in (reports / "report.md").read_text()
    assert "toy" in ok(study("regress", "--help"))  # --backend's help lists it
    out = tmp_path / "one.parquet"  # and regress takes its option as a flag, of its type
    ok(study("regress", "--rows", 300, "--backend", "toy", "--chunk", 4, "--out", out))
    assert pd.read_parquet(out)["backend"].tolist() == ["toy"]


def test_the_toy_backend_runs_logistic_regression_as_numpy_does(tmp_path):
    """L2-regularized logistic regression (L-BFGS, strong Wolfe) on the toy: converged in
    NumPy's iterations on the same instance."""
    rows = {}
    for name in ("numpy", "toy"):
        out = tmp_path / f"{name}.parquet"
        ok(study("regress", "--dataset", "synthetic-logistic", "--rows", 300, "--data-param",
                 "d=4", "--optimizer", "lbfgs", "--backend", name, "--out", out))
        rows[name] = pd.read_parquet(out).iloc[0]
    assert rows["toy"]["backend"] == "toy" and rows["toy"]["status"] == "converged"
    assert rows["toy"]["iterations"] == rows["numpy"]["iterations"] > 1


def test_the_figures_draw_the_toy_engine_in_its_declared_style_after_the_others():
    code = ("from study.regression import style, figures; "
            "print(style.engine_style('toy/cpu') == ((0, (1, 1, 5, 1)), '*'), "
            "style.ENGINE_ORDER[-2:] == ('toy', 'toy+gram'), figures.FEED_ORDER[-1])")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False, env={**os.environ, registry.PLUGINS: str(TOY)})
    assert ok(done).split() == ["True", "True", "toy"]


def test_the_toy_framework_runs_the_feedmode_study_figures_and_report(tmp_path):
    results, figures, reports = tmp_path / "results", tmp_path / "figures", tmp_path / "reports"
    ok(study("feedmode", "--modes", "toy-numpy", "toy-resident", "--n", 8, "--calls", 2,
             "--check-n", 4, "--out", results / "feedmode", "--quiet"))
    runs = pd.read_parquet(results / "feedmode" / "runs.parquet")
    assert set(runs["mode"]) == {"toy-numpy", "toy-resident"}
    assert set(runs["status"]) == {"ok"} and set(runs["framework"]) == {"toy"}
    ok(study("figures", "feedmode", "--results", results / "feedmode", "--out",
             figures / "feedmode"))
    ok(study("report", "--results", results, "--studies", "feedmode", "--figures", figures,
             "--out", reports))
    text = (reports / "report.md").read_text()
    assert "The same question on Toy" in text and "toy-numpy" in text


# `make bench` (`study bench`) on a plan measuring the toy in every section, tiny sizes
TOY_BENCH = """
from dataclasses import replace
from study.bench import plan
plan.FULL = replace(
    plan.FULL, name="toy", rows=400, dtypes=("float64",), formulations=("data", "gram"),
    optimizers=("gd",), backends=("numpy", "toy"), data_iterations=2, gram_iterations=2,
    repeats=1, read_repeats=1, overhead_repeats=1, overhead_gram_iterations=2,
    overhead_backends=("toy",), trace_backends=("toy",), scaling_n=(300, 600), scaling_d=(3,),
    scaling_d_rows=300, scaling_methods=(("gd", "toy", "data"),), scaling_iterations=2,
    scaling_repeats=1, scaling_time_budget=2.0, feed_n=4, feed_dtypes=("float32",),
    feed_frameworks=("toy",), feed_calls=1, target_repeats=1,
    target_candidates=(("lbfgs", "toy", "data"),), harness_rows=(400,),
    harness_small=((200, 110),), harness_dtypes=("float64",), harness_backends=("toy",),
    harness_iterations=2,
    harness_repeats=1, bandwidth_rows=(400,), bandwidth_dtypes=("float64",),
    bandwidth_backends=("toy",), bandwidth_iterations=2, bandwidth_repeats=1, probe_rows=400,
    peer_problems=(("least-squares", 100, 3),), peer_iterations=2, peer_long_iterations=120,
    peer_max_iter=200, peer_repeats=1, peer_sweep_runs=0)
from study.__main__ import run
run()
"""


def test_the_bench_measures_the_toy_engine_against_its_own_twin_in_every_section(tmp_path):
    """Every section of `make bench` has rows for the toy's engine (the registry's), measured:
    against the hand-written loops and the copy of its own twin (toy_framework/twin.py), its
    feed modes against their floor."""
    out = tmp_path / "bench"
    done = subprocess.run([sys.executable, "-c", TOY_BENCH, "bench", "--out", out], cwd=ROOT,
                          capture_output=True, text=True, check=False, timeout=600,
                          env={**os.environ, registry.PLUGINS: str(TOY)})
    ok(done)
    tables = {p.stem: pd.read_parquet(p) for p in out.glob("*.parquet")}
    assert set(tables) == {"iterations", "overhead", "scaling", "slopes", "feedmode", "target",
                           "harness", "bandwidth", "peer"}  # peer: NumPy's against SciPy
    for name in ("iterations", "overhead", "scaling", "target", "harness", "bandwidth"):
        toy = tables[name][tables[name]["backend"] == "toy"]
        assert len(toy) and set(toy["status"]) == {"ok"}, (name, toy.get("message"))
    assert set(tables["overhead"]["check"]) == {"harness", "trace", "trace-wall"}
    for name in ("overhead", "harness"):  # divided by its twin's hand-written loops
        assert (tables[name]["ratio"] > 0).all(), name
    assert (tables["bandwidth"]["fraction_of_copy"] > 0).all()  # by its twin's copy
    feed = tables["feedmode"]
    assert set(feed["mode"]) == {"toy-numpy", "toy-resident"} and set(feed["status"]) == {"ok"}
    assert "no hand-written loop" not in (out / "bench.txt").read_text()


TOY_TRAIN = """kind = "train"
name = "toy-train"
seeds = [0, 1]
backends = ["toy"]

[[problems]]
name = "toy"
model = "{model}"
data = {{ name = "eve-late-week", rows = 600 }}
loss = "binary_crossentropy"
metric = "accuracy"
batch_size = 32
target = {{ metric = "val_loss", value = 0.01 }}
stopping = {{ max_steps = 6 }}

[[optimizers]]
name = "toy:sgd"
learning_rate = 0.02

[[optimizers]]
name = "lbfgs"
"""


def test_the_toy_framework_runs_the_train_study(tmp_path):
    """Issue 42: the train study reads a framework through its registry entry's adapter only, so
    the toy's file is all it takes: a native toy model trains with its library's optimizer and
    with our L-BFGS (the one flat objective: the toy's value_and_grad), as one run and as a sweep
    whose figures and report draw it."""
    model = f"{TOY / 'train.py'}:linear"
    out = tmp_path / "one.parquet"
    ok(study("train", "--model", model, "--data", "eve-late-week", "--data-param", "rows=600",
             "--loss", "binary_crossentropy", "--optimizer", "lbfgs", "--backend", "toy",
             "--target", "val_loss=0.01", "--max-steps", 4, "--out", out))
    row = pd.read_parquet(out).iloc[0]
    assert (row["backend"], row["model_kind"], row["status"], row["steps"]) == (
        "toy", "toy-linear", "timeout", 4)
    assert row["val_loss"] < row["initial_val_loss"] and row["loss_evaluations"] >= 4
    assert "toy" in ok(study("train", "--help"))  # --backend's help lists it
    config = tmp_path / "toy-train.toml"
    config.write_text(TOY_TRAIN.format(model=model))
    results, figures, reports = tmp_path / "results", tmp_path / "figures", tmp_path / "reports"
    ok(study("run", config, "--out", results / "toy-train", "--quiet", "--no-adaptive"))
    runs = pd.read_parquet(results / "toy-train" / "runs.parquet")
    assert len(runs) == 4 and set(runs["backend"]) == {"toy"}, runs.get("message")
    assert set(runs["status"]) == {"timeout"}, runs["message"].tolist()
    assert set(runs["optimizer_library"]) == {"toy", "ours"}
    assert (runs["val_loss"] < runs["initial_val_loss"]).all()
    ok(study("figures", "train", "--results", results / "toy-train", "--out",
             figures / "toy-train"))
    assert (figures / "toy-train" / "headline.png").is_file()
    ok(study("report", "--results", results, "--studies", "toy-train", "--figures", figures,
             "--out", reports))
    assert "toy:sgd" in (reports / "report.md").read_text()


def test_the_train_study_refuses_a_keras_model_on_the_toy_backend_in_one_line():
    """Keras has no backend for it: a Keras model on it is one line naming Keras."""
    err = one_line(study("train", "--backend", "toy", "--model", "eve-mlp",
                         "--data", "eve-late-week", "--target", "0.5"))
    assert "toy" in err.lower() and "Keras" in err


def test_the_toy_backend_is_unknown_without_its_folder(tmp_path):
    err = one_line(study("regress", "--rows", "300", "--backend", "toy", plugins=""))
    assert "unknown backend 'toy'; allowed: numpy, tensorflow, jax, torch, cupy" in err


# --- an unknown framework is one clear error everywhere ---------------------------------------

def test_an_unknown_framework_is_one_line_everywhere(tmp_path, monkeypatch):
    from study.feedmode.model import modes_of

    message = "unknown framework 'nope'; allowed: tensorflow, keras, jax, torch, cupy"
    with pytest.raises(InputError, match=message):
        registry.framework("nope")
    with pytest.raises(InputError, match=message):
        modes_of("nope")
    with pytest.raises(InputError, match=message):  # a backend on a framework never declared
        registry.register(registry.Backend("orphan", "nope", "numpy", "ndarray"))
    assert "orphan" not in registry.BACKENDS
    err = one_line(study("feedmode", "--modes", "nope", "--out", tmp_path / "f"))
    assert "unknown value 'nope'" in err and not (tmp_path / "f").exists()


@pytest.mark.parametrize("plugins, words", [
    ("/no/such/file.py", "CONVERGENCE_STUDY_BACKENDS: no file '/no/such/file.py'"),
    ("no_such_module_anywhere", "CONVERGENCE_STUDY_BACKENDS: cannot import "
                                "'no_such_module_anywhere'"),
    ("/no/such/folder", "CONVERGENCE_STUDY_BACKENDS: no folder '/no/such/folder'"),
    (str(ROOT / "docs"), f"folder '{ROOT / 'docs'}' has no __init__.py"),
    (str(ROOT / "tests" / "toy_study"), f"'{ROOT / 'tests' / 'toy_study'}' declares no BACKEND")])
def test_a_bad_plugin_is_one_line(plugins, words):
    assert words in one_line(study("regress", "--rows", "300", plugins=plugins))


def test_a_plugin_folder_named_like_another_module_is_one_line(tmp_path):
    """Imported under its folder's name, it would stand in for the toolkit's `datasets`."""
    folder = tmp_path / "datasets"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    err = one_line(study("regress", "--rows", 300, plugins=str(folder)))
    assert "would be imported as 'datasets', the name of another module" in err


def test_a_plugin_folder_that_fails_to_import_is_one_line(tmp_path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "__init__.py").write_text("import no_such_module_anywhere\n")
    assert (f"CONVERGENCE_STUDY_BACKENDS: cannot import '{folder}': No module named "
            "'no_such_module_anywhere'") in one_line(study("regress", "--rows", 300,
                                                           plugins=str(folder)))


def test_the_toy_folder_has_the_shipped_frameworks_module_names():
    """Its modules are the ones a shipped framework's folder has (study/frameworks/<name>/)."""
    shipped = {p.name for p in (ROOT / "study" / "frameworks").glob("*/*.py")}
    own = {p.name for p in TOY.glob("*.py")}
    assert own == {"__init__.py", "backend.py", "feedmode.py", "train.py", "twin.py"} <= shipped
    assert not (ROOT / "tests" / "toy_backend.py").exists()


def test_nothing_under_study_names_the_toy():
    """The toy comes in through CONVERGENCE_STUDY_BACKENDS only: no file of the toolkit names it
    (nor its folder, modes, model kind or optimizer)."""
    named = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((ROOT / "study").rglob("*"))
             if p.is_file() and p.suffix != ".pyc"
             for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if re.search(r"(?i)\btoy", line)]
    assert not named


def test_the_registry_says_which_frameworks_the_train_study_can_run():
    """Those whose entry names a train adapter; Keras's backends among them."""
    from study.train.frameworks import adapter, keras_frameworks

    assert [n for n, f in registry.FRAMEWORKS.items() if f.train] == ["tensorflow", "jax", "torch"]
    assert keras_frameworks() == ("tensorflow", "jax", "torch")
    assert all(callable(adapter(n).flat_value_and_grad) for n in keras_frameworks())
    assert registry.framework("jax").trainable().name == "jax"
    with pytest.raises(InputError, match=r"^the train study runs Keras models, and Keras has no "
                                         r"CuPy backend; allowed: tensorflow, jax, torch$"):
        registry.framework("cupy").trainable()
