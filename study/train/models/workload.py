"""The small interface behind native models, modelled on AlgoPerf's workload / submission split:
the workload is the model and its data (initial parameters, the loss on a batch, evaluation,
flat vectors), the submission the optimizer (state, update). Each framework's adapter implements
both; our L-BFGS is one submission for every model, Keras's included. `WorkloadStepper` joins the
two into the stepper the segmented loop (study.train.run.loop) times, as it times Keras runs.

The loop dispatches K steps and then reads the host once, so `Workload.loss` and
`Submission.update` return device values and never read them; `Workload.evaluate` runs off the
clock; L-BFGS's host work goes through `Workload.flat_value_and_grad`. The training arrays are
an argument of `loss`: a JAX program would embed a closed-over array.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import SimpleNamespace

import numpy as np

from convergence_study.errors import InputError
from optimizers.lbfgs import LBFGS
from study.frameworks.registry import make_backend
from study.train.models.model import (
    LOGIT_OUTPUTS,
    check_native_loss,
    describe,
    labels_are_indices,
    loss_label,
    loss_meaning,
    named_loss,
)

LBFGS_NAME = "lbfgs"  # our L-BFGS, full batch, on every framework


class Workload(ABC):
    """A native model and its data on one framework; each framework's subclass says how it
    places, converts and calls (the hooks below), the checks and evaluation are the same."""

    framework: str  # the registry's name of its framework
    place = ops = None  # its device of "cpu" or "gpu"; the functions model.named_loss uses
    ARRAY = "an array"  # what its model and loss must return, in messages
    kind: str  # what the user's function returned, in words
    metric: str
    loss_label: str  # the loss that runs, as the row records it (a callable's qualified name)
    data: tuple

    def __init__(self, native, arrays: dict, loss, metric: str, device: str = "cpu",
                 initial=None, seed: int = 0):
        self.what, self.kind = native.what, native.kind
        self.device = self.place(device)
        self.metric = check_metric(metric)
        self.loss_used, self.loss_fn, self.loss_label, indices = run_loss(native, loss,
                                                                          self.ops())
        self.names = self.take_parameters(native, initial, seed)
        integers = integer_labels(indices, arrays["y_train"])
        self.data = (self.put(arrays["x_train"]), self.put(arrays["y_train"], integers))
        self.val = (self.put(arrays["x_val"]), self.put(arrays["y_val"], integers))
        self.y_val_host = np.asarray(arrays["y_val"])
        self._check(native.outputs)

    # The hooks the default __init__, checks, loss and evaluation call: a workload that defines
    # those itself (a framework of your own) needs none of them.
    def take_parameters(self, native, initial, seed: int) -> list[str]:
        """The model's parameters taken (from `initial`'s .npz where given): their names."""
        raise NotImplementedError

    def put(self, values, integers: bool = False):
        """Host values on the device, as int or float32."""
        raise NotImplementedError

    def trial(self, function, *arguments):
        """`function(*arguments)` before any clock, for its shape (no gradient kept)."""
        raise NotImplementedError

    def is_array(self, value) -> bool:
        raise NotImplementedError

    def mismatch(self, exc: Exception) -> InputError:
        """The one line for a model that fails on the first training rows."""
        raise NotImplementedError

    def forward(self, params, x):
        raise NotImplementedError

    def evaluation(self, params) -> tuple[float, np.ndarray]:
        """(the loss, the outputs on the host) on the validation rows, in evaluation mode."""
        raise NotImplementedError

    @abstractmethod
    def init_parameters(self): ...

    @abstractmethod
    def to_flat(self, params) -> np.ndarray: ...

    @abstractmethod
    def from_flat(self, w: np.ndarray): ...

    @abstractmethod
    def flat_value_and_grad(self): ...

    @abstractmethod
    def parameter_count(self) -> int: ...

    @abstractmethod
    def placed(self) -> str:
        """Where the parameters lie, in the framework's words (cpu:0, cuda:0...)."""

    def probe(self, rows: int = 256) -> tuple[np.ndarray, float]:
        """The outputs (on the host) and the loss on the validation rows (a workload may take the
        first `rows`) at the initial parameters, in evaluation mode (model_checks judges them)."""
        value, out = self.evaluation(self.init_parameters())
        return out, value

    def _check(self, outputs: int) -> None:
        """Before anything is timed: the rows fit, the outputs' shape, a scalar loss."""
        x, y = self.data
        try:
            out = self.trial(self.forward, self.initial, x[:2])
        except Exception as exc:  # the model's shape is in its own words
            raise self.mismatch(exc) from None
        if not self.is_array(out):
            raise InputError(f"{self.what} returns {type(out).__name__}, not {self.ARRAY}")
        check_outputs(self.what, tuple(out.shape), 2, outputs)
        if len(out.shape) == 2 and out.shape[1] == 1 and y.ndim == 1:  # labels shaped as outputs
            y, self.val = y.reshape(-1, 1), (self.val[0], self.val[1].reshape(-1, 1))
            self.data = (x, y)
        try:
            value = self.trial(self.loss_fn, out, y[:2])
        except Exception as exc:
            raise loss_failure(self.what, self.loss_fn, out, y[:2], exc, self.trial) from None
        if not self.is_array(value):
            raise InputError(f"{self.what}: the loss returns {type(value).__name__}, not "
                             f"{self.ARRAY}")
        check_scalar(self.what, tuple(value.shape))

    def loss(self, params, data, index):
        xs, ys = data
        if index is not None:
            xs, ys = xs[index], ys[index]
        return self.loss_fn(self.forward(params, xs), ys)

    def indices(self, rows: list) -> list:
        return [self.put(r, True) for r in rows]

    def evaluate(self, params) -> dict:
        value, out = self.evaluation(params)
        return {"val_loss": value,
                f"val_{self.metric}": host_metric(self.metric, self.loss_used, out,
                                                  self.y_val_host)}

    def read(self, value) -> float:
        return float(value)

    def random_in_training(self) -> bool:
        """Whether two training-mode passes over the same rows give different outputs (a layer
        that draws noise); False where training draws nothing (a JAX apply takes no key)."""
        return False

    def record(self) -> dict:
        return {"framework": self.framework, "model_kind": self.kind, "loss": self.loss_label}


