"""Native models through the train study's command and sweep (study.train.run.measure's native
path): a native PyTorch example and a pure-JAX pair reach an explicit target through `python -m
study train` with their library's optimizer and with lbfgs, starting from their Keras twin's
weights; bad native models are one line, exit 2, nothing written; a config plans a native example on
its own framework only (said once); a small sweep with a native problem runs, summarizes, draws and
reports."""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.__main__ import main as cli
from study.sweep.grid import ConfigError
from study.train.sweep.config import expand_specs
from study.train.sweep.spec import Spec

pytest.importorskip("torch")
pytest.importorskip("optax")

SPARSE = "sparse_categorical_crossentropy"


def train(tmp_path, capsys, *args):
    """`python -m study train ... --out` in process: (exit code, stderr, the row or None)."""
    out = tmp_path / "row.parquet"
    code = cli(["train", "--data", "digits", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    row = pd.read_parquet(out).iloc[0].to_dict() if out.exists() else None
    return code, err, row


CASES = [("digits-cnn-torch", "torch:Adam", ["lr=0.01"], "torch", "torch"),
         ("digits-cnn-torch", "lbfgs", [], "torch", "ours"),
         ("digits-cnn-jax", "optax:adam", ["learning_rate=0.01"], "jax", "optax"),
         ("digits-cnn-jax", "lbfgs", [], "jax", "ours")]


@pytest.mark.slow
@pytest.mark.parametrize("model,optimizer,params,backend,library", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_native_example_reaches_its_target_through_the_command(tmp_path, capsys, model,
                                                                  optimizer, params, backend,
                                                                  library):
    args = ["--model", model, "--optimizer", optimizer, "--target", "val_loss=0.35",
            "--max-steps", "2000"]
    for param in params:
        args += ["--opt-param", param]
    code, err, row = train(tmp_path, capsys, *args)  # --backend: the example's own framework
    assert code == 0, err
    assert row["status"] == "reached" and row["val_loss"] <= 0.35, row["message"]
    assert row["backend"] == backend and row["optimizer_library"] == library
    assert row["model_kind"] == ("torch.nn.Module" if backend == "torch" else "jax-pair")
    assert row["seconds_to_target"] is not None and row["n_train"] + row["n_val"] == 1797
    # its Keras twin's weights for the seed: the twin's validation loss, to float32 rounding
    assert row["initial_val_loss"] == pytest.approx(row["reference_val_loss"], rel=1e-4)
    trace = pd.read_parquet(tmp_path / "row.trace.parquet")
    assert trace["step"].iloc[0] == 0 and trace["val_loss"].iloc[-1] <= 0.35


@pytest.mark.slow
def test_an_initial_npz_is_loaded_and_recorded(tmp_path, capsys):
    rng = np.random.default_rng(3)
    shapes = [(3, 3, 1, 6), (6,), (54, 10), (10,)]
    path = tmp_path / "init.npz"
    np.savez(path, **{f"w{i}": (rng.uniform(-0.3, 0.3, s) if len(s) > 1 else np.zeros(s))
                      .astype(np.float32) for i, s in enumerate(shapes)})
    code, err, row = train(tmp_path, capsys, "--model", "digits-cnn-torch", "--optimizer",
                           "lbfgs", "--initial", str(path), "--target", "val_loss=0.35")
    assert code == 0, err
    assert row["initial"] == str(path) and row["reference_val_loss"] is None
    assert row["status"] == "reached"


BAD_MODELS = '''
import torch

class NoParameters(torch.nn.Module):
    def forward(self, x):
        return x[:, :1]

def no_parameters(input_shape, outputs):
    return NoParameters()

def wrong_outputs(input_shape, outputs):
    return torch.nn.Linear(input_shape[0], outputs + 2)

def non_scalar_loss(input_shape, outputs):
    return torch.nn.Linear(input_shape[0], outputs), lambda out, y: (out - y) ** 2

def fine(input_shape, outputs):
    return torch.nn.Linear(input_shape[0], outputs)
'''


@pytest.mark.parametrize("function,optimizer,words", [
    ("no_parameters", "torch:SGD", "has no trainable parameters"),
    ("wrong_outputs", "torch:SGD", "the data needs (2, 1)"),
    ("non_scalar_loss", "torch:SGD", "scalar"),
    ("fine", "optax:adam", "'optax:adam' is an optax (JAX) optimizer"),
    ("fine", "keras:Adam", "'keras:Adam' is a Keras optimizer"),
])
def test_a_bad_native_model_is_one_line_exit_2_nothing_written(tmp_path, capsys, function,
                                                                optimizer, words):
    (tmp_path / "bad.py").write_text(BAD_MODELS)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 3)).astype(np.float32)
    np.savez(tmp_path / "d.npz", x_train=x[:40], y_train=x[:40, 0], x_val=x[40:],
             y_val=x[40:, 0])
    out = tmp_path / "row.parquet"
    params = ["--opt-param", "lr=0.1"] if optimizer.startswith("torch:") else []
    code = cli(["train", "--model", f"{tmp_path / 'bad.py'}:{function}", "--data",
                str(tmp_path / "d.npz"), "--loss", "mse", "--metric", "mae", "--optimizer",
                optimizer, *params, "--backend", "torch", "--target", "val_loss=0.001",
                "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert not out.exists()


@pytest.mark.parametrize("args,words", [
    (["--model", "digits-cnn-torch", "--backend", "jax", "--optimizer", "torch:Adam"],
     "runs on torch only, not jax"),
    (["--model", "digits-cnn-jax", "--optimizer", "torch:Adam"], "is a PyTorch optimizer"),
    (["--model", "digits-cnn", "--optimizer", "optax:adam"], "is a Keras model"),
    (["--model", "digits-cnn-torch", "--optimizer", "torch:Adam", "--loop", "fit"],
     "--loop fit times Keras's model.fit"),
    (["--model", "digits-cnn-torch", "--optimizer", "adam"], "--optimizer: unknown 'adam'"),
    (["--model", "digits-cnn-torch", "--initial", "missing.npz"], "does not exist"),
    (["--model", "digits-cnn-torch", "--initial", "weights.txt"], "is not an .npz file"),
    (["--model", "digits-cnn", "--initial", "w.npz"], "is for native models"),
    (["--model", "digits-cnn-jax", "--optimizer", "optax:scale", "--opt-param", "step_size=0.1"],
     "--optimizer: optax:scale is not one of optax's optimizers (a building block"),
])
def test_a_mismatch_is_one_line_exit_2_nothing_written(tmp_path, capsys, args, words):
    code, err, row = train(tmp_path, capsys, "--target", "val_loss=0.35", *args)
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert row is None


def test_a_gpu_run_without_a_gpu_is_refused_for_a_native_model(tmp_path, capsys):
    from study.frameworks.registry import FRAMEWORKS

    if FRAMEWORKS["torch"].gpu_nodes_present():
        pytest.skip("a GPU is here")
    code, err, row = train(tmp_path, capsys, "--model", "digits-cnn-torch", "--optimizer",
                           "torch:Adam", "--device", "gpu", "--target", "val_loss=0.35")
    assert code == 2 and err.endswith("no GPU visible to PyTorch") and row is None, err


# ---- the config --------------------------------------------------------------------------------

def config(problems: list[dict], optimizers: list[dict], **top) -> dict:
    return {"kind": "train", "seeds": [0], "backends": ["tensorflow", "jax", "torch"], **top,
            "problems": problems, "optimizers": optimizers}


DIGITS = {"data": {"name": "digits"}, "loss": SPARSE, "metric": "accuracy",
          "target": {"metric": "val_loss", "value": 0.35}}


def test_a_native_example_is_planned_on_its_framework_only_and_said_once(capsys):
    raw = config([{"name": "k", "model": "digits-cnn", **DIGITS},
                  {"name": "t", "model": "digits-cnn-torch", **DIGITS},
                  {"name": "j", "model": "digits-cnn-jax", **DIGITS}],
                 [{"name": "keras:Adam"}, {"name": "torch:Adam", "lr": 0.01},
                  {"name": "optax:adam", "learning_rate": 0.01}, {"name": "lbfgs"}])
    specs = expand_specs(raw, "c.toml", "c", 1)
    planned = {(s.model, s.optimizer, s.backend) for s in specs}
    assert planned == {*(("digits-cnn", o, b) for o in ("keras:Adam", "lbfgs")
                         for b in ("tensorflow", "jax", "torch")),
                       ("digits-cnn-torch", "torch:Adam", "torch"),
                       ("digits-cnn-torch", "lbfgs", "torch"),
                       ("digits-cnn-jax", "optax:adam", "jax"), ("digits-cnn-jax", "lbfgs", "jax")}
    err = capsys.readouterr().err
    assert err.count("not run:") == 1 and "in problems k, t, j" in err, err
    assert "a native model runs on its own framework" in err


@pytest.mark.parametrize("problem,optimizer,words", [
    ({}, {"name": "torch:Adam", "lr": -1.0}, "lr"),
    ({}, {"name": "torch:Adam", "learning_rate": 0.1}, "has no parameter 'learning_rate'"),
    ({}, {"name": "torch:Adam", "lr": "tuned"}, "not mapped to torch's lr"),
    ({}, {"name": "torch:Adam", "learning_rate": "tuned"}, "not mapped to torch's lr"),
    ({}, {"name": "optax:adam"}, "needs learning_rate"),
    ({}, {"name": "mxnet:Adam"}, "unknown name 'mxnet:Adam'"),
    ({"initial": "nowhere.npz"}, {"name": "lbfgs"}, "does not exist"),
    ({"model": "digits-cnn", "initial": "nowhere.npz"}, {"name": "lbfgs"},
     "is for native models"),
    ({"loop": "fit"}, {"name": "lbfgs"}, "a native model runs loop = 'steps'"),
    # issue 43 case 14: optax's building blocks are not optimizers (scale adds +0.1 g: ascent)
    ({"model": "digits-cnn-jax"}, {"name": "optax:identity"},
     "optax:identity is not one of optax's optimizers"),
    ({"model": "digits-cnn-jax"}, {"name": "optax:scale", "step_size": 0.1},
     "optax:scale is not one of optax's optimizers"),
    ({"model": "digits-cnn-jax"}, {"name": "optax:scale_by_adam"},
     "optax:scale_by_adam is not one of optax's optimizers"),
    # issue 43 case 15: a count of 0 moves nothing (torch:LBFGS) or stores nothing
    ({}, {"name": "torch:LBFGS", "max_iter": 0}, "torch:LBFGS: max_iter must be an integer >= 1, "
                                                 "got 0"),
])
def test_a_bad_native_config_is_one_line(problem, optimizer, words):
    raw = config([{"name": "t", "model": "digits-cnn-torch", **DIGITS, **problem}], [optimizer])
    with pytest.raises(ConfigError, match=None) as caught:
        expand_specs(raw, "c.toml", "c", 1)
    assert words in str(caught.value) and "\n" not in str(caught.value), caught.value


def test_optax_optimizers_are_optax_s_own_list():
    """The list comes from optax (its alias module), so a new optax optimizer is taken and a
    building block never is; the refusal names the name and the list."""
    import optax

    from study.frameworks.jax.train import check_optimizer as check_optax_alias
    from study.frameworks.jax.train import optax_aliases

    aliases = optax_aliases()
    assert {"adam", "sgd", "adamw", "lbfgs", "lion"} <= set(aliases)
    assert not {"identity", "scale", "scale_by_adam", "chain", "tree_map_params"} & set(aliases)
    assert all(isinstance(getattr(optax, a), type(optax.adam)) for a in aliases)
    with pytest.raises(Exception, match=r"unknown optax optimizer 'adamm'; optax's optimizers: "
                                        r"adabelief, .*adam, .*sgd"):
        check_optax_alias("adamm")


@pytest.mark.parametrize("optimizer,hyperparameters,framework", [
    ("torch:LBFGS", {"max_iter": 0}, "torch"), ("torch:LBFGS", {"max_eval": 0}, "torch"),
    ("torch:LBFGS", {"history_size": 0}, "torch"), ("torch:LBFGS", {"max_iter": True}, "torch"),
    ("torch:LBFGS", {"max_iter": 2.5}, "torch"), ("optax:lbfgs", {"memory_size": 0}, "jax"),
])
def test_every_count_of_a_library_optimizer_is_an_integer_of_at_least_one(
        optimizer, hyperparameters, framework):
    """Issue 43 case 15: torch's LBFGS takes max_iter = 0 and moves nothing at every step (the
    run "times out" at its initial weights); the range checks covered history_size only."""
    from convergence_study.errors import InputError
    from study.train.run.native_optimizers import make_submission

    (key, value), = hyperparameters.items()
    with pytest.raises(InputError, match=f"^{optimizer}: {key} must be an integer >= 1, got "
                                         f"{value!r}$"):
        make_submission(optimizer, hyperparameters, framework)
    assert make_submission(optimizer, {key: 3}, framework)


def test_a_spec_without_initial_keeps_its_run_id():
    """`initial` and `problem` joined the spec after runs were recorded: None leaves the hashed
    content as it was, so earlier results stay valid; an .npz makes another run, a problem's
    name (what the report calls it) none."""
    import hashlib

    spec = Spec("train", "digits-cnn", {"name": "digits"}, SPARSE, "accuracy", "keras:Adam", {},
                "jax", 64, 0, {"metric": "val_loss", "value": 0.3, "how": "given"}, 0)
    old = {k: v for k, v in json.loads(spec.to_json()).items() if k not in ("initial", "problem")}
    assert spec.run_id == hashlib.sha256(json.dumps(old, sort_keys=True).encode()).hexdigest()[:16]
    assert spec.run_id == "dd55039c7c816353"  # as the code before either field gave it
    from dataclasses import replace

    assert replace(spec, initial="w.npz").run_id != spec.run_id
    assert replace(spec, problem="mine").run_id == spec.run_id
    assert Spec.from_json(spec.to_json()) == spec


# ---- a sweep with a native problem -------------------------------------------------------------

SWEEP = """
kind = "train"
name = "native"
seeds = [0, 1]
backends = ["jax", "torch"]
run_timeout = 120

[[problems]]
name = "digits-torch"
model = "digits-cnn-torch"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 128
eval_every = 5
target = { metric = "val_loss", value = 1.6 }
stopping = { max_steps = 200 }

[[optimizers]]
name = "torch:Adam"
lr = 0.01

[[optimizers]]
name = "optax:adam"
learning_rate = 0.01

[[optimizers]]
name = "lbfgs"
"""


@pytest.mark.slow
def test_a_sweep_with_a_native_problem_runs_summarizes_draws_and_reports(tmp_path, capsys):
    (tmp_path / "n.toml").write_text(SWEEP)
    results = tmp_path / "results"
    assert cli(["run", str(tmp_path / "n.toml"), "--out", str(results / "train"),
                "--quiet", "--no-adaptive"]) == 0
    err = capsys.readouterr().err
    assert "not run: 8 combinations" in err and "in problems digits-torch" in err, err
    runs = pd.read_parquet(results / "train" / "runs.parquet")
    assert len(runs) == 4 and set(runs["backend"]) == {"torch"}  # 2 optimizers x 2 seeds
    assert set(runs["status"]) == {"reached"}, runs[["status", "message"]]
    assert set(runs["optimizer_library"]) == {"torch", "ours"}
    assert set(runs["model_kind"]) == {"torch.nn.Module"}
    traces = pd.read_parquet(results / "train" / "traces.parquet")
    assert set(traces["run_id"]) == set(runs["run_id"])
    assert cli(["summarize", str(results / "train")]) == 0
    assert "digits-cnn-torch" in capsys.readouterr().out
    figures = tmp_path / "figures"
    assert cli(["figures", "train", "--results", str(results / "train"), "--out",
                str(figures / "train")]) == 0
    assert any(Path(figures / "train").glob("*.png"))
    assert cli(["report", "--results", str(results), "--studies", "train", "--figures",
                str(figures), "--out", str(tmp_path / "report")]) == 0
    assert "digits-cnn-torch" in (tmp_path / "report" / "report.md").read_text()


# ---- every check for every model kind, through the command (issue 42 item 2, issue 43 case 5) --

MNIST_NET = '''
def net(input_shape, outputs):
    """PyTorch's MNIST example Net (log_softmax, trained with F.nll_loss), for 8x8 digits: the
    data's rows arrive as they are (NHWC), so forward moves the channel first."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(256, 128)
            self.fc2 = nn.Linear(128, outputs)

        def forward(self, x):
            x = F.relu(self.conv1(x.permute(0, 3, 1, 2)))
            x = F.max_pool2d(F.relu(self.conv2(x)), 2)
            x = self.dropout1(torch.flatten(x, 1))
            x = self.dropout2(F.relu(self.fc1(x)))
            return F.log_softmax(self.fc2(x), dim=1)

    return Net()


def net_with_its_loss(input_shape, outputs):
    import torch.nn.functional as F
    return net(input_shape, outputs), F.nll_loss


def logits(input_shape, outputs):
    import torch
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, outputs))


def not_finite(input_shape, outputs):
    import torch
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, outputs),
                                torch.nn.Softmax(-1))
    with torch.no_grad():
        model[1].bias.fill_(float("inf"))
    return model
'''


ADAM = ["--optimizer", "torch:Adam"]


@pytest.mark.parametrize("function,args,words", [
    ("logits", ADAM, ["outputs logits (", f"give the loss as '{SPARSE}:from_logits'"]),
    ("net", ADAM, ["outputs log-probabilities (", "give the loss as 'nll'"]),
    ("net", ["--loss", "nll", "--optimizer", "lbfgs"],
     ["lbfgs needs a deterministic training objective, but the model has Dropout"]),
    ("not_finite", ADAM, ["gives non-finite outputs (NaN or inf) at its initial weights"]),
])
def test_a_model_whose_outputs_do_not_fit_is_one_line_exit_2_before_the_clock(
        tmp_path, capsys, function, args, words):
    (tmp_path / "m.py").write_text(MNIST_NET)
    code, err, row = train(tmp_path, capsys, "--model", f"{tmp_path / 'm.py'}:{function}",
                           "--backend", "torch", "--target", "val_loss=0.6", *args)
    assert code == 2 and len(err.splitlines()) == 1 and all(w in err for w in words), err
    assert row is None


@pytest.mark.slow
@pytest.mark.parametrize("function,args,loss", [
    ("net_with_its_loss", [], "torch.nn.functional.nll_loss"),
    ("net", ["--loss", "nll"], "nll"),
])
def test_pytorch_s_mnist_net_trains_with_its_nll_and_the_row_says_so(tmp_path, capsys, function,
                                                                     args, loss):
    """PyTorch's MNIST Net as written upstream (log_softmax), with F.nll_loss returned and no
    --loss, or with the NLL by name: trained to val_accuracy 0.95 with its own recipe
    (torch:Adadelta lr 1.0, batch 64); the row records the loss that ran."""
    (tmp_path / "m.py").write_text(MNIST_NET)
    code, err, row = train(tmp_path, capsys, "--model", f"{tmp_path / 'm.py'}:{function}",
                           "--backend", "torch", "--optimizer", "torch:Adadelta", "--opt-param",
                           "lr=1.0", "--target", "val_accuracy=0.95", *args)
    assert code == 0, err
    assert row["status"] == "reached" and row["val_metric"] >= 0.95, row["message"]
    assert row["loss"] == loss


@pytest.mark.slow
def test_a_sweep_records_non_finite_initial_outputs_as_an_error_not_diverged(tmp_path, capsys):
    (tmp_path / "m.py").write_text(MNIST_NET)
    (tmp_path / "n.toml").write_text(f"""
kind = "train"
name = "nan"
seeds = [0]
backends = ["torch"]
run_timeout = 120

[[problems]]
name = "nan"
model = "{tmp_path / 'm.py'}:not_finite"
data = {{ name = "digits" }}
loss = "{SPARSE}"
metric = "accuracy"
batch_size = 64
target = {{ metric = "val_loss", value = 0.6 }}
stopping = {{ max_steps = 50 }}

[[optimizers]]
name = "torch:Adam"
lr = 0.01
""")
    cli(["run", str(tmp_path / "n.toml"), "--out", str(tmp_path / "results"), "--quiet"])
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    assert list(runs["status"]) == ["error"], runs[["status", "message"]]
    assert "gives non-finite outputs" in runs["message"].iloc[0]


def test_a_problem_of_a_model_file_may_leave_the_loss_to_the_model(tmp_path):
    """A file.py:function may return its loss with the model (issue 42): its problem needs no
    `loss` (the run refuses one line if the model returns none); a shipped model still does."""
    (tmp_path / "net.py").write_text(MNIST_NET)
    without = {k: v for k, v in DIGITS.items() if k != "loss"}
    raw = config([{"name": "t", "model": f"{tmp_path / 'net.py'}:net_with_its_loss", **without}],
                 [{"name": "torch:Adam", "lr": 0.01}], backends=["torch"])
    specs = expand_specs(raw, "c.toml", "c", 1)
    assert [spec.loss for spec in specs] == [None]
    raw = config([{"name": "t", "model": "digits-cnn-torch", **without}],
                 [{"name": "torch:Adam", "lr": 0.01}], backends=["torch"])
    with pytest.raises(ConfigError, match="problems.*'loss' is required"):
        expand_specs(raw, "c.toml", "c", 1)
