"""Native models (study.train.models.workload and its adapters): a PyTorch module, an Equinox module
and a pure-JAX pair each reach an explicit target with their own framework's optimizer and with our
L-BFGS; the shipped native examples load the Keras example's weights from one .npz and give its
validation loss; no host read inside a JAX segment (the transfer guard) or in a torch:SGD segment
(counted); bad native models and optimizers are one line (an InputError), nothing written."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from convergence_study.errors import InputError
from study.train.models.data import load_data
from study.train.models.native_load import check_backend, load, workload
from study.train.models.workload import WorkloadStepper
from study.train.run.loop import epoch_batches
from study.train.run.native_optimizers import check_name, make_submission
from study.train.run.native_run import train

ROOT = Path(__file__).resolve().parents[1]
SPARSE = "sparse_categorical_crossentropy"
pytest.importorskip("torch")
pytest.importorskip("optax")


@pytest.fixture(scope="module")
def digits():
    return load_data({"name": "digits"})


@pytest.fixture(scope="module")
def small():
    """A small regression set: y = x @ a + 0.5 (3 features), for the bad-input tests."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32) + 0.5).astype(np.float32)
    return {"x_train": x[:150], "y_train": y[:150], "x_val": x[150:], "y_val": y[150:]}


def run(model, arrays, optimizer, hp=None, **kwargs):
    options = {"loss": SPARSE, "metric": "accuracy", "batch_size": 64, "seed": 0,
               "target": ("val_loss", 0.35, "min"), "max_steps": 1500, **kwargs}
    return train(model, arrays, optimizer=optimizer, hyperparameters=hp or {}, **options)


# ---- each kind of native model reaches an explicit target, with its library and with lbfgs -----

CASES = [("digits-cnn-torch", "torch:Adam", {"lr": 0.01}),
         ("digits-cnn-torch", "lbfgs", {}),
         ("digits-cnn-jax", "optax:adam", {"learning_rate": 0.01}),
         ("digits-cnn-jax", "lbfgs", {"history": 10})]


@pytest.mark.parametrize("model,optimizer,hp", CASES, ids=[f"{m}-{o}" for m, o, _ in CASES])
def test_reaches_target(digits, model, optimizer, hp):
    record = run(model, digits, optimizer, hp)
    assert record["status"] == "reached", record["message"]
    assert record["val_loss"] <= 0.35 and record["steps_to_target"] == record["steps"]
    assert record["seconds_to_target"] is not None and record["setup_seconds"] is not None
    assert record["framework"] == model.rsplit("-", 1)[1]
    assert record["trace"][0]["step"] == 0 and record["initial_val_loss"] > 2.0
    assert record["parameters"] == 3 * 3 * 6 + 6 + 54 * 10 + 10


@pytest.mark.parametrize("optimizer,hp", [("optax:adam", {"learning_rate": 0.01}),
                                          ("lbfgs", {})])
def test_equinox_reaches_target(digits, optimizer, hp):
    pytest.importorskip("equinox")
    record = run("digits-cnn-equinox", digits, optimizer, hp)
    assert record["status"] == "reached", record["message"]
    assert record["model_kind"] == "equinox"
    # the same parameters as the pure-JAX pair (the same key, the same draws): the same run
    pair = run("digits-cnn-jax", digits, optimizer, hp)
    assert pair["steps"] == record["steps"]
    # Equinox applies the model per example under vmap, the pair on the batch: float32 sums in
    # another order, ~1e-7 relative per step. Adam's steps keep that there; L-BFGS's line
    # searches amplify it over its 16 iterations (1.1e-3 measured in a full parallel suite,
    # where XLA's CPU threads split the sums differently again)
    rel = 1e-2 if optimizer == "lbfgs" else 1e-4
    assert record["val_loss"] == pytest.approx(pair["val_loss"], rel=rel)


