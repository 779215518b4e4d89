"""Any Keras optimizer by name (`keras:Adam`, `keras:SGD`, ...) on the TensorFlow backend.

The Keras object's own update runs: the iterate lives in a `keras.Variable`, each iteration is
`optimizer.apply([g], [variable])` on the full-batch gradient, inside the compiled step. The
object is stateful, so `init` puts the start point and the initial slot values back (the
warm-up call has moved them). Keras keeps its learning rate in a float32 variable: a float64 run
uses that float32-rounded rate.
"""

from __future__ import annotations

import json
import sys
from typing import NamedTuple

import numpy as np

from convergence_study.errors import InputError, LibraryFailure, failure_line, first_line
from datasets.user_file import is_file_name, load, split
from optimizers.base import Optimizer
from optimizers.from_file import call
from optimizers.ranges import FRACTION, NONNEGATIVE, RATE, UNIT, check_ranges

KERAS_PREFIX = PREFIX = "keras:"  # any Keras optimizer by class name


class KerasState(NamedTuple):
    w: object
    f: object
    g: object


# What a Keras optimizer's numbers may be (optimizers.ranges): Keras itself takes a negative
# learning rate or an epsilon of -1 without a word (and runs).
KERAS_RANGES = {
    "learning_rate": RATE, "epsilon": RATE, "epsilon_1": RATE, "epsilon_2": RATE,
    "clipnorm": RATE, "clipvalue": RATE, "global_clipnorm": RATE, "clip_threshold": RATE,
    "loss_scale_factor": RATE, "initial_scale": RATE, "adam_lr_ratio": RATE,
    "rms_rate": RATE,
    "beta_1": FRACTION, "beta_2": FRACTION, "rho": FRACTION, "momentum": FRACTION,
    "adam_beta_1": FRACTION, "adam_beta_2": FRACTION,
    "ema_momentum": UNIT,
    "weight_decay": NONNEGATIVE, "adam_weight_decay": NONNEGATIVE,
    "initial_accumulator_value": NONNEGATIVE, "l1_regularization_strength": NONNEGATIVE,
    "l2_regularization_strength": NONNEGATIVE, "beta": NONNEGATIVE,
    "l2_shrinkage_regularization_strength": NONNEGATIVE,
    "learning_rate_power": (None, 0.0, None, True),
}
# Lion's betas may be 1 (Keras: "(0, 1]"); an Adam-like beta of 1 divides by zero
_CLASS_RANGES = {"Lion": {"beta_1": (0.0, 1.0, False, True), "beta_2": (0.0, 1.0, False, True)}}
_COUNTS = ("gradient_accumulation_steps", "ema_overwrite_frequency", "warmup_steps",
           "dynamic_growth_steps", "ns_steps")


def check_config(where: str, class_name: str, config: dict) -> None:
    """Refuse a number no optimizer can use (negative or non-finite rates, betas outside
    [0, 1), a negative decay), naming the parameter and the allowed range; None is Keras's
    'off' where it allows one, and what is not a number is left to Keras's own checks."""
    check_ranges(where, config, {**KERAS_RANGES, **_CLASS_RANGES.get(class_name, {})}, _COUNTS)


def keras_classes() -> list[str]:
    """The optimizer classes keras.optimizers exports, by name."""
    import keras

    base = keras.optimizers.Optimizer
    return sorted(name for name, value in vars(keras.optimizers).items()
                  if isinstance(value, type) and issubclass(value, base) and value is not base)


def keras_optimizer(name: str, config: dict):
    """The Keras optimizer `keras:<Class>` or a file's class (`path.py:Name`) built with
    `config`, checked first (the class, the ranges, Keras's own checks): one line each."""
    import keras

    if is_file_name(name):
        return file_optimizer(name, config)
    class_name = name[len(PREFIX):]
    if class_name not in keras_classes():
        raise InputError(f"unknown Keras optimizer '{class_name}'; allowed: "
                         f"{', '.join(keras_classes())}")
    check_config(name, class_name, config)
    try:
        return getattr(keras.optimizers, class_name)(**config)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: {first_line(exc)}") from None


class KerasOptimizer(Optimizer):
    only_on = "tensorflow"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}

    @staticmethod
    def check_apart(points, timeout):
        """All of a config's points at once, in a child on Keras's NumPy backend."""
        return check_optimizers(points, timeout)

    def __init__(self, class_name: str, library_class=None, **config):
        # library_class: a user's own Keras optimizer class (class_name its path.py:Name)
        self.class_name, self.config, self.library_class = class_name, dict(config), library_class
        self.name = PREFIX + (library_class.__name__ if library_class else class_name)
        self._keras = self._variable = self._initial = None
        self._build()  # refuses a bad class or parameter before any data is made

    def _build(self):
        return keras_optimizer(self.class_name if self.library_class else
                               PREFIX + self.class_name, self.config)

    def hyperparameters(self) -> dict:
        return dict(self.config)

    def setup(self, problem, objective, ops):
        import keras

        self._keras = self._build()
        self._variable = keras.Variable(np.zeros((problem.d, problem.k)), dtype=ops.dtype.name,
                                        name="w")
        self._keras.build([self._variable])
        self._initial = [np.array(v.numpy()) for v in self._keras.variables]
        # one update now, before the clock: an optimizer that cannot run here (Muon's float32
        # constants against a float64 variable) fails in one line, not inside the timed loop;
        # `init` puts back the variable and every slot, the iteration count included
        self._apply(self._variable.value * 0)
        return ()

    def init(self, objective, ops, params, w0) -> KerasState:
        self._variable.assign(w0)
        for variable, value in zip(self._keras.variables, self._initial, strict=True):
            variable.assign(value)
        w = self._variable.value + 0  # a read ordered after the assignments
        return KerasState(w, *objective.value_and_grad(w))

    def update(self, objective, ops, params, state) -> KerasState:
        self._apply(state.g)
        w = self._variable.value + 0
        return KerasState(w, *objective.value_and_grad(w))

    def _apply(self, gradient) -> None:
        try:
            self._keras.apply([gradient], [self._variable])
        except Exception as exc:  # noqa: BLE001 -- inside Keras: its own words, one line
            cause = failure_line(exc).removesuffix(" name:")  # TensorFlow's empty op name
            raise LibraryFailure(f"{self.name} failed inside Keras's update: {cause}") from exc

    def state_record(self, state) -> dict:
        """Counts from Keras's own iteration counter, and what the record says of the object."""
        import keras

        updates = int(self._keras.iterations.numpy())
        return {"nfev": 1 + updates, "ngev": 1 + updates, "nhvp": 0,
                "keras_class": type(self._keras).__name__,
                "keras_config": json.dumps(self._keras.get_config(), sort_keys=True, default=str),
                "keras_version": keras.__version__}


