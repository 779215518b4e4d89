"""The model of a train run by name (a shipped example, a `.keras` file or `file.py:function`),
and the one loss table every model kind uses. Nothing here imports Keras."""

from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from convergence_study.errors import InputError
from datasets.files import check_input_file
from study.train.frameworks import native_adapters, native_titles
from study.train.models.examples import MODELS, NATIVE_MODELS

SHIPPED = (*MODELS, *NATIVE_MODELS)  # the Keras examples and their native twins, by name

# The losses by name, on every model kind (Keras on each framework, and the native ones), in
# three meanings of the model's outputs: Keras's names take probabilities (clipped to
# [EPSILON, 1 - EPSILON], as Keras computes them), `NAME:from_logits` takes logits (a linear
# last layer), and the NLL names take log-probabilities (a log_softmax last layer, as PyTorch's
# F.nll_loss does): nll with class indices, categorical_nll with one-hot labels.
NLL = {"nll": "sparse_categorical_crossentropy",
       "categorical_nll": "categorical_crossentropy"}
# losses whose labels are class indices, probabilities, or anything finite
SPARSE = ("sparse_categorical_crossentropy", "nll")
PROBABILITY = ("binary_crossentropy", "categorical_crossentropy", "binary_focal_crossentropy",
               "categorical_focal_crossentropy", "categorical_nll")
# of those, the ones whose predictions are a distribution over the last axis (softmax)
DISTRIBUTION = ("sparse_categorical_crossentropy", "categorical_crossentropy",
                "categorical_focal_crossentropy", *NLL)
LOGITS = ":from_logits"  # `--loss NAME:from_logits`: the model gives logits (a linear last layer)
EPSILON = 1e-7  # keras.config.epsilon()
# what a loss expects the model to output
PROBABILITIES, LOG_PROBABILITIES, LOGIT_OUTPUTS = "probabilities", "log-probabilities", "logits"
HIGHER_IS_BETTER = ("accuracy", "auc", "precision", "recall", "f1", "r2")
FRACTIONS = ("accuracy", "auc", "precision", "recall")  # metrics in [0, 1], higher is better
NEGATIVE_LOSSES = ("cosine_similarity",)  # the Keras losses that go below 0
# words of the Keras metrics that never go below 0 (errors, crossentropies, divergences...)
NONNEGATIVE = ("error", "mae", "mse", "mape", "msle", "crossentropy", "hinge", "divergence",
               "kld", "poisson", "cosh")


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

        raise InputError(f"{where} is for native models ({native_titles()}); '{model}' is a Keras "
                         "model, whose initial weights are drawn per seed")
    check_input_file(Path(path), where)


@contextmanager
def beside(path: Path):
    """The model file's folder first on the import path while it loads and builds, as Python
    puts a script's own folder there: a model file imports a module beside it."""
    folder = str(Path(path).resolve().parent)
    sys.path.insert(0, folder)
    try:
        yield
    finally:
        if folder in sys.path:
            sys.path.remove(folder)


def import_file(path: Path, what: str):
    """A model file as a module (its folder on the path); any failure one line."""
    with beside(path):
        try:
            loaded = importlib.util.spec_from_file_location(f"user_model_{path.stem}", path)
            module = importlib.util.module_from_spec(loaded)
            loaded.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            raise InputError(f"{what}: importing '{path}' failed: {describe(exc)}") from None
    return module


def check_trainable(count: int, what: str) -> None:
    """A model with no trainable parameters (none, or all frozen): one line, before any clock."""
    if not count:
        raise InputError(f"{what} has no trainable parameters (none, or all frozen): nothing "
                         "to train")


def loss_name(loss: str) -> tuple[str, bool]:
    """(the Keras loss's name, whether the model gives logits) of `name` or `name:from_logits`."""
    name = str(loss)
    return (name[:-len(LOGITS)], True) if name.endswith(LOGITS) else (name, False)