class Submission(ABC):
    name: str

    @abstractmethod
    def init(self, workload: Workload, params): ...

    @abstractmethod
    def warm(self, workload: Workload, state, index) -> None: ...

    @abstractmethod
    def update(self, workload: Workload, state, index): ...

    @abstractmethod
    def parameters(self, workload: Workload, state): ...

    def record(self) -> dict:
        return {}


class LbfgsSubmission(Submission):
    """Our L-BFGS (optimizers/lbfgs.py, its algebra on the host in float64) on the flattened
    parameters, full batch: the batch index is ignored."""

    name = LBFGS_NAME

    def __init__(self, hyperparameters: dict):
        unknown = set(hyperparameters) - {"history"}
        if unknown:
            raise InputError(f"lbfgs takes history only, got {sorted(unknown)}")
        history = hyperparameters.get("history", 10)
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise InputError(f"lbfgs: history must be an integer >= 1, got {history!r}")
        self.lbfgs = LBFGS(history=history, line_search="wolfe")
        self.ops = make_backend("numpy", "float64")
        self.objective = self.state = None

    def init(self, workload, params):
        self.objective = _Objective(workload.flat_value_and_grad())
        self.state = SimpleNamespace(w0=workload.to_flat(params), inner=None)
        return self.state

    def warm(self, workload, state, index) -> None:
        self.objective.value_and_grad(state.w0)  # the flat objective traces and compiles

    def update(self, workload, state, index):
        if state.inner is None:  # the first step: the start's loss, then an iteration
            state.inner = self.lbfgs.init(self.objective, self.ops, (), state.w0)
        state.inner = self.lbfgs.update(self.objective, self.ops, (), state.inner)
        return state, state.inner.f

    def parameters(self, workload, state):
        return workload.from_flat(state.w0 if state.inner is None else state.inner.w)

    def record(self) -> dict:
        inner = self.state.inner if self.state is not None else None
        evaluations = 1 + int(np.asarray(inner.evaluations)) if inner is not None else 0
        return {"optimizer_library": "ours", "loss_evaluations": evaluations}


