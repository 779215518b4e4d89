"""The model of a train run, its loss and metric: a shipped example by name, a `.keras` file, or
`file.py:function(input_shape, outputs)` returning an uncompiled Keras model.

Keras is imported inside the functions only: the run's process has chosen its backend
(KERAS_BACKEND) before, and the command line checks names without importing it. Every failure
of the user's model or names is one line (an InputError: exit 2)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np

from datasets.errors import InputError
from study.train.data import check_input_file
from study.train.examples import MODELS
from study.train.native_examples import NATIVE_MODELS

SHIPPED = (*MODELS, *NATIVE_MODELS)  # the Keras examples and their native twins, by name

# losses whose labels are class indices, probabilities, or anything finite
SPARSE = ("sparse_categorical_crossentropy",)
PROBABILITY = ("binary_crossentropy", "categorical_crossentropy", "binary_focal_crossentropy",
               "categorical_focal_crossentropy")
# of those, the ones whose predictions are a distribution over the last axis (softmax)
DISTRIBUTION = ("sparse_categorical_crossentropy", "categorical_crossentropy",
                "categorical_focal_crossentropy")
LOGITS = ":from_logits"  # `--loss NAME:from_logits`: the model gives logits (a linear last layer)
HIGHER_IS_BETTER = ("accuracy", "auc", "precision", "recall", "f1", "r2")
FRACTIONS = ("accuracy", "auc", "precision", "recall")  # metrics in [0, 1], higher is better
NEGATIVE_LOSSES = ("cosine_similarity",)  # the Keras losses that go below 0


def model_file(model: str) -> Path | None:
    """The user's file behind a model name (None for a shipped example, Keras or native)."""
    if model in SHIPPED:
        return None
    return Path(model.rsplit(":", 1)[0] if model.rsplit(":", 1)[0].endswith(".py") else model)


def check_model_name(model: str, where: str = "model") -> None:
    """The name's form and that its file is there (before anything runs)."""
    if not isinstance(model, str) or not model:
        raise InputError(f"{where} must be a name ({', '.join(SHIPPED)}), a .keras file or "
                         f"file.py:function, got {model!r}")
    path = model_file(model)
    if path is None:
        return
    if path.suffix == ".py" and ":" not in model:
        raise InputError(f"{where} '{model}': name the function too (file.py:function)")
    if path.suffix not in (".keras", ".py"):
        raise InputError(f"{where} '{model}' is neither a shipped model ({', '.join(SHIPPED)}), "
                         "a .keras file nor file.py:function")
    check_input_file(path, where)


def check_initial_file(path, model: str, where: str = "initial") -> None:
    """An .npz that is there, for a model that can take it (a native one: a Keras model's
    initial weights are drawn per seed, the same on every framework)."""
    if path is None:
        return
    if not isinstance(path, str) or not path.endswith(".npz"):
        raise InputError(f"{where}: {path!r} is not an .npz file (the initial parameters by "
                         "name, or w0, w1, ...)")
    if model in MODELS or str(model).endswith(".keras"):
        raise InputError(f"{where} is for native models (PyTorch, JAX); '{model}' is a Keras "
                         "model, whose initial weights are drawn per seed")
    check_input_file(Path(path), where)


def build(model: str, input_shape: tuple, outputs: int):
    """The uncompiled Keras model, checked to take `input_shape` rows and give `outputs`."""
    import keras

    check_model_name(model)
    path = model_file(model)
    if path is None:
        built, what = MODELS[model](input_shape, outputs), f"model '{model}'"
    elif path.suffix == ".keras":
        what = f"model file '{path}'"
        try:
            built = keras.saving.load_model(path, compile=False)
        except Exception as exc:  # a zip that is no model, a model of unknown layers
            raise InputError(f"{what} is not a Keras model: {_first(exc)}") from None
    else:
        function, what = model.rsplit(":", 1)[1], f"model '{model}'"
        built = _call(path, function, input_shape, outputs, what)
    if not isinstance(built, keras.Model):
        raise InputError(f"{what} did not give a Keras model (got {type(built).__name__})")
    try:
        if not built.built:
            built.build((None, *input_shape))
        out = built.compute_output_spec(keras.KerasTensor((2, *input_shape))).shape
    except Exception as exc:
        raise InputError(f"the data's rows (shape {tuple(input_shape)}) do not fit {what}: "
                         f"{_first(exc)}") from None
    if tuple(out[1:]) not in ((outputs,), () if outputs == 1 else (outputs,)):
        raise InputError(f"{what} gives outputs of shape {tuple(out[1:])}, the data needs "
                         f"({outputs},)")
    return built