def loss_label(loss) -> str | None:
    """The loss as the row records it: the name as given, or a callable's qualified name
    (`torch.nn.functional.nll_loss`, `torch.nn.modules.loss.CrossEntropyLoss` for an instance)."""
    if loss is None or isinstance(loss, str):
        return loss
    target = getattr(loss, "func", loss)  # a functools.partial: its function
    if not hasattr(target, "__qualname__"):
        target = type(target)  # an instance, e.g. torch.nn.CrossEntropyLoss()
    return f"{getattr(target, '__module__', None) or '?'}.{target.__qualname__}"


def known_callables() -> dict:
    """Each adapter's `KNOWN_LOSSES`: callables whose meaning is known, by qualified name."""
    return {name: meaning for a in native_adapters() for name, meaning in a.KNOWN_LOSSES.items()}


def loss_meaning(loss) -> tuple[str | None, str | None]:
    """(what the model must output, None where any values do; the labels' family: sparse,
    categorical, binary or None) of a loss by name or a known callable."""
    if loss is not None and not isinstance(loss, str):
        return known_callables().get(loss_label(loss), (None, None))
    name, logits = loss_name(loss)
    base = NLL.get(name, name)
    family = ("sparse" if base in SPARSE else "binary" if base.startswith("binary")
              else "categorical" if base in PROBABILITY else None)
    if family is None:
        return None, None
    return (LOGIT_OUTPUTS if logits else LOG_PROBABILITIES if name in NLL
            else PROBABILITIES), family


def labels_are_indices(loss) -> bool | None:
    """Whether the loss takes class indices (True), other labels (False) or either (None: a
    callable of unknown meaning, which gets integer labels as integers)."""
    family = None if loss is None else loss_meaning(loss)[1]
    return None if family is None and not isinstance(loss, str) else family == "sparse"


# the loss by name that fits what a model outputs, per family of labels
FITS = {"sparse": {PROBABILITIES: "sparse_categorical_crossentropy",
                   LOGIT_OUTPUTS: "sparse_categorical_crossentropy" + LOGITS,
                   LOG_PROBABILITIES: "nll"},
        "categorical": {PROBABILITIES: "categorical_crossentropy",
                        LOGIT_OUTPUTS: "categorical_crossentropy" + LOGITS,
                        LOG_PROBABILITIES: "categorical_nll"},
        "binary": {PROBABILITIES: "binary_crossentropy",
                   LOGIT_OUTPUTS: "binary_crossentropy" + LOGITS}}


def output_kind(y_pred: np.ndarray) -> tuple[str, str]:
    """(probabilities, log-probabilities or logits; the evidence in words) of a classifier's
    outputs on a probe batch."""
    y = np.asarray(y_pred, np.float64).reshape(len(y_pred), -1)
    low, high = float(y.min()), float(y.max())
    if y.shape[1] == 1:
        if 0 <= low and high <= 1:
            return PROBABILITIES, "values in [0, 1]"
        return LOGIT_OUTPUTS, f"values from {low:.3g} to {high:.3g}, outside [0, 1]"
    sums = y.sum(axis=1)
    if low >= 0 and np.allclose(sums, 1.0, atol=1e-3):
        return PROBABILITIES, "rows of values >= 0 summing to 1"
    if high <= 1e-6 and np.allclose(np.exp(y).sum(axis=1), 1.0, atol=1e-3):
        return LOG_PROBABILITIES, "values <= 0 whose exponentials sum to 1 per row"
    return LOGIT_OUTPUTS, (f"rows do not sum to 1: sums from {sums.min():.3g} to "
                           f"{sums.max():.3g}, values from {low:.3g} to {high:.3g}")


