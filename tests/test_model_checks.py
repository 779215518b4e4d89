"""The checks every model kind goes through before any clock (study.train.models.model_checks and
the loss table of study.train.models.model): the output kind read off a probe batch, a loss that
does not fit it refused naming what the model outputs and the loss that fits, the losses by name in
their three meanings computed alike on every framework, a callable's qualified name, non-finite
outputs or loss refused, and L-BFGS over stochastic layers refused in one line for all."""

import numpy as np
import pytest

from convergence_study.errors import InputError
from study.train.models.model import (
    LOG_PROBABILITIES,
    LOGIT_OUTPUTS,
    PROBABILITIES,
    check_native_loss,
    check_outputs,
    labels_are_indices,
    loss_label,
    loss_meaning,
    named_loss,
    output_kind,
)
from study.train.models.model_checks import check_finite_loss, refuse_stochastic
from study.train.models.workload import initial_arrays

SPARSE = "sparse_categorical_crossentropy"
RNG = np.random.default_rng(0)
LOGITS = RNG.normal(size=(8, 4))
PROBS = np.exp(LOGITS) / np.exp(LOGITS).sum(1, keepdims=True)
LOGPROBS = np.log(PROBS)
LABELS = np.array([0, 1, 2, 3, 0, 1, 2, 3])


def test_the_output_kind_is_read_off_the_outputs():
    assert output_kind(PROBS)[0] == PROBABILITIES
    assert output_kind(LOGPROBS)[0] == LOG_PROBABILITIES
    assert output_kind(LOGITS)[0] == LOGIT_OUTPUTS
    assert output_kind(np.zeros((8, 4)))[0] == LOGIT_OUTPUTS  # a zero-initialized last layer
    assert output_kind(np.array([[0.2], [0.9]]))[0] == PROBABILITIES
    assert output_kind(np.array([[-0.2], [1.9]]))[0] == LOGIT_OUTPUTS


@pytest.mark.parametrize("loss,outputs,kind,fit", [
    (SPARSE, LOGITS, "logits", f"{SPARSE}:from_logits"),
    (SPARSE, LOGPROBS, "log-probabilities", "'nll'"),
    (f"{SPARSE}:from_logits", PROBS, "probabilities", f"'{SPARSE}'"),
    ("nll", LOGITS, "logits", f"'{SPARSE}:from_logits'"),
    ("nll", PROBS, "probabilities", f"'{SPARSE}'"),
    ("categorical_crossentropy", LOGPROBS, "log-probabilities", "'categorical_nll'"),
    ("categorical_nll", LOGITS, "logits", "'categorical_crossentropy:from_logits'"),
    ("binary_crossentropy", np.array([[1.5], [-0.2]]), "logits",
     "'binary_crossentropy:from_logits'"),
])
def test_a_loss_that_does_not_fit_the_outputs_is_refused_naming_both(loss, outputs, kind, fit):
    with pytest.raises(InputError) as caught:
        check_outputs(loss, outputs, "model 'm'")
    message = str(caught.value)
    assert "\n" not in message and f"model 'm' outputs {kind} (" in message, message
    assert fit in message, message


@pytest.mark.parametrize("loss,outputs", [
    (SPARSE, PROBS), (f"{SPARSE}:from_logits", LOGITS), ("nll", LOGPROBS),
    (f"{SPARSE}:from_logits", LOGPROBS),  # log-probabilities are logits (log_softmax keeps them)
    ("mse", LOGITS), ("binary_crossentropy:from_logits", np.array([[0.5], [0.2]])),
    ("binary_crossentropy", np.array([[0.5], [0.2]])),
])
def test_a_loss_that_fits_passes(loss, outputs):
    check_outputs(loss, outputs, "model 'm'")


def test_non_finite_outputs_or_loss_are_refused_before_the_clock():
    with pytest.raises(InputError, match="gives non-finite outputs .NaN or inf. at its initial"):
        check_outputs("mse", np.array([[1.0], [np.inf]]), "model 'm'")
    with pytest.raises(InputError, match=r"the loss \(nll\) is nan at the initial weights"):
        check_finite_loss(float("nan"), "nll", "model 'm'")
    check_finite_loss(2.3, "nll", "model 'm'")


def test_an_initial_file_beyond_float32_is_refused(tmp_path):
    np.savez(tmp_path / "big.npz", w0=np.full((2, 2), 1e300))
    with pytest.raises(InputError, match="beyond float32's range"):
        initial_arrays(tmp_path / "big.npz", ["w"], [(2, 2)], "model 'm'")


def test_lbfgs_over_stochastic_layers_is_one_line_for_every_optimizer_with_a_line_search():
    lines = []
    for optimizer in ("lbfgs", "torch:LBFGS", "optax:lbfgs"):
        with pytest.raises(InputError) as caught:
            refuse_stochastic(optimizer, ["Dropout"])
        lines.append(str(caught.value).removeprefix(optimizer))
        assert str(caught.value).startswith(f"{optimizer} needs a deterministic training "
                                            "objective, but the model has Dropout")
    assert len(set(lines)) == 1
    refuse_stochastic("torch:Adam", ["Dropout"])  # a first-order optimizer takes it
    refuse_stochastic("lbfgs", [])