def test_user_files_with_their_own_loss(tmp_path, small):
    """A user's torch module with a torch.nn loss, and a pure-JAX pair with an optax-style loss
    callable, from file.py:function, to an explicit target."""
    (tmp_path / "mine.py").write_text(textwrap.dedent('''
        def torch_linear(input_shape, outputs):
            import torch
            return torch.nn.Linear(input_shape[0], outputs), torch.nn.MSELoss()

        def jax_linear(input_shape, outputs):
            import jax, jax.numpy as jnp
            def init(key):
                return {"w": jax.random.normal(key, (input_shape[0], outputs)) * 0.1,
                        "b": jnp.zeros(outputs)}
            def apply(params, x):
                return x @ params["w"] + params["b"]
            def loss(out, y):
                return jnp.mean((out - y) ** 2)  # labels come shaped as the outputs
            return init, apply, loss
    '''))
    for function, optimizer, hp in [("torch_linear", "torch:SGD", {"lr": 0.1}),
                                    ("torch_linear", "lbfgs", {}),
                                    ("torch_linear", "torch:LBFGS", {"max_iter": 1}),
                                    ("jax_linear", "optax:sgd", {"learning_rate": 0.1}),
                                    ("jax_linear", "optax:lbfgs", {}),
                                    ("jax_linear", "lbfgs", {})]:
        record = run(f"{tmp_path / 'mine.py'}:{function}", small, optimizer, hp, loss="mse",
                     metric="mae", target=("val_loss", 1e-3, "min"), batch_size=32,
                     eval_every=5)
        assert record["status"] == "reached", (function, optimizer, record["message"])


def test_equinox_layers_per_example_with_seed(tmp_path, small):
    """An Equinox model of its own layers (each taking one example), built from the seed it is
    given: vmapped over the batch, trained to a target by optax and by lbfgs."""
    pytest.importorskip("equinox")
    (tmp_path / "eqx_model.py").write_text(textwrap.dedent('''
        def build(input_shape, outputs, seed=0):
            import equinox as eqx, jax
            return eqx.nn.Linear(input_shape[0], outputs, key=jax.random.key(seed))
    '''))
    for optimizer, hp in [("optax:sgd", {"learning_rate": 0.1}), ("lbfgs", {})]:
        record = run(f"{tmp_path / 'eqx_model.py'}:build", small, optimizer, hp, loss="mse",
                     metric="mae", target=("val_loss", 1e-3, "min"), batch_size=32,
                     eval_every=5)
        assert record["status"] == "reached", (optimizer, record["message"])
        assert record["model_kind"] == "equinox" and record["parameters"] == 4


@pytest.mark.parametrize("function,optimizer,hp", [("jax_ok", "optax:sgd", {"learning_rate": 1e3}),
                                                   ("torch_ok", "torch:SGD", {"lr": 1e3})])
def test_diverged(tmp_path, small, function, optimizer, hp):
    (tmp_path / "bad.py").write_text(BAD)
    record = run(f"{tmp_path / 'bad.py'}:{function}", small, optimizer, hp, loss="mse",
                 metric="mae", target=("val_loss", 1e-6, "min"), eval_every=5, max_steps=500)
    assert record["status"] == "diverged", record["message"]


def test_torch_logits_with_cross_entropy(tmp_path, digits):
    """A torch module giving logits with torch.nn.CrossEntropyLoss (class indices as labels):
    the accuracy is the class one, and the target on it is reached."""
    (tmp_path / "logits.py").write_text(textwrap.dedent('''
        def build(input_shape, outputs):
            import torch
            return (torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, outputs)),
                    torch.nn.CrossEntropyLoss())
    '''))
    record = run(f"{tmp_path / 'logits.py'}:build", digits, "torch:Adam", {"lr": 0.01},
                 loss=None, target=("val_accuracy", 0.9, "max"))
    assert record["status"] == "reached", record["message"]
    assert record["val_metric"] >= 0.9


def test_initial_npz_by_name_and_seed(tmp_path, digits):
    """Initial parameters from an .npz by the model's own names; without one, the seed."""
    native = load("digits-cnn-jax", (8, 8, 1), 10, seed=3)
    work = workload(native, digits, SPARSE, "accuracy", seed=3)
    params = work.init_parameters()
    np.savez(tmp_path / "named.npz", **{name: np.asarray(p) * 0.5 for name, p in
                                        zip(work.names, params, strict=True)})
    halved = workload(native, digits, SPARSE, "accuracy", initial=tmp_path / "named.npz")
    assert np.allclose(halved.to_flat(halved.init_parameters()), 0.5 * work.to_flat(params))
    again = workload(load("digits-cnn-jax", (8, 8, 1), 10, seed=3), digits, SPARSE,
                     "accuracy", seed=3)
    assert np.array_equal(again.to_flat(again.init_parameters()), work.to_flat(params))
    torch_a = workload(load("digits-cnn-torch", (8, 8, 1), 10, seed=1), digits, SPARSE,
                       "accuracy")
    torch_b = workload(load("digits-cnn-torch", (8, 8, 1), 10, seed=1), digits, SPARSE,
                       "accuracy")
    assert np.array_equal(torch_a.to_flat(torch_a.init_parameters()),
                          torch_b.to_flat(torch_b.init_parameters()))