def check_outputs(loss, y_pred: np.ndarray, what: str) -> None:
    """Before any clock, on a probe batch at the initial weights, for every model kind: finite
    outputs, of the kind the loss takes. A probability loss clips logits into an ill-defined
    objective, and normalises log-probabilities into one that can meet a loss target at zero
    accuracy; the refusal names the loss that fits."""
    y_pred = np.asarray(y_pred, np.float64)
    if not np.isfinite(y_pred).all():
        raise InputError(f"{what} gives non-finite outputs (NaN or inf) at its initial weights, "
                         "before any training: nothing can be trained from there; check its "
                         "initialization (or the initial parameters' file)")
    expects, family = loss_meaning(loss)
    if expects is None or y_pred.size == 0:
        return
    kind, evidence = output_kind(y_pred)
    several = y_pred.reshape(len(y_pred), -1).shape[1] > 1
    # one column: only a probability loss is checked (logits may lie in [0, 1] by chance);
    # log-probabilities are logits too (log_softmax leaves them as they are): from_logits fits
    if kind == expects or (not several and expects != PROBABILITIES) \
            or (kind == LOG_PROBABILITIES and expects == LOGIT_OUTPUTS):
        return
    name, fit = loss_label(loss), FITS[family].get(kind, FITS[family][LOGIT_OUTPUTS])
    head = "a softmax" if several else "a sigmoid"
    how = (f"end the model with {head}, or give the loss as '{fit}'"
           if kind == LOGIT_OUTPUTS and expects == PROBABILITIES else f"give the loss as '{fit}'")
    if not isinstance(loss, str):
        how += " (by name, the model returned without its loss)"
    raise InputError(f"{what} outputs {kind} ({evidence}), but {name} expects {expects}: {how}")


# the losses native models take by name (each also as NAME:from_logits where it is a
# cross-entropy), computed by `named_loss` with Keras's meaning of each
NATIVE_LOSSES = {"mse": "mse", "mean_squared_error": "mse", "mae": "mae",
                 "mean_absolute_error": "mae", "binary_crossentropy": "binary_crossentropy",
                 "categorical_crossentropy": "categorical_crossentropy",
                 "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
                 "nll": "sparse_categorical_crossentropy",
                 "categorical_nll": "categorical_crossentropy"}


def check_native_loss(loss, what: str):
    """A native model's loss: a callable returned with it, or a name it takes (one line)."""
    if loss is None:
        raise InputError(f"loss: {what} returns no loss with it; give one by name (e.g. "
                         f"sparse_categorical_crossentropy, nll, mse; NAME{LOGITS} for "
                         "logits)")
    if callable(loss):
        return loss
    name, logits = loss_name(loss)
    if name not in NATIVE_LOSSES or (logits and loss_meaning(name)[0] != PROBABILITIES):
        raise InputError(f"loss: native models take {', '.join(NATIVE_LOSSES)} by name "
                         f"(a cross-entropy also as NAME{LOGITS}), or a callable returned with "
                         f"the model, got {loss!r}")
    return loss


def named_loss(loss: str, ops):
    """loss(outputs, labels) -> the mean over the rows, for a native model, with the meaning
    Keras gives the name (a native model and its Keras twin agree), written once with the
    framework's few array functions `ops`."""
    name, _ = loss_name(loss)
    base, (expects, _) = NATIVE_LOSSES[name], loss_meaning(loss)
    mean, log = ops.mean, ops.log

    if base == "mse":
        return lambda out, y: mean((out - ops.shaped(y, out)) ** 2)
    if base == "mae":
        return lambda out, y: mean(ops.abs(out - ops.shaped(y, out)))
    if base == "binary_crossentropy":
        def binary(out, y):
            y = ops.shaped(y, out)
            if expects == LOGIT_OUTPUTS:
                return -mean(y * ops.log_sigmoid(out) + (1 - y) * ops.log_sigmoid(-out))
            p = ops.clip(out, EPSILON, 1 - EPSILON)
            return -mean(y * log(p) + (1 - y) * log(1 - p))
        return binary

    def log_probabilities(out):
        if expects == LOGIT_OUTPUTS:
            return ops.log_softmax(out)
        if expects == LOG_PROBABILITIES:
            return out
        return log(ops.clip(ops.normalize(out), EPSILON, 1 - EPSILON))

    if base == "categorical_crossentropy":
        return lambda out, y: -mean(ops.sum(y * log_probabilities(out)))
    return lambda out, y: -mean(ops.pick(log_probabilities(out), y))


