"""What a step and an evaluation are, per optimizer family, on a built model with its initial
weights loaded (study.train.loop times them in segments).

Keras optimizers: the model compiled as a user compiles it (jit_compile="auto": XLA on JAX; with
Keras 3.15 a tf.function without XLA on TensorFlow and eager on PyTorch; the row records which),
then stepped by study.train.steppers, which does `fit`'s work per step without a host read.
`KerasTrainer.step` (`train_on_batch`) remains for the `loop = "fit"` baseline's warm-up only.
Our L-BFGS: one iteration of optimizers/lbfgs.py (strong-Wolfe line search, its algebra on
the host in float64, so every iteration reads the host by nature) on the flat weights, the
loss and gradient through the framework (study.train.flat). Both evaluate with
`model.test_on_batch` on the whole validation set (its first call compiles: evaluation time,
never training time)."""

from __future__ import annotations

import numpy as np

from datasets.errors import InputError
from optimizers.backends.registry import make_backend
from optimizers.keras_optimizer import KERAS_PREFIX, check_config, keras_classes
from optimizers.lbfgs import LBFGS
from study.train.flat import flatten, pieces, value_and_grad
from study.train.model import compile_loss
from study.train.model_checks import refuse_stochastic
from study.train.spec import LBFGS as LBFGS_NAME

# layers that make a training-mode forward pass random or stateful: L-BFGS's line search
# needs one deterministic objective (and JAX's flat objective does not carry the state)
STOCHASTIC_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                     "GaussianDropout", "GaussianNoise", "AlphaDropout", "BatchNormalization",
                     "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                     "RandomContrast", "RandomCrop")


def keras_optimizer(name: str, hyperparameters: dict):
    import keras

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
    the segmented loop's steps (study.train.steppers)."""

    def __init__(self, model, spec, loss, metric):
        self.model, self.loss, self.given = model, loss, set(spec.hyperparameters)
        model.compile(optimizer=keras_optimizer(spec.optimizer, spec.hyperparameters),
                      loss=compile_loss(spec.loss), metrics=[metric])

    def step(self, x, y) -> float:
        out = self.model.train_on_batch(x, y)
        return float(out[0] if isinstance(out, list | tuple) else out)

    def stepper(self, arrays: dict, rows):
        from study.train.steppers import make_stepper

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
    """Full batch: every step is one L-BFGS iteration on all training rows. It is its own
    stepper (study.train.loop): a segment runs its iterations, each reading the loss and
    gradient to the host, where the algorithm's algebra runs."""

    def __init__(self, model, spec, loss, metric, arrays: dict):
        import keras

        if set(spec.hyperparameters) - {"history"}:
            raise InputError(f"lbfgs takes history only, got {sorted(spec.hyperparameters)}")
        check_deterministic(model)
        self.model = model
        # compiled only to evaluate as the Keras runs do (test_on_batch); SGD never steps
        model.compile(optimizer=keras.optimizers.SGD(), loss=compile_loss(spec.loss),
                      metrics=[metric])
        self.ops = make_backend("numpy", "float64")
        self.lbfgs = LBFGS(history=spec.hyperparameters.get("history", 10), line_search="wolfe")
        self.objective = _Objective(value_and_grad(model, loss, arrays["x_train"],
                                                   arrays["y_train"]))
        variables = model.trainable_variables
        self.shapes = [tuple(v.shape) for v in variables]
        self.ends = np.cumsum([int(np.prod(s)) for s in self.shapes])
        self.w0 = flatten([keras.ops.convert_to_numpy(v.value) for v in variables])
        self.state = None

    def stepper(self, arrays: dict, rows):
        return self

    def prepare(self, first: int, count: int) -> int:
        return count

    def warm(self, prepared) -> None:
        """Setup: the flat objective's first call (it traces and compiles) at the initial
        weights, as the first iteration's start will call it; the algorithm's state is kept."""
        self.objective.value_and_grad(self.w0)

    def run(self, count: int):
        for _ in range(count):
            if self.state is None:  # the first step: the start's loss, then an iteration
                self.state = self.lbfgs.init(self.objective, self.ops, (), self.w0)
            self.state = self.lbfgs.update(self.objective, self.ops, (), self.state)
        return self.state.f

    def read(self, value) -> float:
        return float(value)

    def reload(self) -> None:
        pass

    def write_back(self) -> None:
        w = self.w0 if self.state is None else self.state.w
        for variable, value in zip(self.model.trainable_variables,
                                   pieces(w, self.shapes, self.ends, np.reshape), strict=True):
            variable.assign(value.astype(np.float32))

    def record(self) -> dict:
        evaluations = 1 + int(np.asarray(self.state.evaluations)) if self.state else 0
        return {"loss_evaluations": evaluations, "jit_compile": None}


def check_deterministic(model) -> None:
    """L-BFGS's line search compares the loss at several points of one objective: a layer that
    draws noise or keeps batch statistics in training mode makes every evaluation another
    objective (and updates moving statistics on TensorFlow and PyTorch, not on JAX). Refused."""
    import keras

    kinds = tuple(getattr(keras.layers, name) for name in STOCHASTIC_LAYERS
                  if hasattr(keras.layers, name))
    refuse_stochastic(LBFGS_NAME, sorted({type(layer).__name__ for layer
                                          in model._flatten_layers() if isinstance(layer, kinds)}))


class _Objective:
    def __init__(self, function):
        self.function = function

    def value_and_grad(self, w):
        return self.function(w)


def make_trainer(model, spec, loss, metric, arrays):
    if spec.optimizer == LBFGS_NAME:
        return LbfgsTrainer(model, spec, loss, metric, arrays)
    return KerasTrainer(model, spec, loss, metric)
