"""What a step and an evaluation are, per optimizer family, on a built model with its initial
weights loaded (study.train.run.loop times them in segments).

Keras optimizers: the model compiled as a user compiles it (jit_compile="auto": XLA on JAX; with
Keras 3.15 a tf.function without XLA on TensorFlow and eager on PyTorch; the row records which),
then stepped by its framework's stepper (the adapter's `keras_stepper`, made by `make_stepper`),
which does `fit`'s work per step without a host read.
`KerasTrainer.step` (`train_on_batch`) remains for the `loop = "fit"` baseline's warm-up only.
Our L-BFGS: the submission native models run (study.train.models.workload.LbfgsSubmission: one
iteration of optimizers/lbfgs.py per step, its algebra on the host in float64, so every
iteration reads the host by nature) on the flat weights, the loss and gradient through the
framework's one flat value_and_grad (study.train.run.flat). Both evaluate with
`model.test_on_batch` on the whole validation set (its first call compiles: evaluation time,
never training time)."""

from __future__ import annotations

import numpy as np

from convergence_study.errors import InputError
from datasets.user_file import is_file_name
from study.frameworks.keras.optimizers import (
    KERAS_PREFIX,
    check_config,
    file_optimizer,
    keras_classes,
)
from study.train.frameworks import adapter
from study.train.models.model import compile_loss
from study.train.models.model_checks import RANDOM_PASS, refuse_stochastic
from study.train.models.workload import LbfgsSubmission, WorkloadStepper
from study.train.run.flat import flatten, layout, pieces, value_and_grad
from study.train.sweep.spec import LBFGS as LBFGS_NAME

# layers that make a training-mode forward pass random or stateful: L-BFGS's line search
# needs one deterministic objective (and JAX's flat objective does not carry the state)
STOCHASTIC_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                     "GaussianDropout", "GaussianNoise", "AlphaDropout", "BatchNormalization",
                     "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                     "RandomContrast", "RandomCrop")


def keras_optimizer(name: str, hyperparameters: dict):
    import keras

    if is_file_name(name):  # a file's Keras optimizer class
        return file_optimizer(name, hyperparameters)
    class_name = name[len(KERAS_PREFIX):]
    if class_name not in keras_classes():
        raise InputError(f"unknown Keras optimizer '{class_name}'; allowed: "
                         f"{', '.join(keras_classes())}")
    check_config(class_name, hyperparameters)
    try:
        return getattr(keras.optimizers, class_name)(**hyperparameters)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: {str(exc).splitlines()[0]}") from None


class Evaluation:
    """The validation loss and metric in one call, under the names targets use."""

    def __init__(self, model, arrays: dict, metric: str):
        self.model, self.metric = model, metric
        self.x, self.y = arrays["x_val"], arrays["y_val"]

    def __call__(self) -> dict:
        logs = self.model.test_on_batch(self.x, self.y, return_dict=True)
        others = [k for k in logs if k != "loss"]
        out = {"val_loss": float(logs["loss"])}
        if others:
            out[f"val_{self.metric}"] = float(logs[others[0]])
        return out


class KerasTrainer:
    """A compiled model; `step` is `train_on_batch` (the fit baseline's warm-up), `stepper`
    the segmented loop's steps (`make_stepper`)."""

    def __init__(self, model, spec, loss, metric):
        self.model, self.loss, self.given = model, loss, set(spec.hyperparameters)
        model.compile(optimizer=keras_optimizer(spec.optimizer, spec.hyperparameters),
                      loss=compile_loss(spec.loss), metrics=[metric])

    def step(self, x, y) -> float:
        out = self.model.train_on_batch(x, y)
        return float(out[0] if isinstance(out, list | tuple) else out)

    def stepper(self, arrays: dict, rows):
        return make_stepper(self.model, self.loss, arrays["x_train"], arrays["y_train"], rows)

    def record(self) -> dict:
        import keras

        optimizer = self.model.optimizer
        rate = None if "learning_rate" in self.given else \
            float(keras.ops.convert_to_numpy(optimizer.learning_rate))
        return {"keras_class": type(optimizer).__name__, "default_learning_rate": rate,
                "keras_config": str(sorted(optimizer.get_config().items())),
                "jit_compile": bool(self.model.jit_compile), "keras_version": keras.__version__}