def test_losses_by_name_and_their_meaning():
    assert loss_meaning(SPARSE) == (PROBABILITIES, "sparse")
    assert loss_meaning(f"{SPARSE}:from_logits") == (LOGIT_OUTPUTS, "sparse")
    assert loss_meaning("nll") == (LOG_PROBABILITIES, "sparse")
    assert loss_meaning("categorical_nll") == (LOG_PROBABILITIES, "categorical")
    assert loss_meaning("mse") == (None, None)
    assert labels_are_indices("nll") and not labels_are_indices("mse")
    assert labels_are_indices(None) is None
    for bad in ("nll:from_logits", "mse:from_logits", "huber"):
        with pytest.raises(InputError, match="native models take"):
            check_native_loss(bad, "model 'm'")
    with pytest.raises(InputError, match="returns no loss with it; give one by name"):
        check_native_loss(None, "model 'm'")


def test_a_callable_is_recorded_by_its_qualified_name_and_known_meaning():
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    assert loss_label(F.nll_loss) == "torch.nn.functional.nll_loss"
    assert loss_label(torch.nn.CrossEntropyLoss()) == "torch.nn.modules.loss.CrossEntropyLoss"
    assert loss_meaning(F.nll_loss) == (LOG_PROBABILITIES, "sparse")
    assert labels_are_indices(F.nll_loss) and labels_are_indices(lambda o, y: o) is None
    with pytest.raises(InputError, match="outputs logits .* but torch.nn.functional.nll_loss "
                                         "expects log-probabilities"):
        check_outputs(F.nll_loss, LOGITS, "model 'm'")


def _reference(loss: str, out: np.ndarray, y: np.ndarray) -> float:
    """Keras's value of each name, in NumPy."""
    eps = 1e-7
    if loss == "mse":
        return float(np.mean((out - y.reshape(out.shape)) ** 2))
    if loss.startswith("binary"):
        p = 1 / (1 + np.exp(-out)) if loss.endswith("from_logits") else np.clip(out, eps, 1 - eps)
        y = y.reshape(out.shape)
        return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    if loss.endswith("from_logits"):
        logp = out - np.log(np.exp(out).sum(1, keepdims=True))
    elif "nll" in loss:
        logp = out
    else:
        logp = np.log(np.clip(out / out.sum(1, keepdims=True), eps, 1 - eps))
    if loss.startswith("categorical"):
        return float(-np.mean(np.sum(np.eye(out.shape[1])[y] * logp, 1)))
    return float(-np.mean(logp[np.arange(len(y)), y]))


NAMED = [(SPARSE, PROBS), (f"{SPARSE}:from_logits", LOGITS), ("nll", LOGPROBS),
         ("categorical_crossentropy", PROBS), ("categorical_crossentropy:from_logits", LOGITS),
         ("categorical_nll", LOGPROBS), ("mse", LOGITS[:, :1]),
         ("binary_crossentropy", PROBS[:, :1]), ("binary_crossentropy:from_logits", LOGITS[:, :1])]


@pytest.mark.parametrize("loss,out", NAMED, ids=[n for n, _ in NAMED])
def test_a_loss_by_name_is_the_same_on_torch_and_jax(loss, out):
    torch = pytest.importorskip("torch")
    jnp = pytest.importorskip("jax.numpy")
    from study.frameworks.jax.train import jax_ops
    from study.frameworks.torch.train import torch_ops

    y = LABELS if loss in (SPARSE, f"{SPARSE}:from_logits", "nll") else \
        (LABELS % 2).astype(np.float32) if out.shape[1] == 1 else \
        np.eye(out.shape[1], dtype=np.float32)[LABELS]
    expected = _reference(loss, out, LABELS if out.shape[1] > 1 else y)
    on_torch = named_loss(loss, torch_ops())(torch.as_tensor(out, dtype=torch.float32),
                                             torch.as_tensor(y))
    on_jax = named_loss(loss, jax_ops())(jnp.asarray(out, jnp.float32), jnp.asarray(y))
    assert float(on_torch) == pytest.approx(expected, rel=1e-5)
    assert float(on_jax) == pytest.approx(expected, rel=1e-5)


# ---- a Keras model, in a fresh process per framework --------------------------------------------

KERAS_LOG_SOFTMAX = '''
def build(input_shape, outputs):
    import keras
    return keras.Sequential([keras.Input(shape=input_shape), keras.layers.Flatten(),
                             keras.layers.Dense(32, activation="tanh"),
                             keras.layers.Dense(outputs, activation="log_softmax")])
'''


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch", "tensorflow"])
def test_a_keras_model_of_log_probabilities_takes_nll_by_name(tmp_path, backend):
    """The NLL by name on a Keras model, on each framework: the probability loss is refused
    naming log-probabilities and 'nll'; nll trains to val_loss 0.6 and is the row's loss."""
    import subprocess
    import sys
    from pathlib import Path

    import pandas as pd

    pytest.importorskip(backend)
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "k.py").write_text(KERAS_LOG_SOFTMAX)

    def train(*args):
        out = tmp_path / "row.parquet"
        done = subprocess.run([sys.executable, "-m", "study", "train", "--model",
                               f"{tmp_path / 'k.py'}:build", "--data", "digits", "--backend",
                               backend, "--optimizer", "keras:Adam", "--opt-param",
                               "learning_rate=0.01", "--target", "val_loss=0.6", *args, "--out",
                               str(out)], capture_output=True, text=True, cwd=root, timeout=300)
        return done, (pd.read_parquet(out).iloc[0] if out.exists() else None)

    done, row = train()
    assert done.returncode == 2 and row is None, done.stderr
    assert "outputs log-probabilities (" in done.stderr and "give the loss as 'nll'" in \
        done.stderr, done.stderr
    done, row = train("--loss", "nll")
    assert done.returncode == 0, done.stderr
    assert row["status"] == "reached" and row["loss"] == "nll" and row["val_metric"] > 0.8
