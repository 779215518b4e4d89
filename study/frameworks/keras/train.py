"""Keras models in the train study: the one module the study reaches Keras by (its registry
entry's `models`). Keras is imported inside functions only: a process sets KERAS_BACKEND before
the import (`prepare`), and a config's names are checked in a child on Keras's NumPy backend
(`check_names`).

Here: the model and its loss and metric by name, the weights drawn once per seed on the NumPy
backend (`draw_initial`), placement (the adapter's `scope`, else `keras.device`), and the
trainers: a Keras optimizer compiled as a user compiles it, stepped by its framework's stepper
(`train_on_batch` only for the fit baseline's warm-up), or our L-BFGS on the flat weights. Both
evaluate with `model.test_on_batch` on the whole validation set (its first call compiles)."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path

import numpy as np

from convergence_study.errors import InputError
from study.frameworks.keras.optimizers import (  # noqa: F401 - check_optimizers: for configs
    check_optimizers,
    keras_optimizer,
    numpy_child,
)
from study.train.frameworks import adapter
from study.train.models.examples import MODELS
from study.train.models.input_rows import input_mismatch
from study.train.models.model import (
    FITS,
    LOGIT_OUTPUTS,
    LOGITS,
    NLL,
    SPARSE,
    beside,
    check_model_name,
    check_outputs,
    check_trainable,
    describe,
    loss_name,
    model_file,
    outputs_for,
)
from study.train.models.model_checks import RANDOM_PASS, refuse_stochastic
from study.train.models.native_load import call_model, function_of
from study.train.models.workload import LbfgsSubmission, WorkloadStepper
from study.train.run.flat import flatten, framework_value_and_grad, layout, pieces
from study.train.sweep.spec import LBFGS as LBFGS_NAME

# ---- the process: Keras on one framework, its device ---------------------------------------

def prepare(framework: str) -> None:
    """A warm process for one framework's runs (its adapter's `warm`): KERAS_BACKEND set, then
    Keras imported (no device initialised: forking afterwards is safe). Keras picks its backend
    once, at its import, so a process already holding Keras on another one is refused."""
    held = sys.modules.get("keras")
    if held is not None and held.backend.backend() != framework:
        raise RuntimeError(f"this process already imported Keras on {held.backend.backend()}")
    os.environ["KERAS_BACKEND"] = framework
    import keras  # noqa: F401 -- the import is the point

    import study.train.run.measure  # noqa: F401 -- and the measuring code, once


def check_backend(framework: str) -> None:
    """Keras runs on `framework` in this process (KERAS_BACKEND was set before its import)."""
    import keras

    if keras.backend.backend() != framework:
        raise RuntimeError(f"Keras runs on {keras.backend.backend()} in this process, the spec "
                           f"asks for {framework} (KERAS_BACKEND is set too late)")


def scope(device: str):
    """Keras's placement on the framework's first device of that kind: the adapter's own where
    it has one (TensorFlow's tf.device), else Keras's `keras.device`."""
    import keras

    return adapter(keras.backend.backend()).scope(device) or keras.device(device)


def placed(model) -> str:
    """Where the model's first weight lies, in the framework's own words."""
    import keras

    return adapter(keras.backend.backend()).placed(model.weights[0].value)


# ---- the model, its loss and metric ------------------------------------------------------------

def build(model: str, input_shape: tuple, outputs: int):
    """The uncompiled Keras model, checked to take `input_shape` rows and give `outputs`."""
    import keras

    check_model_name(model)
    path = model_file(model)
    if path is None:
        what = f"model '{model}'"
        try:  # a shipped example is built for the rows it is given: what fails is their shape
            built = MODELS[model](input_shape, outputs)
        except Exception as exc:
            raise input_mismatch(what, input_shape, None, exc) from None
    elif path.suffix == ".keras":
        what = f"model file '{path}'"
        try:
            built = keras.saving.load_model(path, compile=False)
        except Exception as exc:  # a zip that is no model, a model of unknown layers
            raise InputError(f"{what} is not a Keras model: {describe(exc)}") from None
    else:
        function, what = function_of(model)
        with beside(path):
            built = call_model(function, input_shape, outputs, what)
    if not isinstance(built, keras.Model):
        raise InputError(f"{what} did not give a Keras model (got {type(built).__name__})")
    try:
        if not built.built:
            built.build((None, *input_shape))
        out = built.compute_output_spec(keras.KerasTensor((2, *input_shape))).shape
    except Exception as exc:
        raise input_mismatch(what, input_shape, _input_rows(built), exc) from None
    if tuple(out[1:]) not in ((outputs,), () if outputs == 1 else (outputs,)):
        raise InputError(f"{what} gives outputs of shape {tuple(out[1:])}, the data needs "
                         f"({outputs},)")
    check_trainable(sum(int(np.prod(v.shape)) for v in built.trainable_weights), what)
    return built


def _input_rows(model) -> tuple | None:
    """The rows a Keras model takes, None where it has none or several inputs."""
    try:
        shape = model.input_shape
    except Exception:  # noqa: BLE001 - not built, or not one input
        return None
    if not isinstance(shape, tuple) or not shape or isinstance(shape[0], tuple):
        return None
    return tuple("?" if d is None else d for d in shape[1:])


def loss_function(loss: str, where: str = "loss"):
    """Keras's loss function by name, with from_logits=True bound for `name:from_logits`, and
    the log-probability losses (nll, categorical_nll), which Keras does not name."""
    import inspect

    import keras

    if loss is None:
        raise InputError(f"{where}: none given; a Keras model takes its loss by name (e.g. "
                         f"sparse_categorical_crossentropy, binary_crossentropy, mse, nll)")
    name, logits = loss_name(loss)
    if name in NLL:
        if logits:
            fit = FITS["sparse" if name in SPARSE else "categorical"][LOGIT_OUTPUTS]
            raise InputError(f"{where}: {name} takes log-probabilities; for logits give {fit}")
        return _keras_nll(name)
    try:
        function = keras.losses.get(name)
    except Exception:
        function = None
    if function is None or not isinstance(loss, str):
        raise InputError(f"{where}: unknown Keras loss '{loss}' (e.g. "
                         "sparse_categorical_crossentropy, binary_crossentropy, mse, nll; "
                         f"NAME{LOGITS} for a model giving logits)")
    if not logits:
        return function
    if "from_logits" not in inspect.signature(function).parameters:
        raise InputError(f"{where}: the Keras loss '{name}' takes no from_logits")

    @functools.wraps(function)
    def on_logits(y_true, y_pred):
        return function(y_true, y_pred, from_logits=True)

    return on_logits


def _keras_nll(name: str):
    """The negative log-likelihood of log-probability outputs, per row (Keras has no name for
    it): nll takes class indices (as PyTorch's F.nll_loss), categorical_nll one-hot labels."""
    import keras

    def nll(y_true, y_pred):
        index = keras.ops.cast(keras.ops.reshape(y_true, (-1, 1)), "int32")
        return -keras.ops.take_along_axis(y_pred, index, axis=-1)[:, 0]

    def categorical_nll(y_true, y_pred):
        return -keras.ops.sum(keras.ops.cast(y_true, y_pred.dtype) * y_pred, axis=-1)

    return nll if name == "nll" else categorical_nll


def compile_loss(loss: str):
    """What `model.compile(loss=...)` is given: the name, or the function with from_logits
    bound or the NLL (compile wraps a function as it wraps a name's)."""
    name, logits = loss_name(loss)
    return loss_function(loss) if logits or name in NLL or loss is None else name


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


def metric_object(name: str, where: str = "metric"):
    import keras

    try:
        return keras.metrics.get(name)
    except Exception:
        raise InputError(f"{where}: unknown Keras metric '{name}' (e.g. accuracy, "
                         "binary_accuracy, mae)") from None


KERAS_NAMES = """
import json, sys
from convergence_study.errors import InputError
from study.frameworks.keras.train import loss_function, metric_object
loss, metric = json.loads(sys.stdin.read())
try:
    if loss is not None:
        loss_function(loss)
    metric_object(metric)
    print(json.dumps(None))
except InputError as exc:
    print(json.dumps(str(exc)))
"""


@functools.cache
def check_names(loss: str | None, metric: str) -> str | None:
    """None, or the one line Keras's own lookup gives for an unknown loss or metric name, asked
    of a child on Keras's NumPy backend (a sweep's process must not import Keras)."""
    try:
        return numpy_child(["-c", KERAS_NAMES], [loss, metric], 600, "the Keras names")
    except InputError:
        return None  # no child: each run checks the names itself, as before


# ---- the initial weights, drawn once per seed ----------------------------------------------

def validation_loss(model, loss, x_val, y_val) -> float:
    """The mean loss over the validation rows, in one call (any backend)."""
    import keras

    return float(keras.ops.convert_to_numpy(loss(y_val, model(x_val, training=False))))


def draw_initial(request: dict, arrays: dict) -> None:
    """In the helper process (KERAS_BACKEND=numpy): build, seed, draw, evaluate, save."""
    import keras

    assert keras.backend.backend() == "numpy", keras.backend.backend()
    loss = loss_object(request["loss"])
    outputs = outputs_for(request["loss"], arrays["y_train"], arrays["y_val"], "data")
    input_shape = arrays["x_train"].shape[1:]
    keras.utils.set_random_seed(request["seed"])
    model = build(request["model"], input_shape, outputs)
    if model_file(request["model"]) is not None and request["model"].endswith(".keras"):
        model = keras.models.clone_model(model)  # fresh weights from its initializers
        model.build((None, *input_shape))
    weights = model.get_weights()
    out = Path(request["out"])
    np.savez(out / "weights.npz", **{f"w{i}": w for i, w in enumerate(weights)})
    check_outputs(request["loss"], keras.ops.convert_to_numpy(model(arrays["x_val"][:256],
                                                                    training=False)),
                  f"model '{request['model']}'")
    reference = validation_loss(model, loss, arrays["x_val"], arrays["y_val"])
    (out / "meta.json").write_text(json.dumps({
        "reference_val_loss": reference, "outputs": outputs, "input_shape": list(input_shape),
        "n_weights": len(weights), "parameters": int(sum(w.size for w in weights)),
        "keras_version": keras.__version__}))


# ---- the steps -----------------------------------------------------------------------------

# layers that make a training-mode forward pass random or stateful (L-BFGS needs neither)
STOCHASTIC_LAYERS = ("Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D",
                     "GaussianDropout", "GaussianNoise", "AlphaDropout", "BatchNormalization",
                     "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                     "RandomContrast", "RandomCrop")


def evaluation(model, arrays: dict, metric: str):
    """The validation loss and metric in one call, under the names targets use."""

    def evaluate() -> dict:
        logs = model.test_on_batch(arrays["x_val"], arrays["y_val"], return_dict=True)
        others = [k for k in logs if k != "loss"]
        out = {"val_loss": float(logs["loss"])}
        if others:
            out[f"val_{metric}"] = float(logs[others[0]])
        return out

    return evaluate


class KerasTrainer:
    """A compiled model: `train_on_batch` (the fit baseline's warm-up) and its stepper."""

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
    """Full batch: every step is one iteration of the L-BFGS submission every model has
    (study.train.models.workload.LbfgsSubmission) on the model's flat weights (KerasWeights)."""

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
    """A Keras model's trainable weights as the L-BFGS submission takes a workload's: flat
    float64 vectors, written back into the variables the model evaluates with."""

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
    draws noise or keeps batch statistics in training makes each evaluation another. Refused by
    the layer types, then by behaviour (two training passes over the same rows that differ: a
    custom layer drawing `keras.random`), every variable put back."""
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
    """The stepper of a compiled model on Keras's framework, its optimizer built here."""
    import keras

    model.optimizer.build(model.trainable_variables)
    return adapter(keras.backend.backend()).keras_stepper(model, loss, x, y, rows)


def make_trainer(model, spec, loss, metric, arrays):
    if spec.optimizer == LBFGS_NAME:
        return LbfgsTrainer(model, spec, loss, metric, arrays)
    return KerasTrainer(model, spec, loss, metric)


def value_and_grad(model, loss, x: np.ndarray, y: np.ndarray):
    """f(w) -> (loss, gradient) at the flat float64 vector of a Keras model's trainable weights,
    by `model.stateless_call` on every framework (JAX cannot assign a traced value)."""
    import keras

    frozen = [v.value for v in model.non_trainable_variables]

    def loss_at(weights, data):
        xs, ys = data
        y_pred, _ = model.stateless_call(weights, frozen, xs, training=True)
        return loss(ys, y_pred)

    make = framework_value_and_grad(keras.backend.backend())
    return make([v.value for v in model.trainable_variables], loss_at, (x, y), None)