KERAS_WEIGHTS = textwrap.dedent('''
    import json, sys
    import numpy as np
    import keras
    from study.train.models.data import load_data
    from study.train.models.examples import MODELS
    from study.frameworks.keras.train import loss_object
    arrays = load_data({"name": "digits"})
    keras.utils.set_random_seed(0)
    model = MODELS["digits-cnn"]((8, 8, 1), 10)
    weights = model.get_weights()
    np.savez(sys.argv[1], **{f"w{i}": w for i, w in enumerate(weights)})
    loss = loss_object("sparse_categorical_crossentropy")
    value = keras.ops.convert_to_numpy(loss(arrays["y_val"], model(arrays["x_val"])))
    print(json.dumps({"val_loss": float(value)}))
''')


def test_one_npz_for_keras_torch_and_jax(tmp_path, digits):
    """The Keras example's weights (w0..w3, get_weights order, drawn by Keras's NumPy backend)
    load into the native PyTorch, JAX and Equinox examples, which give Keras's validation loss
    to the train study's tolerance (1e-4 relative): the same instance in three frameworks."""
    path = tmp_path / "weights.npz"
    env = {**os.environ, "KERAS_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", KERAS_WEIGHTS, str(path)], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    reference = json.loads(done.stdout.strip().splitlines()[-1])["val_loss"]
    models = ["digits-cnn-torch", "digits-cnn-jax"]
    try:
        import equinox  # noqa: F401

        models.append("digits-cnn-equinox")
    except ImportError:
        pass
    for name in models:
        work = workload(load(name, (8, 8, 1), 10), digits, SPARSE, "accuracy", initial=path)
        value = work.evaluate(work.init_parameters())["val_loss"]
        assert value == pytest.approx(reference, rel=1e-4), name


# ---- no host read inside a segment ------------------------------------------------------------

def test_jax_segment_reads_nothing(digits):
    import jax

    native = load("digits-cnn-jax", (8, 8, 1), 10)
    work = workload(native, digits, SPARSE, "accuracy")
    rows, _ = epoch_batches(len(digits["x_train"]), 64, 0)
    stepper = WorkloadStepper(work, make_submission("optax:adam", {"learning_rate": 0.01},
                                                    "jax"), rows)
    stepper.read(stepper.run(stepper.prepare(0, 1)))  # compiles
    prepared = stepper.prepare(1, 20)
    with jax.transfer_guard_device_to_host("disallow"):
        value = stepper.run(prepared)
    assert np.isfinite(stepper.read(value))


def test_torch_segment_reads_nothing(digits, monkeypatch):
    import torch

    reads = []
    for name in ("item", "tolist", "numpy", "cpu", "__float__", "__bool__", "__int__"):
        original = getattr(torch.Tensor, name)

        def counting(*args, _original=original, _name=name, **kwargs):
            reads.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counting)
    native = load("digits-cnn-torch", (8, 8, 1), 10)
    work = workload(native, digits, SPARSE, "accuracy")
    rows, _ = epoch_batches(len(digits["x_train"]), 64, 0)
    stepper = WorkloadStepper(work, make_submission("torch:SGD", {"lr": 0.05}, "torch"), rows)
    prepared = stepper.prepare(0, 10)
    reads.clear()
    value = stepper.run(prepared)
    assert reads == []
    assert np.isfinite(stepper.read(value))


# ---- bad native models and optimizers: one line each, nothing written -------------------------

