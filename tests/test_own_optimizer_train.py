"""A framework's own optimizer from a file in the train study (issue 54 item 2): a
torch.optim.Optimizer subclass on a native PyTorch model, a function returning an optax
GradientTransformation on a native JAX model, a Keras optimizer class on a Keras model, each named
`path.py:Name` in `study train --optimizer` and a config's [[optimizers]], checked as the
library's own names are, its rows carrying the file and its hash, the file in the fingerprint;
a broken file is one line, exit 2, no row."""

import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.__main__ import main as cli
from study.sweep.grid import ConfigError
from study.train.plugin import code_files
from study.train.run.native_optimizers import file_library, library_of
from study.train.sweep.config import expand_specs

pytest.importorskip("torch")
pytest.importorskip("optax")
pytest.importorskip("keras")

SPARSE = "sparse_categorical_crossentropy"

TORCH_FILE = '''
import torch


class SignMomentum(torch.optim.Optimizer):
    def __init__(self, params, lr=0.003, momentum=0.9):
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                buf = self.state[p].setdefault("buf", torch.zeros_like(p))
                buf.mul_(group["momentum"]).add_(p.grad)
                p.add_(buf.sign(), alpha=-group["lr"])


class Exploding(SignMomentum):
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad / 0.0)


class MyLBFGS(torch.optim.LBFGS):
    pass


def not_a_class():
    return 1
'''

OPTAX_FILE = '''
import optax


def decayed_adam(learning_rate=0.01, decay=0.999):
    return optax.chain(optax.scale_by_adam(),
                       optax.scale_by_schedule(optax.exponential_decay(1.0, 1, decay)),
                       optax.scale(-learning_rate))


def my_lbfgs():
    return optax.lbfgs()


def three(learning_rate=0.1):
    return 3
'''

KERAS_FILE = '''
import keras


class PlainSGD(keras.optimizers.Optimizer):
    def __init__(self, learning_rate=0.1, name="plain_sgd", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        lr = keras.ops.cast(learning_rate, variable.dtype)
        self.assign_sub(variable, keras.ops.multiply(gradient, lr))


class Exploding(PlainSGD):
    def update_step(self, gradient, variable, learning_rate):
        self.assign_sub(variable, gradient * float("inf"))


class NotAnOptimizer:
    pass
'''

NEITHER = "import numpy as np\n\n\ndef step():\n    return np.zeros(1)\n"
BOTH = "import optax\nimport torch\n\n\ndef step():\n    return None\n"


@pytest.fixture
def files(tmp_path):
    """The three files in a user's folder, outside the checkout."""
    folder = tmp_path / "mine"
    folder.mkdir()
    for name, text in (("my_torch.py", TORCH_FILE), ("my_optax.py", OPTAX_FILE),
                       ("my_keras.py", KERAS_FILE), ("neither.py", NEITHER),
                       ("both.py", BOTH)):
        (folder / name).write_text(text)
    return folder


def train(tmp_path, capsys, model, optimizer, *args):
    """`python -m study train ... --out` in process: (exit code, stderr, the row or None)."""
    out = tmp_path / "row.parquet"
    code = cli(["train", "--model", model, "--data", "digits", "--optimizer", optimizer, *args,
                "--out", str(out)])
    err = capsys.readouterr().err.strip()
    return code, err, pd.read_parquet(out).iloc[0].to_dict() if out.exists() else None


def test_a_file_s_library_is_read_off_its_imports_before_anything_runs(files):
    assert library_of(f"{files}/my_torch.py:SignMomentum") == "torch"
    assert library_of(f"{files}/my_optax.py:decayed_adam") == "optax"
    assert library_of(f"{files}/my_keras.py:PlainSGD") == "keras"
    assert library_of(f"{files}/nowhere.py:X") == ""  # a vanished file: no library
    for name, words in (("neither.py:step", "it imports none of them"),
                        ("both.py:step", "it imports optax and torch")):
        with pytest.raises(InputError, match=words):
            file_library(f"{files}/{name}")


CONFIG_PROBLEMS = [{"name": name, "model": model, "data": {"name": "digits"}, "loss": SPARSE,
                    "metric": "accuracy", "target": {"metric": "val_loss", "value": 0.5}}
                   for name, model in (("k", "digits-cnn"), ("t", "digits-cnn-torch"),
                                       ("j", "digits-cnn-jax"))]


