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
from study.train.examples import MODELS

# losses whose labels are class indices, probabilities, or anything finite
SPARSE = ("sparse_categorical_crossentropy",)
PROBABILITY = ("binary_crossentropy", "categorical_crossentropy", "binary_focal_crossentropy",
               "categorical_focal_crossentropy")
HIGHER_IS_BETTER = ("accuracy", "auc", "precision", "recall", "f1", "r2")


def model_file(model: str) -> Path | None:
    """The user's file behind a model name (None for a shipped example)."""
    if model in MODELS:
        return None
    return Path(model.rsplit(":", 1)[0] if model.rsplit(":", 1)[0].endswith(".py") else model)


def check_model_name(model: str, where: str = "model") -> None:
    """The name's form and that its file is there (before anything runs)."""
    if not isinstance(model, str) or not model:
        raise InputError(f"{where} must be a name ({', '.join(MODELS)}), a .keras file or "
                         f"file.py:function, got {model!r}")
    path = model_file(model)
    if path is None:
        return
    if path.suffix == ".py" and ":" not in model:
        raise InputError(f"{where} '{model}': name the function too (file.py:function)")
    if path.suffix not in (".keras", ".py"):
        raise InputError(f"{where} '{model}' is neither a shipped model ({', '.join(MODELS)}), "
                         "a .keras file nor file.py:function")
    if not path.is_file():
        raise InputError(f"{where}: file '{path}' does not exist")


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
    except Exception as exc:
        raise InputError(f"{what}: importing '{path}' failed: {_first(exc)}") from None
    if not callable(getattr(module, function, None)):
        raise InputError(f"{what}: '{path}' defines no function '{function}'")
    try:
        return getattr(module, function)(tuple(input_shape), outputs)
    except Exception as exc:
        raise InputError(f"{what} failed to build: {_first(exc)}") from None


def loss_object(name: str, where: str = "loss"):
    """loss(y_true, y_pred) -> the mean over the rows, as `model.compile(loss=name)` computes it
    (whose wrapper gives 1-D labels the model's trailing axis of 1; the plain Keras function
    would broadcast (n,) against (n, 1) into an n x n matrix)."""
    import keras

    try:
        function = keras.losses.get(name)
    except Exception:
        function = None
    if function is None or not isinstance(name, str):
        raise InputError(f"{where}: unknown Keras loss '{name}' (e.g. "
                         "sparse_categorical_crossentropy, binary_crossentropy, mse)")

    def mean_loss(y_true, y_pred):
        y_pred = keras.ops.convert_to_tensor(y_pred)
        y_true = keras.ops.convert_to_tensor(y_true)
        if name not in SPARSE and len(y_true.shape) == len(y_pred.shape) - 1:
            y_true = keras.ops.expand_dims(y_true, -1)
        return keras.ops.mean(function(y_true, y_pred))

    return mean_loss


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
    if loss in SPARSE:
        if y.shape[1] != 1 or not np.all(np.equal(np.mod(y, 1), 0)) or y.min() < 0:
            raise InputError(f"{source}: labels must be class indices 0, 1, ... for {loss}; "
                             f"found values from {y.min():g} to {y.max():g}")
        return int(y.max()) + 1
    if loss in PROBABILITY and (y.min() < 0 or y.max() > 1):
        raise InputError(f"{source}: labels must lie in [0, 1] for {loss}; found values from "
                         f"{y.min():g} to {y.max():g}")
    if not np.isfinite(y.astype(np.float64)).all():
        raise InputError(f"{source}: labels have non-finite values")
    return y.shape[1]


def _first(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