BAD = textwrap.dedent('''
    def no_parameters(input_shape, outputs):
        import torch
        return torch.nn.Softmax(-1)

    def wrong_outputs(input_shape, outputs):
        import torch
        return torch.nn.Linear(input_shape[0], outputs + 2)

    def per_row_loss(input_shape, outputs):
        import torch
        return torch.nn.Linear(input_shape[0], outputs), torch.nn.MSELoss(reduction="none")

    def jax_no_parameters(input_shape, outputs):
        return (lambda key: {}), (lambda params, x: x)

    def jax_wrong_outputs(input_shape, outputs):
        import jax.numpy as jnp
        return (lambda key: [jnp.ones((input_shape[0], 3))]), (lambda p, x: x @ p[0])

    def jax_per_row_loss(input_shape, outputs):
        import jax.numpy as jnp
        return ((lambda key: [jnp.ones((input_shape[0], 1))]), (lambda p, x: x @ p[0]),
                (lambda out, y: (out[:, 0] - y) ** 2))

    def jax_not_float(input_shape, outputs):
        return (lambda key: ["w"]), (lambda p, x: x)

    def not_a_model(input_shape, outputs):
        return "a string"

    def fails(input_shape, outputs):
        raise RuntimeError("broken\\nsecond line")

    def torch_ok(input_shape, outputs):
        import torch
        return torch.nn.Linear(input_shape[0], outputs)

    def jax_ok(input_shape, outputs):
        import jax.numpy as jnp
        return (lambda key: [jnp.zeros((input_shape[0], 1))]), (lambda p, x: x @ p[0])
''')

REFUSALS = [
    ("no_parameters", "lbfgs", {}, "has no trainable parameters"),
    ("wrong_outputs", "torch:Adam", {}, "gives outputs of shape (2, 3)"),
    ("per_row_loss", "torch:Adam", {}, "the loss must be a scalar"),
    ("jax_no_parameters", "optax:adam", {"learning_rate": 0.1}, "has no trainable parameters"),
    ("jax_wrong_outputs", "optax:adam", {"learning_rate": 0.1}, "gives outputs of shape (2, 3)"),
    ("jax_per_row_loss", "lbfgs", {}, "the loss must be a scalar"),
    ("jax_not_float", "lbfgs", {}, "is not a float array"),
    ("not_a_model", "lbfgs", {}, "did not give a model"),
    ("fails", "lbfgs", {}, "failed to build: RuntimeError: broken"),
    ("torch_ok", "optax:adam", {"learning_rate": 0.1}, "is an optax (JAX) optimizer"),
    ("torch_ok", "keras:Adam", {}, "is a Keras optimizer (for Keras models)"),
    ("jax_ok", "torch:Adam", {}, "is a PyTorch optimizer"),
    ("jax_ok", "sgd", {}, "unknown 'sgd'"),
    ("torch_ok", "torch:Adamm", {}, "unknown torch optimizer 'Adamm'"),
    ("torch_ok", "torch:Adam", {"learning_rate": 0.1}, "has no parameter 'learning_rate'"),
    ("torch_ok", "torch:Adam", {"lr": -1.0}, "lr must be in (0, inf)"),
    ("jax_ok", "optax:adamm", {}, "unknown optax optimizer 'adamm'"),
    ("jax_ok", "optax:adam", {}, "optax:adam needs learning_rate"),
    ("jax_ok", "optax:adam", {"lr": 0.1}, "has no parameter 'lr'"),
    ("jax_ok", "optax:adam", {"learning_rate": 0.1, "b1": 1.5}, "b1 must be in [0, 1)"),
    ("jax_ok", "optax:tree_map_params", {"learning_rate": 0.1}, "optax:tree_map_params"),
    ("jax_ok", "lbfgs", {"memory": 3}, "lbfgs takes history only"),
]


@pytest.mark.parametrize("function,optimizer,hp,words", REFUSALS,
                         ids=[f"{f}-{o}" for f, o, _, _ in REFUSALS])
def test_refused_in_one_line(tmp_path, small, function, optimizer, hp, words):
    (tmp_path / "bad.py").write_text(BAD)
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(InputError) as caught:
        run(f"{tmp_path / 'bad.py'}:{function}", small, optimizer, hp, loss="mse",
            metric="mae", target=("val_loss", 0.1, "min"), max_steps=5)
    message = str(caught.value)
    assert "\n" not in message and words in message, message
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == before


