"""The layout of the data's arrays, said and not guessed (issue 42 item 3), and the two real
clients shipped as examples (item 4): Keras's "simple MNIST convnet" and PyTorch's MNIST `Net`
on digits28, the 8x8 digits upscaled to 28x28.

The arrays reach the model as they are: a shape that does not fit is one line naming both
shapes and what to change; `layout = "channels_first"` moves the channel axis once, with the
cached arrays, before any clock."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.__main__ import main as cli
from study.train.models.data import load_data
from study.train.models.examples import digits, digits28

torch = pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent

NET_RECIPE = ["--loss", "nll", "--optimizer", "torch:Adadelta", "--opt-param", "lr=1.0"]

PAIR = '''
def nhwc_pair(input_shape, outputs):
    """A JAX pair whose apply takes channels-last rows (its conv says NHWC)."""
    import jax
    import jax.numpy as jnp

    def init(key):
        return {"w": jax.random.normal(key, (3, 3, 1, 8)) * 0.1, "d": jnp.zeros((8, outputs))}

    def apply(p, x):
        h = jax.lax.conv_general_dilated(x, p["w"], (1, 1), "VALID",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.softmax(h.mean((1, 2)) @ p["d"])

    return init, apply


def equinox_conv(input_shape, outputs, seed=0):
    """An Equinox module: its Conv2d takes channels-first rows (Equinox's convention)."""
    import equinox as eqx
    import jax

    class Conv(eqx.Module):
        conv: eqx.nn.Conv2d
        dense: eqx.nn.Linear

        def __call__(self, x):
            return jax.nn.softmax(self.dense(self.conv(x).mean((1, 2))))

    first, second = jax.random.split(jax.random.key(seed))
    return Conv(eqx.nn.Conv2d(1, 8, 3, key=first), eqx.nn.Linear(8, outputs, key=second))


def keras_28x28(input_shape, outputs):
    """A Keras model whose input is fixed at (28, 28, 1), whatever the data gives."""
    import keras

    return keras.Sequential([keras.Input((28, 28, 1)), keras.layers.Flatten(),
                             keras.layers.Dense(outputs, activation="softmax")])


def net_with_its_loss(input_shape, outputs):
    """PyTorch's MNIST Net, shipped, returned with F.nll_loss as a user's file would."""
    import torch.nn.functional as F

    from study.frameworks.torch.examples import mnist_net_torch

    return mnist_net_torch(input_shape, outputs), F.nll_loss
'''


def train(tmp_path, capsys, *args):
    """`python -m study train ... --out` in process: (exit code, stderr, the row or None)."""
    out = tmp_path / "row.parquet"
    code = cli(["train", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    row = pd.read_parquet(out).iloc[0].to_dict() if out.exists() else None
    return code, err, row


# ---- digits28 ---------------------------------------------------------------------------------

def test_digits28_is_the_digits_upscaled_to_28x28_with_labels_as_the_loss_takes_them():
    x, y = digits28()
    x8, y8 = digits()
    assert x.shape == (1797, 28, 28, 1) and x.dtype == np.float32
    assert 0.0 <= x.min() and x.max() <= 1.0
    assert np.array_equal(y, y8) and y.dtype == np.int64
    # the same images: each 8x8 pixel's 3.5x3.5 block keeps its level on average
    assert np.abs(x[:, 2::7, 2::7, 0].mean() - x8[:, ::2, ::2, 0].mean()) < 0.02
    _, one_hot = digits28(one_hot=True)
    assert one_hot.shape == (1797, 10) and np.array_equal(one_hot.argmax(1), y8)


# ---- layout ----------------------------------------------------------------------------------

def test_channels_first_moves_the_channel_axis_once_with_the_cached_arrays(tmp_path):
    from study.train.models.initial import data_folder, read_arrays

    stored = load_data({"name": "digits28"})
    moved = load_data({"name": "digits28", "layout": "channels_first"})
    assert moved["x_train"].shape[1:] == (1, 28, 28) and moved["x_train"].flags.c_contiguous
    assert np.array_equal(moved["x_val"], np.moveaxis(stored["x_val"], -1, 1))
    assert np.array_equal(moved["y_train"], stored["y_train"])
    as_stored = load_data({"name": "digits28", "layout": "channels_last"})
    assert np.array_equal(as_stored["x_train"], stored["x_train"])
    # the sweep's cache holds the arrays as the model receives them, one entry per layout
    cached = read_arrays(data_folder({"name": "digits28", "layout": "channels_first"},
                                     tmp_path))
    assert cached["x_train"].shape[1:] == (1, 28, 28)
    assert read_arrays(data_folder({"name": "digits28"}, tmp_path))["x_train"].shape[1:] \
        == (28, 28, 1)


@pytest.mark.parametrize("data,words", [
    ({"name": "digits", "layout": "nchw"}, "layout must be one of: channels_last, "
                                           "channels_first, got 'nchw'"),
    ({"name": "eve-late-week", "rows": 100, "layout": "channels_first"},
     "x_train has shape (80, 4): rows of features have no channel axis; leave layout out"),
    ({"name": "digits", "one_hot": 1}, "one_hot must be true or false"),
])
def test_a_bad_layout_is_one_line(data, words):
    with pytest.raises(InputError, match="^") as caught:
        load_data(data)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_the_layout_flag_is_checked_in_one_line_exit_2(tmp_path, capsys):
    code, err, row = train(tmp_path, capsys, "--model", "mnist-net-torch", "--data", "digits28",
                           "--layout", "nchw", *NET_RECIPE, "--target", "val_accuracy=0.95")
    assert code == 2 and row is None and len(err.splitlines()) == 1
    assert "--layout: unknown 'nchw'; allowed: channels_last, channels_first" in err


def test_a_problem_takes_a_layout_on_its_data_block():
    from study.sweep.grid import ConfigError
    from study.train.sweep.config import expand_specs

    def problem(data):
        return {"kind": "train", "name": "t", "seeds": [0], "backends": ["torch"],
                "problems": [{"name": "net", "model": "mnist-net-torch", "data": data,
                              "loss": "nll", "metric": "accuracy", "batch_size": 64,
                              "target": {"metric": "val_accuracy", "value": 0.95}}],
                "optimizers": [{"name": "torch:Adadelta", "lr": 1.0}]}

    laid = expand_specs(problem({"name": "digits28", "layout": "channels_first"}), "c.toml",
                        "t", 1)
    plain = expand_specs(problem({"name": "digits28"}), "c.toml", "t", 1)
    assert laid[0].data["layout"] == "channels_first"
    assert '"layout": "channels_first"' in laid[0].axes()["data_params"]
    assert laid[0].run_id != plain[0].run_id
    with pytest.raises(ConfigError, match="data: layout must be one of"):
        expand_specs(problem({"name": "digits28", "layout": "NCHW"}), "c.toml", "t", 1)


# ---- a shape that does not fit: one line, per model kind --------------------------------------

def test_channels_last_rows_to_a_channels_first_torch_model_one_line_with_the_layout_runs():
    from study.train.run.native_run import train as native_train

    recipe = {"loss": "nll", "metric": "accuracy", "optimizer": "torch:Adadelta",
              "hyperparameters": {"lr": 1.0}, "target": ("val_accuracy", 0.99, "max")}
    with pytest.raises(InputError) as caught:
        native_train("mnist-net-torch", load_data({"name": "digits28"}), **recipe, max_steps=1)
    line = str(caught.value)
    assert "\n" not in line
    assert ("the data's rows (shape (28, 28, 1)) do not fit model 'mnist-net-torch', which takes "
            "rows of shape (1, H, W): the arrays are channels last and the model takes channels "
            "first: give layout = \"channels_first\" on the data block (--layout channels_first)"
            ) in line
    record = native_train("mnist-net-torch",
                          load_data({"name": "digits28", "layout": "channels_first"}), **recipe,
                          max_steps=1)
    assert record["steps"] == 1 and record["loss"] == "nll"
    assert record["model_kind"] == "torch.nn.Module"


def test_a_users_channels_first_net_given_channels_last_rows_is_one_line_exit_2(tmp_path, capsys):
    """Through the command, nothing written: the user's file (no Keras twin to draw first)."""
    (tmp_path / "m.py").write_text(PAIR)
    code, err, row = train(tmp_path, capsys, "--model", f"{tmp_path / 'm.py'}:net_with_its_loss",
                           "--data", "digits28", "--backend", "torch", *NET_RECIPE[2:],
                           "--target", "val_accuracy=0.95")
    assert code == 2 and row is None and len(err.splitlines()) == 1, err
    assert "do not fit model" in err and "which takes rows of shape (1, H, W)" in err, err
    assert "(--layout channels_first)" in err and not list(tmp_path.glob("row*")), err


def test_a_torch_model_starting_with_a_linear_layer_names_its_features():
    from study.train.run.native_run import prepare

    model = torch.nn.Sequential(torch.nn.Linear(64, 10), torch.nn.Softmax(-1))
    from study.train.models.native_load import NativeModel

    native = NativeModel("torch", "torch.nn.Module", model, None, "model 'm.py:f'", 10)
    with pytest.raises(InputError) as caught:
        prepare(native, load_data({"name": "digits28"}), loss="sparse_categorical_crossentropy",
                metric="accuracy", optimizer="torch:Adam", hyperparameters={"lr": 0.01},
                target=("val_accuracy", 0.9, "max"))
    assert ("the data's rows (shape (28, 28, 1)) do not fit model 'm.py:f', which takes rows of "
            "shape (64,) (RuntimeError: ") in str(caught.value)
    assert "give rows of shape (64,), or a model built for (28, 28, 1)" in str(caught.value)


def test_a_jax_model_that_does_not_fit_is_one_line_in_its_own_words(tmp_path):
    pytest.importorskip("optax")
    from study.train.run.native_run import prepare

    (tmp_path / "m.py").write_text(PAIR)
    with pytest.raises(InputError) as caught:
        prepare(f"{tmp_path / 'm.py'}:nhwc_pair",
                load_data({"name": "digits28", "layout": "channels_first"}),
                loss="sparse_categorical_crossentropy", metric="accuracy",
                optimizer="optax:adam", hyperparameters={"learning_rate": 0.01},
                target=("val_accuracy", 0.9, "max"))
    line = str(caught.value)
    assert "\n" not in line and "the data's rows (shape (1, 28, 28)) do not fit model" in line
    assert "(ValueError: conv_general_dilated" in line  # the model's shape, in JAX's words
    assert "layout = \"channels_first\" on the data block" in line


def test_an_equinox_model_of_channels_first_says_so_in_its_words_and_runs_with_the_layout(
        tmp_path):
    pytest.importorskip("equinox")
    from study.train.run.native_run import prepare

    (tmp_path / "m.py").write_text(PAIR)
    recipe = {"loss": "sparse_categorical_crossentropy", "metric": "accuracy",
              "optimizer": "optax:adam", "hyperparameters": {"learning_rate": 0.01},
              "target": ("val_accuracy", 0.9, "max")}
    with pytest.raises(InputError) as caught:
        prepare(f"{tmp_path / 'm.py'}:equinox_conv", load_data({"name": "digits28"}), **recipe)
    line = str(caught.value)
    assert "\n" not in line and "the data's rows (shape (28, 28, 1)) do not fit model" in line
    assert "layout = \"channels_first\" on the data block" in line
    run = prepare(f"{tmp_path / 'm.py'}:equinox_conv",
                  load_data({"name": "digits28", "layout": "channels_first"}), **recipe)
    assert run.work.kind == "equinox"


def test_a_keras_model_of_channels_last_given_channels_first_rows_says_to_leave_the_layout_out(
        tmp_path):
    from study.frameworks.keras.train import build

    (tmp_path / "m.py").write_text(PAIR)
    with pytest.raises(InputError) as caught:
        build(f"{tmp_path / 'm.py'}:keras_28x28", (1, 28, 28), 10)
    assert ("do not fit model '" in str(caught.value)
            and "which takes rows of shape (28, 28, 1): the model takes channels last: leave "
                "out layout = \"channels_first\"" in str(caught.value))
    # a shipped example, built for the rows it is given, fails inside: its words, one line
    with pytest.raises(InputError) as caught:
        build("digits-cnn", (1, 8, 8), 10)
    line = str(caught.value)
    assert line.startswith("the data's rows (shape (1, 8, 8)) do not fit model 'digits-cnn' (")
    assert "channels_last, the default, keeps them as stored" in line and "\n" not in line


# ---- the shipped clients ---------------------------------------------------------------------

def test_the_torch_net_takes_its_keras_twins_weights_and_gives_its_outputs(tmp_path):
    """mnist-net (Keras, PyTorch's layout) draws the weights mnist-net-torch starts from; both
    give the same outputs from them, so a run's first evaluation matches the twin's. The Keras
    twin runs in a child on Keras's PyTorch backend: this process's Keras may have started on
    TensorFlow, whose CPU convolution refuses the channels-first layout."""
    from study.frameworks.torch.examples import mnist_net_torch

    x = load_data({"name": "digits28", "layout": "channels_first"})["x_val"][:64]
    np.save(tmp_path / "x.npy", x)
    child = ("import sys, numpy as np, keras; "
             "from study.frameworks.keras.examples import mnist_net; "
             "x = np.load(sys.argv[1] + '/x.npy'); twin = mnist_net(x.shape[1:], 10); "
             "out = keras.ops.convert_to_numpy(twin(x, training=False)); "
             "np.savez(sys.argv[1] + '/twin.npz', out, *twin.get_weights())")
    subprocess.run([sys.executable, "-c", child, str(tmp_path)], check=True, cwd=ROOT,
                   env={**os.environ, "KERAS_BACKEND": "torch", "PYTHONPATH": str(ROOT)})
    saved = np.load(tmp_path / "twin.npz")
    expected, *weights = (saved[f"arr_{i}"] for i in range(len(saved.files)))
    net = mnist_net_torch(x.shape[1:], 10)
    assert [w.shape for w in weights] == [tuple(p.shape) for p in net.parameters()]
    with torch.no_grad():
        for parameter, value in zip(net.parameters(), weights, strict=True):
            parameter.copy_(torch.as_tensor(value))
    net.eval()
    got = net(torch.as_tensor(x)).detach().numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # drawn as PyTorch's default draws: uniform within 1/sqrt(fan_in)
    assert np.abs(weights[4]).max() <= np.float32(1 / np.sqrt(9216)) and weights[4].std() > 0


@pytest.mark.slow
def test_channels_last_rows_through_the_command_are_one_line_exit_2(tmp_path, capsys):
    code, err, row = train(tmp_path, capsys, "--model", "mnist-net-torch", "--data", "digits28",
                           *NET_RECIPE, "--target", "val_accuracy=0.95")
    assert code == 2 and row is None and len(err.splitlines()) == 1, err
    assert "(28, 28, 1)" in err and ("(1, 28, 28)" in err or "(1, H, W)" in err), err
    assert "--layout channels_first" in err, err


@pytest.mark.slow
@pytest.mark.parametrize("model,args,loss", [
    ("mnist-net-torch", NET_RECIPE, "nll"),
    ("{tmp}/m.py:net_with_its_loss", NET_RECIPE[2:], "torch.nn.functional.nll_loss"),
])
def test_pytorch_s_mnist_net_reaches_0_95_on_digits28(tmp_path, capsys, model, args, loss):
    """PyTorch's MNIST Net as written upstream, channels first, with its recipe (NLL by name or
    F.nll_loss returned with it, Adadelta lr 1.0, batch 64): val_accuracy 0.95 on digits28;
    the row records the loss that ran."""
    (tmp_path / "m.py").write_text(PAIR)
    code, err, row = train(tmp_path, capsys, "--model", model.format(tmp=tmp_path), "--data",
                           "digits28", "--layout", "channels_first", "--backend", "torch",
                           *args, "--target", "val_accuracy=0.95", "--eval-every", "22",
                           "--max-steps", "1000")
    assert code == 0, err
    assert row["status"] == "reached" and row["val_metric"] >= 0.95, row["message"]
    assert row["loss"] == loss and json.loads(row["data_params"])["layout"] == "channels_first"
    if model == "mnist-net-torch":  # from its Keras twin's draw for the seed
        assert row["initial_val_loss"] == pytest.approx(row["reference_val_loss"], rel=1e-4)


@pytest.mark.slow
def test_keras_s_simple_mnist_convnet_reaches_0_95_on_every_framework_from_the_same_weights(
        tmp_path):
    """Keras's simple MNIST convnet with its recipe (categorical cross-entropy on one-hot
    labels, Adam, batch 128) reaches val_accuracy 0.95 on digits28 on TensorFlow, JAX and
    PyTorch, each from the same initial weights (the same initial validation loss)."""
    (tmp_path / "c.toml").write_text("""
kind = "train"
name = "convnet"
seeds = [0]
backends = ["tensorflow", "jax", "torch"]
run_timeout = 300

[[problems]]
name = "mnist-convnet"
model = "mnist-convnet"
data = { name = "digits28", one_hot = true }
loss = "categorical_crossentropy"
metric = "accuracy"
batch_size = 128
eval_every = 11
target = { metric = "val_accuracy", value = 0.95 }
stopping = { max_steps = 2000, time_budget = 200.0 }

[[optimizers]]
name = "keras:Adam"
learning_rate = 0.001
""")
    assert cli(["run", str(tmp_path / "c.toml"), "--out", str(tmp_path / "results"),
                "--quiet", "--no-adaptive"]) == 0
    runs = pd.read_parquet(tmp_path / "results" / "runs.parquet")
    assert sorted(runs["backend"]) == ["jax", "tensorflow", "torch"]
    assert set(runs["status"]) == {"reached"}, runs[["backend", "status", "message"]]
    assert (runs["val_metric"] >= 0.95).all()
    first = runs["initial_val_loss"].to_numpy()
    np.testing.assert_allclose(first, first[0], rtol=1e-4)


@pytest.mark.slow
def test_the_shipped_configs_plan_the_clients():
    """make reproduce runs the Net (one seed, its own optimizer only); make full runs both,
    the convnet on its three frameworks at its recipe's rate and nothing else added."""
    import tomllib

    from study.sweep.grid import matches
    from study.train.sweep.config import expand_specs

    def plan(path):  # the grid's runs after its [[exclude]] tables, as the runner plans them
        raw = tomllib.loads(open(path).read())
        return [s for s in expand_specs(raw, path, raw["name"], 1) if "mnist" in s.model
                and not any(matches(s.axes(), rule) for rule in raw.get("exclude", []))]

    quick = plan("configs/train.toml")
    assert [(s.model, s.optimizer, s.backend, s.seed) for s in quick] == [
        ("mnist-net-torch", "torch:Adadelta", "torch", 0)]
    full = plan("configs/train-full.toml")
    assert sorted({(s.model, s.optimizer, s.backend) for s in full}) == [
        ("mnist-convnet", "keras:Adam", "jax"), ("mnist-convnet", "keras:Adam", "tensorflow"),
        ("mnist-convnet", "keras:Adam", "torch"), ("mnist-net-torch", "torch:Adadelta", "torch")]
    assert len(full) == 12 and {s.hyperparameters.get("learning_rate") for s in full
                                if s.model == "mnist-convnet"} == {0.001}