class LbfgsTrainer:
    """Full batch: every step is one L-BFGS iteration on all training rows, by the one L-BFGS
    submission of every model (study.train.models.workload.LbfgsSubmission) on the model's flat
    weights (KerasWeights); each iteration reads the loss and gradient to the host, where the
    algorithm's algebra runs."""

    def __init__(self, model, spec, loss, metric, arrays: dict):
        import keras

        self.submission = LbfgsSubmission(spec.hyperparameters)
        check_deterministic(model, arrays["x_train"][:64])
        # compiled only to evaluate as the Keras runs do (test_on_batch); SGD never steps
        model.compile(optimizer=keras.optimizers.SGD(), loss=compile_loss(spec.loss),
                      metrics=[metric])
        self.weights = KerasWeights(model, loss, arrays)

    def stepper(self, arrays: dict, rows):
        return WorkloadStepper(self.weights, self.submission, rows)

    def record(self) -> dict:
        return {"loss_evaluations": self.submission.record()["loss_evaluations"],
                "jit_compile": None}


class KerasWeights:
    """A Keras model's trainable weights as the L-BFGS submission takes a workload's
    (study.train.models.workload): flat float64 vectors, the full-batch flat objective
    (study.train.run.flat), the loss read. Written back into the variables, they are what the
    model evaluates (`test_on_batch`)."""

    def __init__(self, model, loss, arrays: dict):
        self.model, self.loss = model, loss
        self.x, self.y = arrays["x_train"], arrays["y_train"]
        self.variables = model.trainable_variables
        self.shapes, self.ends = layout(self.variables)

    def init_parameters(self):
        return self.variables

    def indices(self, rows: list) -> list:
        return rows  # full batch: an iteration takes no rows

    def to_flat(self, params) -> np.ndarray:
        import keras

        return flatten([keras.ops.convert_to_numpy(v.value) for v in params])

    def from_flat(self, w: np.ndarray):
        for variable, value in zip(self.variables, pieces(w, self.shapes, self.ends, np.reshape),
                                   strict=True):
            variable.assign(value.astype(np.float32))
        return self.variables

    def flat_value_and_grad(self):
        return value_and_grad(self.model, self.loss, self.x, self.y)

    def read(self, value) -> float:
        return float(value)


def check_deterministic(model, x) -> None:
    """L-BFGS's line search compares the loss at several points of one objective: a layer that
    draws noise or keeps batch statistics in training mode makes every evaluation another
    objective (and updates moving statistics on TensorFlow and PyTorch, not on JAX). Refused:
    by the layer types, then by behaviour (two training passes over the same rows at the same
    weights that differ: a custom layer drawing `keras.random`), every variable put back."""
    import keras

    kinds = tuple(getattr(keras.layers, name) for name in STOCHASTIC_LAYERS
                  if hasattr(keras.layers, name))
    refuse_stochastic(LBFGS_NAME, sorted({type(layer).__name__ for layer
                                          in model._flatten_layers() if isinstance(layer, kinds)}))
    saved = [keras.ops.convert_to_numpy(v.value).copy() for v in model.variables]
    try:
        first, second = (keras.ops.convert_to_numpy(model(x, training=True)) for _ in range(2))
    finally:
        for variable, value in zip(model.variables, saved, strict=True):
            variable.assign(value)
    if not np.allclose(first, second, rtol=1e-5, atol=1e-6, equal_nan=True):
        refuse_stochastic(LBFGS_NAME, [RANDOM_PASS])


def make_stepper(model, loss, x: np.ndarray, y: np.ndarray, rows):
    """The stepper of a compiled model on Keras's framework (its optimizer built here), the
    training arrays put once on the device that holds the model's weights. Each does per step
    what Keras's `fit` does, minus the metrics it keeps for its progress bar; none reads
    anything back to the host inside a segment (the interface: study.train.run.loop). Setup
    (`warm`) runs one step for what its first call costs and leaves the state where it was (a
    framework stepping the variables in place puts them back with `rewound`)."""
    import keras

    model.optimizer.build(model.trainable_variables)
    return adapter(keras.backend.backend()).keras_stepper(model, loss, x, y, rows)


def rewound(model, step) -> None:
    """`step()` run once for what its first call costs, then every variable of the model
    (weights, statistics, seed generators) and of its optimizer (slots, iteration count) set
    back to its value before: the first timed step starts where it would have."""
    import keras

    variables = [*model.variables, *model.optimizer.variables]
    saved = [keras.ops.convert_to_numpy(v.value).copy() for v in variables]
    step()
    for variable, value in zip(variables, saved, strict=True):
        variable.assign(value)


def make_trainer(model, spec, loss, metric, arrays):
    if spec.optimizer == LBFGS_NAME:
        return LbfgsTrainer(model, spec, loss, metric, arrays)
    return KerasTrainer(model, spec, loss, metric)