def test_other_refusals(tmp_path, small, digits):
    (tmp_path / "bad.py").write_text(BAD)
    native = load(f"{tmp_path / 'bad.py'}:torch_ok", (3,), 1)
    with pytest.raises(InputError, match="runs on torch only, not jax; a native model compares"):
        check_backend(native, "jax")
    check_backend(native, "torch")
    with pytest.raises(InputError, match="loss: native models take"):
        workload(native, small, "huber_loss_of_mine", "mae")
    with pytest.raises(InputError, match="metric: native models compute"):
        workload(native, small, "mse", "auc")
    with pytest.raises(InputError, match="does not exist"):
        workload(native, small, "mse", "mae", initial=tmp_path / "none.npz")
    np.savez(tmp_path / "wrong.npz", w0=np.zeros((2, 2)), w1=np.zeros(1))
    with pytest.raises(InputError, match="w0 has shape"):
        workload(native, small, "mse", "mae", initial=tmp_path / "wrong.npz")
    with pytest.raises(InputError, match="target metric 'val_auc'"):
        run(f"{tmp_path / 'bad.py'}:torch_ok", small, "lbfgs", loss="mse", metric="mae",
            target=("val_auc", 0.9, "max"))
    with pytest.raises(InputError, match="do not fit"):
        run(f"{tmp_path / 'bad.py'}:torch_ok", digits, "lbfgs")
    with pytest.raises(InputError, match="batch_size 151 is more than the 150"):
        run(f"{tmp_path / 'bad.py'}:torch_ok", small, "torch:SGD", {"lr": 0.1}, loss="mse",
            metric="mae", batch_size=151)
    with pytest.raises(InputError, match="the initial weights already meet the target"):
        run(f"{tmp_path / 'bad.py'}:torch_ok", small, "torch:SGD", {"lr": 0.1}, loss="mse",
            metric="mae", target=("val_loss", 1e9, "min"))
    with pytest.raises(InputError, match="native models run on jax, torch, not 'tensorflow'"):
        make_submission("lbfgs", {}, "tensorflow")
    with pytest.raises(InputError, match="unknown 'adam'"):
        check_name("adam")
    check_name("optax:adam")
    assert load("digits-cnn", (8, 8, 1), 10) is None  # a shipped Keras example: Keras's path
    assert load("model.keras", (8, 8, 1), 10) is None