def _call(path: Path, function: str, input_shape, outputs, what: str):
    try:
        loaded = importlib.util.spec_from_file_location(f"user_model_{path.stem}", path)
        module = importlib.util.module_from_spec(loaded)
        loaded.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # sys.exit in the file is its failure too
        raise InputError(f"{what}: importing '{path}' failed: {_first(exc)}") from None
    if not callable(getattr(module, function, None)):
        raise InputError(f"{what}: '{path}' defines no function '{function}'")
    try:
        return getattr(module, function)(tuple(input_shape), outputs)
    except (Exception, SystemExit) as exc:
        raise InputError(f"{what} failed to build: {_first(exc)}") from None


def loss_name(loss: str) -> tuple[str, bool]:
    """(the Keras loss's name, whether the model gives logits) of `name` or `name:from_logits`."""
    name = str(loss)
    return (name[:-len(LOGITS)], True) if name.endswith(LOGITS) else (name, False)


def loss_function(loss: str, where: str = "loss"):
    """Keras's loss function by name, with from_logits=True bound for `name:from_logits`."""
    import functools
    import inspect

    import keras

    name, logits = loss_name(loss)
    try:
        function = keras.losses.get(name)
    except Exception:
        function = None
    if function is None or not isinstance(loss, str):
        raise InputError(f"{where}: unknown Keras loss '{loss}' (e.g. "
                         "sparse_categorical_crossentropy, binary_crossentropy, mse; "
                         f"NAME{LOGITS} for a model giving logits)")
    if not logits:
        return function
    if "from_logits" not in inspect.signature(function).parameters:
        raise InputError(f"{where}: the Keras loss '{name}' takes no from_logits")

    @functools.wraps(function)
    def on_logits(y_true, y_pred):
        return function(y_true, y_pred, from_logits=True)

    return on_logits


def compile_loss(loss: str):
    """What `model.compile(loss=...)` is given: the name, or the function with from_logits
    bound (compile wraps a function as it wraps a name's)."""
    name, logits = loss_name(loss)
    return loss_function(loss) if logits else name


def loss_object(loss: str, where: str = "loss"):
    """loss(y_true, y_pred) -> the mean over the rows, as `model.compile(loss=name)` computes it
    (whose wrapper gives 1-D labels the model's trailing axis of 1; the plain Keras function
    would broadcast (n,) against (n, 1) into an n x n matrix)."""
    import keras

    function = loss_function(loss, where)
    name, _ = loss_name(loss)

    def mean_loss(y_true, y_pred):
        y_pred = keras.ops.convert_to_tensor(y_pred)
        y_true = keras.ops.convert_to_tensor(y_true)
        if name not in SPARSE and len(y_true.shape) == len(y_pred.shape) - 1:
            y_true = keras.ops.expand_dims(y_true, -1)
        return keras.ops.mean(function(y_true, y_pred))

    return mean_loss


