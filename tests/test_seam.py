"""The framework seam (issue 35): a fifth framework declared in one file under tests/
(tests/toy_backend.py, NumPy underneath, named 'toy') runs through the regression study's grid,
its figures and the report, through the feed-mode study, and through the bench (an engine of
its own, said to have no hand-written twin), and through the train study (its native toy model,
its library's optimizer and our L-BFGS, one run and a sweep with its figures and report), with
no other file changed; a Keras model on it is refused in one line. Each command runs in a fresh
process with CONVERGENCE_STUDY_BACKENDS naming the file, as a user's would (the sweep's runs
inherit it).
An unknown framework is one clear error everywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from datasets.errors import InputError
from study.frameworks import registry

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "tests" / "toy_backend.py"


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


BENCH_WITH_THE_TOY = """
from dataclasses import replace
from study.bench import plan
from study.bench.command import run_bench
from study.bench.render import render
from study.bench.sections.harness import engines
print(plan.engine("toy"), ("toy", "") in engines("cpu"))
tiny = replace(plan.QUICK, name="toy", rows=400, dtypes=("float64",), formulations=("data",),
               optimizers=("gd",), backends=("toy",), data_iterations=2, repeats=1,
               read_repeats=1, overhead_backends=("toy",), trace_backends=(),
               harness_rows=(400,), harness_backends=("toy",), harness_iterations=2,
               harness_repeats=1, bandwidth_rows=(400,), bandwidth_backends=("toy",),
               bandwidth_iterations=2, bandwidth_repeats=1, probe_rows=400)
print(render(run_bench(tiny, ("iterations", "overhead", "harness", "bandwidth")), tiny, 0))
"""


def test_the_bench_measures_the_toy_engine_and_says_it_has_no_twin():
    """The bench's engines are the registry's: the toy's is one, measured (passes per
    iteration), and the bench says it has no hand-written loop and no copy measurement."""
    done = subprocess.run([sys.executable, "-c", BENCH_WITH_THE_TOY], cwd=ROOT,
                          capture_output=True, text=True, check=False, timeout=300,
                          env={**os.environ, registry.PLUGINS: str(TOY)})
    lines = ok(done).splitlines()
    assert lines[0] == "('toy', {}) True"
    passes = [line for line in lines if line.split()[:2] == ["gd", "toy"]]
    assert passes and "unavailable" not in passes[0] and "error" not in passes[0]
    # overhead and harness: no hand-written loop; bandwidth (GD, L-BFGS): no copy to divide by
    assert sum(line.endswith("unavailable: no hand-written loop for toy") for line in lines) == 2
    assert sum(line.endswith("unavailable: no copy measurement for toy") for line in lines) == 2


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
    model = f"{TOY}:linear"
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


def test_the_toy_backend_is_unknown_without_its_file(tmp_path):
    err = one_line(study("regress", "--rows", "300", "--backend", "toy", plugins=""))
    assert "unknown backend 'toy'; allowed: numpy, tensorflow, jax, torch, cupy" in err


# --- an unknown framework is one clear error everywhere ---------------------------------------

def test_an_unknown_framework_is_one_line_everywhere(tmp_path, monkeypatch):
    from study.feedmode.model import modes_of

    message = "unknown framework 'nope'; allowed: tensorflow, jax, torch, cupy"
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
                                "'no_such_module_anywhere'")])
def test_a_bad_plugin_name_is_one_line(plugins, words):
    assert words in one_line(study("regress", "--rows", "300", plugins=plugins))


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