def test_keras_function_is_left_to_keras(tmp_path):
    """A file.py:function returning a Keras model gives None (the Keras path runs it)."""
    (tmp_path / "k.py").write_text(textwrap.dedent('''
        def build(input_shape, outputs):
            import keras
            return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Dense(outputs)])
    '''))
    code = ("import sys; from study.train.models.native_load import load; "
            f"print(load({str(tmp_path / 'k.py') + ':build'!r}, (3,), 1))")
    env = {**os.environ, "KERAS_BACKEND": "numpy", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "None", done.stderr


# ---- every check for every model kind (issue 42 item 2, issue 43 case 5) -----------------------

KINDS = textwrap.dedent('''
    def torch_logits(input_shape, outputs):
        import torch
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.Tanh(),
                                   torch.nn.Linear(32, outputs))

    def torch_logprobs(input_shape, outputs):
        import torch
        return torch.nn.Sequential(torch_logits(input_shape, outputs), torch.nn.LogSoftmax(-1))

    def torch_nll(input_shape, outputs):
        import torch.nn.functional as F
        return torch_logprobs(input_shape, outputs), F.nll_loss

    def torch_dropout(input_shape, outputs):
        import torch
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32),
                                   torch.nn.Dropout(0.5), torch.nn.Linear(32, outputs),
                                   torch.nn.Softmax(-1))

    def torch_functional_dropout(input_shape, outputs):
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.dense = torch.nn.Linear(64, outputs)
            def forward(self, x):
                h = torch.nn.functional.dropout(self.dense(x.flatten(1)), 0.5, self.training)
                return torch.softmax(h, -1)
        return Net()

    def torch_nan(input_shape, outputs):
        import torch
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, outputs),
                                    torch.nn.Softmax(-1))
        with torch.no_grad():
            model[1].weight.fill_(float("nan"))
        return model

    def jax_logits(input_shape, outputs):
        import jax, jax.numpy as jnp
        def init(key):
            k1, k2 = jax.random.split(key)
            return {"w1": jax.random.normal(k1, (64, 32)) * 0.2, "b1": jnp.zeros(32),
                    "w2": jax.random.normal(k2, (32, outputs)) * 0.2, "b2": jnp.zeros(outputs)}
        def apply(p, x):
            return jnp.tanh(x.reshape(len(x), -1) @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
        return init, apply

    def jax_logprobs(input_shape, outputs):
        import jax
        init, apply = jax_logits(input_shape, outputs)
        return init, lambda p, x: jax.nn.log_softmax(apply(p, x), -1)

    def jax_inf(input_shape, outputs):
        import jax.numpy as jnp
        init, apply = jax_logits(input_shape, outputs)
        return (lambda key: {**init(key), "b2": jnp.full(outputs, jnp.inf)}), apply

    def equinox_logits(input_shape, outputs, seed=0):
        import equinox as eqx, jax
        k1, k2 = jax.random.split(jax.random.key(seed))
        return eqx.nn.Sequential([eqx.nn.Lambda(lambda x: x.reshape(-1)),
                                  eqx.nn.Linear(64, 32, key=k1), eqx.nn.Lambda(jax.numpy.tanh),
                                  eqx.nn.Linear(32, outputs, key=k2)])

    def equinox_logprobs(input_shape, outputs, seed=0):
        import equinox as eqx, jax
        return eqx.nn.Sequential([equinox_logits(input_shape, outputs, seed),
                                  eqx.nn.Lambda(jax.nn.log_softmax)])

    def equinox_dropout(input_shape, outputs, seed=0):
        import equinox as eqx, jax
        k1, k2 = jax.random.split(jax.random.key(seed))
        return eqx.nn.Sequential([eqx.nn.Lambda(lambda x: x.reshape(-1)),
                                  eqx.nn.Linear(64, 32, key=k1), eqx.nn.Dropout(0.5),
                                  eqx.nn.Linear(32, outputs, key=k2)])
''')


@pytest.fixture()
def kinds(tmp_path):
    (tmp_path / "kinds.py").write_text(KINDS)
    return lambda function: f"{tmp_path / 'kinds.py'}:{function}"


MISFITS = [("torch_logits", SPARSE, "torch:Adam", "logits", f"'{SPARSE}:from_logits'"),
           ("torch_logprobs", SPARSE, "lbfgs", "log-probabilities", "'nll'"),
           ("torch_logits", "nll", "torch:Adam", "logits", f"'{SPARSE}:from_logits'"),
           ("jax_logits", SPARSE, "optax:adam", "logits", f"'{SPARSE}:from_logits'"),
           ("jax_logprobs", SPARSE, "lbfgs", "log-probabilities", "'nll'"),
           ("equinox_logits", SPARSE, "optax:adam", "logits", f"'{SPARSE}:from_logits'"),
           ("equinox_logprobs", SPARSE, "lbfgs", "log-probabilities", "'nll'")]


@pytest.mark.parametrize("function,loss,optimizer,kind,fit", MISFITS,
                         ids=[f"{m[0]}-{m[1]}" for m in MISFITS])
def test_a_loss_that_does_not_fit_the_outputs_is_refused_on_every_native_kind(
        kinds, digits, function, loss, optimizer, kind, fit):
    """Issue 42: a log_softmax JAX pair under the probability loss was recorded `reached` at
    accuracy 0; logits trained to garbage. Now one line before any clock, naming both."""
    if function.startswith("equinox"):
        pytest.importorskip("equinox")
    hp = {"lr": 0.01} if optimizer.startswith("torch") else \
        {"learning_rate": 0.01} if optimizer.startswith("optax") else {}
    with pytest.raises(InputError) as caught:
        run(kinds(function), digits, optimizer, hp, loss=loss)
    message = str(caught.value)
    assert "\n" not in message and f"outputs {kind} (" in message and fit in message, message


STOCHASTIC = [("torch_dropout", "lbfgs", "Dropout"), ("torch_dropout", "torch:LBFGS", "Dropout"),
              ("torch_functional_dropout", "lbfgs", "a training pass that draws noise"),
              ("equinox_dropout", "lbfgs", "Dropout"),
              ("equinox_dropout", "optax:lbfgs", "Dropout")]


@pytest.mark.parametrize("function,optimizer,found", STOCHASTIC,
                         ids=[f"{s[0]}-{s[1]}" for s in STOCHASTIC])
def test_lbfgs_over_dropout_is_the_keras_line_on_every_native_kind(kinds, digits, function,
                                                                  optimizer, found):
    from study.train.models.model_checks import refuse_stochastic

    if function.startswith("equinox"):
        pytest.importorskip("equinox")
    with pytest.raises(InputError) as caught:
        run(kinds(function), digits, optimizer, {})
    with pytest.raises(InputError) as keras_line:  # what the Keras path says (trainers.py)
        refuse_stochastic(optimizer, [found])
    assert str(caught.value) == str(keras_line.value)


def test_dropout_trains_with_a_first_order_optimizer(kinds, digits):
    record = run(kinds("torch_dropout"), digits, "torch:Adam", {"lr": 0.01},
                 target=("val_loss", 0.6, "min"))
    assert record["status"] == "reached", record["message"]


@pytest.mark.parametrize("function,optimizer", [("torch_nan", "torch:Adam"),
                                                ("jax_inf", "optax:adam")])
def test_non_finite_initial_outputs_are_refused_before_the_clock(kinds, digits, function,
                                                                 optimizer):
    """Issue 43 case 5: such a model was recorded `diverged` after one step."""
    hp = {"lr": 0.01} if optimizer.startswith("torch") else {"learning_rate": 0.01}
    with pytest.raises(InputError, match="gives non-finite outputs"):
        run(kinds(function), digits, optimizer, hp)


def test_an_initial_file_that_overflows_float32_is_refused(kinds, digits, tmp_path):
    np.savez(tmp_path / "big.npz", **{f"w{i}": np.full(shape, 1e300) for i, shape in
                                      enumerate([(32, 64), (32,), (10, 32), (10,)])})
    with pytest.raises(InputError, match="beyond float32's range"):
        run(kinds("torch_logits"), digits, "torch:Adam", {"lr": 0.01},
            loss=f"{SPARSE}:from_logits", initial=tmp_path / "big.npz")
    np.savez(tmp_path / "large.npz", **{f"w{i}": np.full(shape, 1e38, np.float32) for i, shape
                                        in enumerate([(32, 64), (32,), (10, 32), (10,)])})
    with pytest.raises(InputError, match="gives non-finite outputs"):  # finite, overflowing
        run(kinds("torch_logits"), digits, "torch:Adam", {"lr": 0.01},
            loss=f"{SPARSE}:from_logits", initial=tmp_path / "large.npz")


@pytest.mark.parametrize("loss", [None, "mse", SPARSE])
def test_a_loss_returned_with_the_model_needs_no_name_and_is_the_row_s_loss(kinds, digits,
                                                                          loss):
    """(Net(), F.nll_loss): no loss by name needed; a name beside it (mse here) neither shapes
    the labels nor is recorded: the row's loss is the callable that ran."""
    record = run(kinds("torch_nll"), digits, "torch:Adam", {"lr": 0.01}, loss=loss,
                 target=("val_loss", 0.6, "min"))
    assert record["status"] == "reached", record["message"]
    assert record["loss"] == "torch.nn.functional.nll_loss" and record["val_metric"] > 0.8


ACCEPTANCE = [(model, loss, optimizer)
              for model, loss in [("torch_logits", f"{SPARSE}:from_logits"),
                                  ("torch_logprobs", "nll"),
                                  ("jax_logits", f"{SPARSE}:from_logits"),
                                  ("jax_logprobs", "nll"),
                                  ("equinox_logits", f"{SPARSE}:from_logits"),
                                  ("equinox_logprobs", "nll")]
              for optimizer in (("torch:Adam" if model.startswith("torch") else "optax:adam"),
                                "lbfgs")]


@pytest.mark.slow
@pytest.mark.parametrize("function,loss,optimizer", ACCEPTANCE,
                         ids=[f"{a[0]}-{a[2]}" for a in ACCEPTANCE])
def test_logits_and_log_probabilities_train_with_the_loss_that_fits(kinds, digits, function,
                                                                    loss, optimizer):
    """Issue 42's acceptance: each kind, logits or log-probabilities, its library's Adam and our
    lbfgs, to val_loss 0.6 on digits, the accuracy that goes with it."""
    if function.startswith("equinox"):
        pytest.importorskip("equinox")
    hp = {"lr": 0.01} if optimizer.startswith("torch") else \
        {"learning_rate": 0.01} if optimizer.startswith("optax") else {}
    record = run(kinds(function), digits, optimizer, hp, loss=loss,
                 target=("val_loss", 0.6, "min"))
    assert record["status"] == "reached", record["message"]
    assert record["val_loss"] <= 0.6 and record["val_metric"] >= 0.8
    assert record["loss"] == loss