def array_ops(xp, log_softmax, log_sigmoid, pick):
    """The array functions `named_loss` writes every loss with, from an array module with
    NumPy's names (jax.numpy, torch) and the framework's own three."""

    def shaped(y, out):
        same = y.shape != out.shape and np.prod(y.shape) == np.prod(out.shape)
        return y.reshape(out.shape) if same else y

    return SimpleNamespace(
        mean=xp.mean, log=xp.log, abs=xp.abs, clip=xp.clip, shaped=shaped,
        sum=lambda a: a.sum(-1), normalize=lambda a: a / a.sum(-1)[..., None],
        log_softmax=log_softmax, log_sigmoid=log_sigmoid, pick=pick)


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
    elif any(word in name for word in NONNEGATIVE) and value < 0:
        raise InputError(f"{metric} {value:g} is below 0, which {name} never goes: the run "
                         "could only time out")
    elif "cosine" in name and not -1 <= value <= 1:
        raise InputError(f"{metric} {value:g} is outside [-1, 1], the values {name} takes: the "
                         "run could only time out")
    elif "r2" in name and value > 1:  # r2_score is at most 1
        raise InputError(f"{metric} {value:g} is above 1, which {name} never goes: the run "
                         "could only time out")


def mode_of(metric: str) -> str:
    """min or max: which way a validation metric improves (the loss: min)."""
    name = metric.removeprefix("val_")
    return "max" if any(word in name for word in HIGHER_IS_BETTER) else "min"


def outputs_for(loss: str, y_train: np.ndarray, y_val: np.ndarray, source: str) -> int:
    """How many outputs the model needs, with the labels checked against the loss's range."""
    y = all_labels(y_train, y_val)
    loss, _ = loss_name(loss)
    classes = class_count(y, loss, f"{source}: ") if loss in SPARSE else None
    if loss in PROBABILITY and (y.min() < 0 or y.max() > 1):
        raise InputError(f"{source}: labels must lie in [0, 1] for {loss}; found values from "
                         f"{y.min():g} to {y.max():g}")
    if loss in SPARSE + PROBABILITY and len(np.unique(y_train.reshape(len(y_train), -1),
                                                      axis=0)) < 2:
        raise InputError(f"{source}: the training labels are all one class, so {loss} has "
                         "nothing to learn (a softmax over one class gives 1: the loss is 0 "
                         "whatever the weights); the labels need two classes or more")
    if classes:
        return classes
    if loss in DISTRIBUTION and y.shape[1] < 2:
        raise InputError(f"{source}: {loss} needs one column per class (one-hot, two or "
                         f"more), the labels have {y.shape[1]}")
    if not np.isfinite(y.astype(np.float64)).all():
        raise InputError(f"{source}: labels have non-finite values")
    return y.shape[1]


def all_labels(y_train: np.ndarray, y_val: np.ndarray) -> np.ndarray:
    """The training and validation labels, each row's as columns."""
    return np.concatenate([y_train.reshape(len(y_train), -1), y_val.reshape(len(y_val), -1)])


def class_count(y: np.ndarray, loss: str, head: str = "") -> int:
    """The number of classes of labels that must be class indices 0, 1, ..."""
    if y.shape[1] != 1 or not np.all(np.equal(np.mod(y, 1), 0)) or y.min() < 0:
        raise InputError(f"{head}labels must be class indices 0, 1, ... for {loss}; found values "
                         f"from {y.min():g} to {y.max():g}")
    return int(y.max()) + 1


def describe(exc: BaseException) -> str:
    """An exception as one line: its type and its message's first line (300 characters)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__