def test_a_config_plans_each_file_with_the_models_of_its_library(files, monkeypatch, capsys):
    monkeypatch.chdir(files)  # relative paths, made absolute when the config is read
    raw = {"kind": "train", "seeds": [0], "backends": ["jax", "torch"],
           "problems": CONFIG_PROBLEMS,
           "optimizers": [{"name": "my_torch.py:SignMomentum", "lr": 0.003},
                          {"name": "my_optax.py:decayed_adam", "learning_rate": 0.01},
                          {"name": "my_keras.py:PlainSGD", "learning_rate": 0.1}]}
    specs = expand_specs(raw, "c.toml", "c", 1)
    torch_file, optax_file, keras_file = (f"{files}/my_torch.py:SignMomentum",
                                          f"{files}/my_optax.py:decayed_adam",
                                          f"{files}/my_keras.py:PlainSGD")
    assert {(s.model, s.optimizer, s.backend) for s in specs} == {
        ("digits-cnn", keras_file, "jax"), ("digits-cnn", keras_file, "torch"),
        ("digits-cnn-torch", torch_file, "torch"), ("digits-cnn-jax", optax_file, "jax")}
    assert "not run:" in capsys.readouterr().err
    for spec in specs:  # the file's content is in the rows' fingerprint
        assert str(files / spec.optimizer.rpartition(":")[0].rpartition("/")[2]) in \
            code_files(spec)
        assert "optimizers/from_file.py" in code_files(spec)


@pytest.mark.parametrize("optimizer, words", [
    ({"name": "my_torch.py:Exploding"}, "the first step is not finite"),
    ({"name": "my_torch.py:MyLBFGS"}, "MyLBFGS steps with a closure"),
    ({"name": "my_torch.py:SignMomentum", "lr": -1.0}, "lr must be"),
    ({"name": "my_optax.py:three"}, "is not an optimizer (it gives int"),
    ({"name": "my_keras.py:PlainSGD", "learning_rate": -1.0}, "learning_rate must be"),
    ({"name": "my_keras.py:NotAnOptimizer"}, "is not a Keras optimizer class"),
    ({"name": "neither.py:step"}, "it imports none of them"),
    ({"name": "nowhere.py:X"}, "no such file"),
])
def test_a_broken_file_in_a_config_is_one_line(files, monkeypatch, optimizer, words):
    monkeypatch.chdir(files)
    raw = {"kind": "train", "seeds": [0], "backends": ["jax", "torch"],
           "problems": CONFIG_PROBLEMS, "optimizers": [optimizer]}
    with pytest.raises(ConfigError) as caught:
        expand_specs(raw, "c.toml", "c", 1)
    assert words in str(caught.value) and "\n" not in str(caught.value), caught.value


CASES = [("digits-cnn-torch", "my_torch.py:SignMomentum", ["lr=0.003"], "torch", "torch"),
         ("digits-cnn-jax", "my_optax.py:decayed_adam", ["learning_rate=0.01"], "jax", "optax"),
         # a Keras model on TensorFlow: Keras keeps the backend of its first import in this
         # process (the command's own process takes any: KERAS_BACKEND is set before Keras)
         ("digits-cnn", "my_keras.py:PlainSGD", ["learning_rate=0.1"], "tensorflow", "keras")]


@pytest.mark.slow
@pytest.mark.parametrize("model, optimizer, params, backend, library", CASES,
                         ids=[c[2 - 1].partition(".")[0] for c in CASES])
def test_a_file_s_optimizer_reaches_the_target_and_its_row_names_the_file(
        files, tmp_path, capsys, monkeypatch, model, optimizer, params, backend, library):
    monkeypatch.chdir(files)
    args = ["--backend", backend, "--target", "val_loss=0.5", "--max-steps", "3000"]
    for param in params:
        args += ["--opt-param", param]
    code, err, row = train(tmp_path, capsys, model, optimizer, *args)
    assert code == 0, err
    assert row["status"] == "reached", row["message"]
    assert row["optimizer"] == str(files / optimizer)
    assert row["optimizer_library"] == library
    assert row["optimizer_file"] == str(files / optimizer.partition(":")[0])
    assert len(row["optimizer_file_sha256"]) == 16