def check_optimizers(points: list[tuple[str, dict]], timeout: float | None = None) \
        -> list[str | None]:
    """For each (`keras:Class`, parameters), None or its one-line error, built once per process
    in a child on Keras's NumPy backend: in the sweep's own process TensorFlow would start (its
    logs, a GPU's memory held beside the runs). The child has the run_timeout (None: 600 s)."""
    keys = [json.dumps([name, config], sort_keys=True) for name, config in points]
    new = list(dict.fromkeys(key for key in keys if key not in _CHECKED))
    if new:
        answers = numpy_child(["-m", "study.frameworks.keras.optimizers"],
                              [json.loads(key) for key in new],
                              600.0 if timeout is None else timeout, "the Keras optimizers")
        _CHECKED.update(zip(new, answers, strict=True))
    return [_CHECKED[key] for key in keys]


_CHECKED: dict[str, str | None] = {}  # a checked point (its JSON) -> None or its error


def numpy_child(args: list[str], payload, timeout: float, what: str):
    """`python -P args` on Keras's NumPy backend, `payload` as JSON on its stdin, its answer the
    JSON of its last line: Keras's own checks with no framework starting up (3.2 s a check here,
    against 6.7 with TensorFlow). A child that fails or does not finish is one line."""
    import os
    import subprocess
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[3])  # the checkout
    env = {**os.environ, "KERAS_BACKEND": "numpy", "CUDA_VISIBLE_DEVICES": "-1",
           "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    failed = f"could not check {what} in a child process"
    try:
        done = subprocess.run([sys.executable, "-P", *args], input=json.dumps(payload),
                              capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise InputError(f"{failed}: it did not finish within run_timeout = {timeout:g} s") \
            from None
    except (OSError, subprocess.SubprocessError) as exc:
        raise InputError(f"{failed}: {exc}") from None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        raise InputError(failed + (f": {lines[-1][:300]}" if lines else "")) from None


def keras_class(name: str):
    """The Keras optimizer class `path.py:Name` names, or None: the file's object is for another
    library (a file that subclasses Keras's has imported Keras)."""
    found = load(name, "optimizer")
    keras = sys.modules.get("keras")
    if keras is None or not isinstance(found, type) or not issubclass(
            found, keras.optimizers.Optimizer):
        return None
    return found


def file_optimizer(name: str, config: dict):
    """A file's Keras optimizer class built with `config`, checked as `keras:<Class>` is and,
    off the NumPy backend, stepped once from zeros on a unit gradient; failures name the file."""
    import keras

    cls = keras_class(name)
    where = f"{split(name)[0]}: {split(name)[1]}"
    if cls is None:
        raise InputError(f"{where} is not a Keras optimizer class (a subclass of "
                         "keras.optimizers.Optimizer)")
    check_config(where, cls.__name__, config)

    def build():
        try:
            return cls(**config)
        except (TypeError, ValueError) as exc:
            raise InputError(f"{where}: {first_line(exc)}") from None

    if keras.backend.backend() != "numpy":  # NumPy's backend (the config's check) cannot step
        variable = keras.Variable(np.zeros(4), dtype="float32", name="probe")
        call(where, "its first step", build().apply, [keras.ops.ones((4,))], [variable])
        if not np.isfinite(keras.ops.convert_to_numpy(variable.value)).all():
            raise InputError(f"{where}: the first step is not finite (a unit gradient from "
                             "zeros)")
    return call(where, "building it", build)


def build(name: str, library, hyperparameters: dict):
    """Keras's harness (KerasOptimizer) running a file's class (optimizers.from_file)."""
    return KerasOptimizer(name, library, **hyperparameters)


def _check_main() -> None:
    """The child of `check_optimizers`: JSON [[name, parameters], ...] in, errors out."""
    import sys

    errors = []
    for name, config in json.loads(sys.stdin.read()):
        try:
            keras_optimizer(name, config)
            errors.append(None)
        except InputError as exc:
            errors.append(str(exc))
        except TypeError as exc:
            errors.append(f"{name}: wrong type: {exc}")
    print(json.dumps(errors))


if __name__ == "__main__":
    _check_main()
