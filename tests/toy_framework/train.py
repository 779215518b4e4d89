"""The toy's train-study adapter (`ADAPTER`, a study.train.frameworks.Adapter): Keras has no toy
backend, so it runs native toy models only (`ToyModel`: a linear layer and a sigmoid on NumPy
arrays; `linear` builds one, `--model tests/toy_framework/train.py:linear`), with its library's
`toy:sgd` and our lbfgs; a gradient is central finite differences (a toy has no autodiff)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np

from convergence_study.errors import InputError
from study.train.frameworks import Adapter
from study.train.models.workload import (
    Submission,
    Workload,
    check_metric,
    check_outputs,
    host_metric,
    run_loss,
)
from study.train.run.flat import flatten, layout, pieces


class ToyModel:
    """A linear layer and a sigmoid: outputs = sigmoid(x @ w + b), float64 NumPy arrays."""

    def __init__(self, inputs: int, outputs: int, seed: int):
        rng = np.random.default_rng(seed)
        self.params = [rng.normal(scale=0.1, size=(inputs, outputs)), np.zeros(outputs)]

    @staticmethod
    def apply(params, x):
        return 1.0 / (1.0 + np.exp(-(x.reshape(len(x), -1) @ params[0] + params[1])))


def linear(input_shape, outputs, seed: int = 0) -> ToyModel:
    """A user's model function for the toy framework: a model of the registered package's class
    (the one `module_kind` recognises), as a user's file imports its framework by name; this
    file, loaded by path as a model file, is another module."""
    from toy_framework.train import ToyModel as Registered

    return Registered(int(np.prod(input_shape)), outputs, seed)


def _ops():
    return SimpleNamespace(
        mean=np.mean, log=np.log, abs=np.abs, clip=np.clip, sum=lambda a: a.sum(-1),
        shaped=lambda y, out: y.reshape(out.shape) if y.size == out.size else y,
        normalize=lambda a: a / a.sum(-1, keepdims=True),
        log_softmax=lambda a: a - np.log(np.exp(a).sum(-1, keepdims=True)),
        log_sigmoid=lambda a: -np.logaddexp(0.0, -a),
        pick=lambda a, y: np.take_along_axis(a, y.reshape(-1, 1).astype(int), -1)[:, 0])


def _gradient(loss, flat: np.ndarray, step: float = 1e-6) -> np.ndarray:
    """Central finite differences of loss(flat) (float64)."""
    grad = np.empty_like(flat)
    for i in range(len(flat)):
        up, down = flat.copy(), flat.copy()
        up[i] += step
        down[i] -= step
        grad[i] = (loss(up) - loss(down)) / (2 * step)
    return grad


def flat_value_and_grad(weights, loss_at, data, device=None):
    shapes, ends = layout(weights)

    def at(flat):
        return float(loss_at(pieces(flat, shapes, ends, np.reshape), data))

    return lambda w: (at(np.asarray(w, np.float64)), _gradient(at, np.asarray(w, np.float64)))


class ToyWorkload(Workload):
    framework = "toy"

    def __init__(self, native, arrays: dict, loss, metric: str, device: str = "cpu",
                 initial=None, seed: int = 0):
        self.what, self.kind, self.device = native.what, native.kind, device
        self.metric = check_metric(metric)
        self.loss_used, self.loss_fn, self.loss_label, _ = run_loss(native, loss, _ops())
        self.initial = [p.copy() for p in native.obj.params]
        self.shapes, self.ends = layout(self.initial)
        self.data = (np.asarray(arrays["x_train"], np.float64),
                     np.asarray(arrays["y_train"], np.float64))
        self.val = (np.asarray(arrays["x_val"], np.float64), np.asarray(arrays["y_val"]))
        check_outputs(self.what, ToyModel.apply(self.initial, self.data[0][:2]).shape, 2,
                      native.outputs)

    def init_parameters(self):
        return [p.copy() for p in self.initial]

    def loss(self, params, data, index):
        xs, ys = data if index is None else (data[0][index], data[1][index])
        return self.loss_fn(ToyModel.apply(params, xs), ys)

    def indices(self, rows):
        return list(rows)

    def evaluate(self, params):
        out = ToyModel.apply(params, self.val[0])
        return {"val_loss": float(self.loss_fn(out, self.val[1].astype(np.float64))),
                f"val_{self.metric}": host_metric(self.metric, self.loss_used, out,
                                                  self.val[1])}

    def probe(self, rows: int = 256):
        out = ToyModel.apply(self.initial, self.val[0][:rows])
        return out, float(self.loss_fn(out, self.val[1][:rows].astype(np.float64)))

    def to_flat(self, params):
        return flatten(params)

    def from_flat(self, w):
        return pieces(np.asarray(w, np.float64), self.shapes, self.ends, np.reshape)

    def flat_value_and_grad(self):
        return flat_value_and_grad(self.initial, lambda p, d: self.loss(p, d, None), self.data,
                                   self.device)

    def read(self, value):
        return float(value)

    def parameter_count(self):
        return int(sum(p.size for p in self.initial))

    def placed(self):
        return "cpu:0"


class ToySgd(Submission):
    """toy:sgd: plain gradient steps on the batch."""

    def __init__(self, rate: float):
        self.rate, self.name = rate, "toy:sgd"

    def init(self, workload, params):
        return workload.to_flat(params)

    def warm(self, workload, state, index) -> None:
        pass

    def update(self, workload, state, index):
        def at(flat):
            return float(workload.loss(workload.from_flat(flat), workload.data, index))

        return state - self.rate * _gradient(at, state), at(state)

    def parameters(self, workload, state):
        return workload.from_flat(state)

    def record(self) -> dict:
        return {"optimizer_library": "toy",
                "optimizer_config": json.dumps({"learning_rate": self.rate})}


class ToyAdapter(Adapter):
    LIBRARY = "toy"  # toy:sgd
    STYLE = ((0, (1, 1, 5, 1)), "*")  # as its regression engine is drawn (BACKEND.styles)
    workload = ToyWorkload
    flat_value_and_grad = staticmethod(flat_value_and_grad)

    def module_kind(self, value) -> str | None:
        return "toy-linear" if isinstance(value, ToyModel) else None

    def submission(self, name: str, hyperparameters: dict) -> ToySgd:
        """toy:sgd, learning_rate only."""
        if name != "sgd":
            raise InputError(f"unknown toy optimizer '{name}'; allowed: sgd")
        if set(hyperparameters) - {"learning_rate"}:
            raise InputError(f"toy:sgd takes learning_rate only, got {sorted(hyperparameters)}")
        return ToySgd(float(hyperparameters.get("learning_rate", 0.1)))


ADAPTER = ToyAdapter()