BROKEN = [
    ("digits-cnn-torch", "my_torch.py:Exploding", [], "the first step is not finite"),
    ("digits-cnn-torch", "my_torch.py:MyLBFGS", [], "MyLBFGS steps with a closure"),
    ("digits-cnn-torch", "my_torch.py:not_a_class", [], "is not a torch.optim.Optimizer"),
    ("digits-cnn-torch", "my_torch.py:SignMomentum", ["lr=-1"], "lr must be"),
    ("digits-cnn-torch", "my_torch.py:Missing", [], "defines no 'Missing'"),
    ("digits-cnn-jax", "my_optax.py:my_lbfgs", [], "update raised TypeError"),
    ("digits-cnn-jax", "my_optax.py:three", [], "is not an optimizer (it gives int"),
    ("digits-cnn-jax", "my_optax.py:decayed_adam", ["lr=1"], "has no parameter 'lr'"),
    ("digits-cnn", "my_keras.py:Exploding", [], "the first step is not finite"),
    ("digits-cnn", "my_keras.py:NotAnOptimizer", [], "is not a Keras optimizer class"),
    ("digits-cnn", "my_keras.py:PlainSGD", ["learning_rate=-1"], "learning_rate must be"),
    ("digits-cnn", "my_torch.py:SignMomentum", [], "is a PyTorch optimizer"),
    ("digits-cnn-torch", "neither.py:step", [], "it imports none of them"),
    ("digits-cnn-torch", "nowhere.py:X", [], "no such file"),
]


@pytest.mark.slow
@pytest.mark.parametrize("model, optimizer, params, words", BROKEN,
                         ids=[f"{c[1]}{'-' + c[2][0] if c[2] else ''}" for c in BROKEN])
def test_a_broken_file_is_one_line_exit_2_no_row(files, tmp_path, capsys, monkeypatch, model,
                                                   optimizer, params, words):
    monkeypatch.chdir(files)
    args = ["--backend", "tensorflow" if model == "digits-cnn" else model.rpartition("-")[2],
            "--target", "val_loss=0.5", "--max-steps", "20"]
    for param in params:
        args += ["--opt-param", param]
    code, err, row = train(tmp_path, capsys, model, optimizer, *args)
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert row is None


SWEEP = """
kind = "train"
name = "mine"
seeds = [0]
backends = ["torch", "jax"]
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

[[problems]]
name = "digits-jax"
model = "digits-cnn-jax"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 128
eval_every = 5
target = { metric = "val_loss", value = 1.6 }
stopping = { max_steps = 200 }

[[optimizers]]
name = "my_torch.py:SignMomentum"
lr = 0.003

[[optimizers]]
name = "my_optax.py:decayed_adam"
learning_rate = 0.01

[[optimizers]]
name = "torch:Adam"
lr = 0.01
"""


@pytest.mark.slow
def test_a_sweep_runs_both_files_and_an_edit_remeasures_its_rows_only(files, tmp_path,
                                                                      monkeypatch, capsys):
    """The acceptance: an optax transformation and a torch optimizer from files run in the
    train study; editing one re-measures its rows and only those."""
    monkeypatch.chdir(files)
    (files / "sweep.toml").write_text(SWEEP)
    out = tmp_path / "results"
    args = ["run", "sweep.toml", "--out", str(out), "--quiet", "--no-adaptive"]
    assert cli(args) == 0
    first = pd.read_parquet(out / "runs.parquet").set_index("optimizer")
    mine_torch, mine_optax = str(files / "my_torch.py:SignMomentum"), \
        str(files / "my_optax.py:decayed_adam")
    assert set(first.index) == {mine_torch, mine_optax, "torch:Adam"}
    assert set(first["status"]) == {"reached"}, first[["status", "message"]]
    assert first.loc[mine_torch, "optimizer_file"] == str(files / "my_torch.py")
    assert first.loc[mine_optax, "optimizer_library"] == "optax"
    capsys.readouterr()
    assert cli(["summarize", str(out)]) == 0  # labelled as the library's names are
    shown = capsys.readouterr().out
    assert "torch:SignMomentum" in shown and "optax:decayed_adam" in shown, shown
    assert str(files) not in shown
    figures = tmp_path / "figures"
    assert cli(["figures", "train", "--results", str(out), "--out", str(figures)]) == 0
    assert any(figures.glob("*.png"))
    (files / "my_torch.py").write_text(TORCH_FILE + "# an edit\n")
    capsys.readouterr()
    assert cli(args) == 0
    second = pd.read_parquet(out / "runs.parquet").set_index("optimizer")
    assert second.loc[mine_torch, "sweep_id"] != first.loc[mine_torch, "sweep_id"]
    assert second.loc[mine_torch, "optimizer_file_sha256"] != \
        first.loc[mine_torch, "optimizer_file_sha256"]
    for same in (mine_optax, "torch:Adam"):
        assert second.loc[same, "sweep_id"] == first.loc[same, "sweep_id"]