class _Objective:
    def __init__(self, function):
        self.value_and_grad = function


class WorkloadStepper:
    """A workload and a submission as study.train.run.loop's stepper: prepare (indices on the
    device, off the clock), run (K updates, no host read), read (the one synchronization)."""

    def __init__(self, workload: Workload, submission: Submission, rows):
        self.workload, self.submission, self.rows = workload, submission, rows
        self.state = submission.init(workload, workload.init_parameters())

    def prepare(self, first: int, count: int):
        return self.workload.indices([np.asarray(self.rows(i)) for i in
                                      range(first, first + count)])

    def warm(self, prepared) -> None:
        self.submission.warm(self.workload, self.state, prepared[0])

    def run(self, prepared):
        update, workload, state, loss = self.submission.update, self.workload, self.state, None
        for index in prepared:
            state, loss = update(workload, state, index)
        self.state = state
        return loss

    def read(self, value) -> float:
        return self.workload.read(value)

    def evaluate(self) -> dict:
        return self.workload.evaluate(self.submission.parameters(self.workload, self.state))

    # the Keras steppers' names, so code written for them can hold either
    def write_back(self) -> None:
        """The submission's parameters handed to the workload (a Keras model's variables)."""
        self.submission.parameters(self.workload, self.state)

    def reload(self) -> None:
        pass


METRICS = ("accuracy", "binary_accuracy", "categorical_accuracy",
           "sparse_categorical_accuracy", "mae", "mse")


def check_metric(metric: str) -> str:
    if metric not in METRICS:
        raise InputError(f"metric: native models compute {', '.join(METRICS)}, got {metric!r}")
    return metric


def host_metric(metric: str, loss, y_pred: np.ndarray, y_true: np.ndarray) -> float:
    """The validation metric on the host, as Keras's metric of that name computes it
    ("accuracy" resolved by the loss's labels as `compile` does, else by the shapes)."""

    expects, family = loss_meaning(loss)
    y_pred = np.asarray(y_pred, np.float64)
    y_true = np.asarray(y_true)
    if metric == "accuracy":
        metric = {"sparse": "sparse_categorical_accuracy", "binary": "binary_accuracy",
                  "categorical": "categorical_accuracy"}.get(family)
        if metric is None:
            several = y_pred.ndim == 2 and y_pred.shape[1] > 1
            metric = ("binary_accuracy" if not several else "sparse_categorical_accuracy"
                      if y_true.size == len(y_true) else "categorical_accuracy")
    if metric == "sparse_categorical_accuracy":
        return float(np.mean(np.argmax(y_pred, -1) == y_true.reshape(len(y_true))))
    if metric == "categorical_accuracy":
        return float(np.mean(np.argmax(y_pred, -1) == np.argmax(y_true, -1)))
    y_true = y_true.reshape(y_pred.shape).astype(np.float64)
    if metric == "binary_accuracy":
        threshold = 0.0 if expects == LOGIT_OUTPUTS else 0.5
        return float(np.mean((y_pred > threshold) == (y_true > 0.5)))
    if metric == "mae":
        return float(np.mean(np.abs(y_pred - y_true)))
    return float(np.mean((y_pred - y_true) ** 2))