def check_outputs(loss: str, y_pred: np.ndarray, what: str) -> None:
    """Before training: a loss that expects probabilities gets probabilities (a model ending in
    a linear layer gives logits, which such a loss clips into an ill-defined objective)."""
    name, logits = loss_name(loss)
    if logits or name not in PROBABILITY + SPARSE:
        return
    y_pred = np.asarray(y_pred, np.float64)
    low, high = float(y_pred.min()), float(y_pred.max())
    sums = y_pred.reshape(len(y_pred), -1).sum(axis=1)
    bad = low < 0 or high > 1
    if name in DISTRIBUTION and y_pred.reshape(len(y_pred), -1).shape[1] > 1:
        bad = bad or not np.allclose(sums, 1.0, atol=1e-3)
    if bad:
        head = "a softmax" if name in DISTRIBUTION else "a sigmoid"
        raise InputError(f"{what} gives outputs from {low:.3g} to {high:.3g} (rows summing to "
                         f"{sums.min():.3g}..{sums.max():.3g}), but {name} expects "
                         f"probabilities: end the model with {head}, or give the loss as "
                         f"'{name}{LOGITS}' if these are logits")


def check_target_value(metric: str, value: float, mode: str, loss: str | None) -> None:
    """A given target the metric can reach, in the direction it improves: a val_loss target
    below 0 (or an accuracy above 1) runs to the budget, and mode = "max" on a loss is
    "reached" at the first evaluation."""
    name = metric.removeprefix("val_")
    if metric == "val_loss":
        if mode != "min":
            raise InputError("mode must be min for val_loss (a loss falls as the model learns; "
                             "max would be met at the first evaluation)")
        if value < 0 and loss is not None and loss_name(loss)[0] not in NEGATIVE_LOSSES:
            raise InputError(f"val_loss {value:g} is below 0, which {loss_name(loss)[0]} never "
                             "goes: the run could only time out")
    elif any(word in name for word in FRACTIONS):
        if mode != "max":
            raise InputError(f"mode must be max for {metric} (it rises as the model learns)")
        if not 0 <= value <= 1:
            raise InputError(f"{metric} {value:g} is outside [0, 1], the values {name} takes: "
                             "the run could only time out")


def metric_object(name: str, where: str = "metric"):
    import keras

    try:
        return keras.metrics.get(name)
    except Exception:
        raise InputError(f"{where}: unknown Keras metric '{name}' (e.g. accuracy, "
                         "binary_accuracy, mae)") from None


def mode_of(metric: str) -> str:
    """min or max: which way a validation metric improves (the loss: min)."""
    name = metric.removeprefix("val_")
    return "max" if any(word in name for word in HIGHER_IS_BETTER) else "min"


def outputs_for(loss: str, y_train: np.ndarray, y_val: np.ndarray, source: str) -> int:
    """How many outputs the model needs, with the labels checked against the loss's range."""
    y = np.concatenate([y_train.reshape(len(y_train), -1), y_val.reshape(len(y_val), -1)])
    loss, _ = loss_name(loss)
    if loss in SPARSE and (y.shape[1] != 1 or not np.all(np.equal(np.mod(y, 1), 0))
                           or y.min() < 0):
        raise InputError(f"{source}: labels must be class indices 0, 1, ... for {loss}; "
                         f"found values from {y.min():g} to {y.max():g}")
    if loss in PROBABILITY and (y.min() < 0 or y.max() > 1):
        raise InputError(f"{source}: labels must lie in [0, 1] for {loss}; found values from "
                         f"{y.min():g} to {y.max():g}")
    if loss in SPARSE + PROBABILITY and len(np.unique(y_train.reshape(len(y_train), -1),
                                                      axis=0)) < 2:
        raise InputError(f"{source}: the training labels are all one class, so {loss} has "
                         "nothing to learn (a softmax over one class gives 1: the loss is 0 "
                         "whatever the weights); the labels need two classes or more")
    if loss in SPARSE:
        return int(y.max()) + 1
    if loss in DISTRIBUTION and y.shape[1] < 2:
        raise InputError(f"{source}: {loss} needs one column per class (one-hot, two or "
                         f"more), the labels have {y.shape[1]}")
    if not np.isfinite(y.astype(np.float64)).all():
        raise InputError(f"{source}: labels have non-finite values")
    return y.shape[1]


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