def run_loss(native, loss, ops):
    """(the loss, loss(outputs, labels), its label in the row, whether its labels are class
    indices: True, False, None for either): the callable returned with the model, else the loss
    by name written with the framework's `ops`."""

    loss = check_native_loss(native.loss if native.loss is not None else loss, native.what)
    function = loss if callable(loss) else named_loss(loss, ops)
    return loss, function, loss_label(loss), labels_are_indices(loss)


def integer_labels(indices: bool | None, labels) -> bool:
    """Labels go to the model as integers for a loss of class indices, and for a callable of
    unknown meaning where they are integers; else as float32."""
    return indices is True or (indices is None
                               and np.issubdtype(np.asarray(labels).dtype, np.integer))


def check_outputs(what: str, shape: tuple, rows: int, outputs: int) -> None:
    """The model's outputs on `rows` rows must be (rows, outputs), or (rows,) for one output."""
    if tuple(shape) not in ((rows, outputs), (rows,) if outputs == 1 else (rows, outputs)):
        raise InputError(f"{what} gives outputs of shape {tuple(shape)} on {rows} rows, the data "
                         f"needs ({rows}, {outputs})")


def check_scalar(what: str, shape: tuple) -> None:
    if tuple(shape) != ():
        raise InputError(f"{what}: the loss must be a scalar (the mean over the batch), got "
                         f"shape {tuple(shape)}")


def initial_arrays(path, names: list[str], shapes: list[tuple], what: str) -> list[np.ndarray]:
    """Initial parameters from an .npz: by the model's parameter names, else as w0, w1, ...
    (Keras's get_weights order); shapes checked."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise InputError(f"initial parameters: file '{path}' does not exist")
    try:
        with np.load(path) as archive:
            stored = {name: archive[name] for name in archive.files}
    except Exception as exc:
        raise InputError(f"initial parameters: '{path}' is not an .npz file "
                         f"({type(exc).__name__})") from None
    if all(name in stored for name in names):
        keys = names
    elif all(f"w{i}" in stored for i in range(len(names))):
        keys = [f"w{i}" for i in range(len(names))]
    else:
        raise InputError(f"initial parameters: '{path}' holds {sorted(stored)[:8]}; {what} needs "
                         f"{names[:8]} (its parameter names) or w0..w{len(names) - 1}")
    if len(stored) != len(names):
        raise InputError(f"initial parameters: '{path}' holds {len(stored)} arrays, {what} has "
                         f"{len(names)} parameters")
    out = []
    for key, name, shape in zip(keys, names, shapes, strict=True):
        value = np.asarray(stored[key])
        if tuple(value.shape) != tuple(shape):
            raise InputError(f"initial parameters: '{path}' {key} has shape {value.shape}, "
                             f"{what}'s {name} needs {tuple(shape)}")
        if not np.isfinite(value).all():
            raise InputError(f"initial parameters: '{path}' {key} has non-finite values")
        with np.errstate(over="ignore"):
            value = value.astype(np.float32)  # what the model is given
        if not np.isfinite(value).all():
            raise InputError(f"initial parameters: '{path}' {key} has values beyond float32's "
                             "range (about 3.4e38), which become inf in the model's float32")
        out.append(value)
    return out


def loss_failure(what: str, loss_fn, outputs, labels, exc: BaseException, call) -> InputError:
    """The one line for a loss that failed as `loss(outputs, labels)`; where the other order
    works (Equinox's tutorial's `cross_entropy(y, pred_y)`), the line says which is expected."""
    try:
        call(loss_fn, labels, outputs)
    except Exception:  # noqa: BLE001 - no order works: the loss's own words
        return InputError(f"{what}: the loss failed on its outputs: {describe(exc)}")
    return InputError(f"{what}: the loss takes (labels, outputs), but it is called as "
                      "loss(outputs, labels) (the model's outputs first); return "
                      "`lambda outputs, labels: "
                      f"your_loss(labels, outputs)` with the model (in that order it failed: "
                      f"{describe(exc)})")
