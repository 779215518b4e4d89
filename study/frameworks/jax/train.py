"""The train study on JAX: Keras models on Keras 3's JAX backend, and native JAX models with
optax's optimizers (`optax:<name>`).

Keras models: one `jax.jit` of a stateless step with the state donated, as `fit` compiles it
(keras/src/backend/jax/trainer.py). A native JAX model is its parameters (a pytree of float
arrays) and a pure `apply(params, x)`: a pair (init_params(key), apply), an Equinox module (its
inexact arrays, applied per example under `jax.vmap`), or a Flax NNX module (`nnx.split`: only
`nnx.Param` trains). Stateless models only: no batch statistics updated by the forward pass.
Its step is one `jax.jit` of a pure function, the state donated, the batch gathered by index
inside the step: no host read in a segment.
"""

from __future__ import annotations

import inspect

import numpy as np

from convergence_study.errors import InputError
from datasets.user_file import is_file_name, split
from optimizers.from_file import provenance as file_record
from optimizers.ranges import FRACTION, NONNEGATIVE, RATE, check_ranges
from study.frameworks.jax.optax_file import checked_transform, optax_factory
from study.sweep.schema import Column
from study.train.frameworks import Adapter
from study.train.models.input_rows import input_mismatch
from study.train.models.model import array_ops, check_trainable
from study.train.models.model_checks import RANDOM_PASS
from study.train.models.native_load import loaded
from study.train.models.workload import (
    Submission,
    Workload,
    describe,
    initial_arrays,
)
from study.train.run.stepper import KerasStepper

OPTAX_ALIAS_MODULE = "optax._src.alias"  # where optax defines its optimizers (its docs' list)
# what an optax alias's numbers may be (optimizers.ranges), checked before optax
OPTAX_RANGES = {"learning_rate": RATE, "eps": NONNEGATIVE, "eps_root": NONNEGATIVE,
                "b1": FRACTION, "b2": FRACTION, "b3": FRACTION, "decay": FRACTION,
                "momentum": FRACTION, "weight_decay": NONNEGATIVE,
                "initial_accumulator_value": NONNEGATIVE}


# ---- Keras models on JAX ------------------------------------------------------------------------

def placed(value) -> str:
    device = next(iter(value.devices()))
    return f"{device.platform}:{device.id}"


class JaxStepper(KerasStepper):
    """One `jax.jit` of a stateless step, its state (trainable, frozen, optimizer's) donated
    and kept in the step's buffers, written into the model's variables for an evaluation."""

    def __init__(self, model, loss, x, y, rows):
        import jax

        self.jax = jax
        self.device = next(iter(model.weights[0].value.devices()))  # where Keras put them
        super().__init__(model, loss, x, y, rows)
        optimizer = model.optimizer

        def step(state, xs, ys, index):
            trainable, frozen, slots = state

            def value(weights):
                y_pred, new_frozen, losses = model.stateless_call(
                    weights, frozen, xs[index], training=True, return_losses=True)
                total = loss(ys[index], y_pred)
                return (total + sum(losses) if losses else total), new_frozen

            (total, new_frozen), grads = jax.value_and_grad(value, has_aux=True)(trainable)
            trainable, slots = optimizer.stateless_apply(slots, grads, trainable)
            return (trainable, new_frozen, slots), total

        self.step = jax.jit(step, donate_argnums=0)
        self.reload()

    def put(self, values):
        return self.jax.device_put(values, self.device)

    def warm(self, prepared) -> None:  # as OptaxSubmission.warm
        self.jax.block_until_ready(self.step(copied(self.state), self.x, self.y, prepared[0]))

    def run(self, prepared):
        for index in prepared:
            self.state, total = self.step(self.state, self.x, self.y, index)
        return total

    def read(self, value) -> float:
        self.jax.block_until_ready(self.state)
        return float(self.jax.device_get(value))

    def groups(self) -> tuple:
        model = self.model
        return model.trainable_variables, model.non_trainable_variables, model.optimizer.variables

    def write_back(self) -> None:
        for group, values in zip(self.groups(), self.state, strict=True):
            for variable, value in zip(group, values, strict=True):
                variable.assign(value)

    def reload(self) -> None:
        """The state from the model's variables, committed to the device as the step's outputs
        are (an uncommitted array is another argument type: the step would compile again)."""
        self.state = self.put(tuple([v.value for v in group] for group in self.groups()))


# ---- the flat objective (our L-BFGS) ----------------------------------------------------------

def flat_value_and_grad(weights, loss_at, data, device=None):
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    _, unravel = ravel_pytree(weights)
    compiled = jax.jit(jax.value_and_grad(lambda flat, data: loss_at(unravel(flat), data)))
    data = jax.device_put(data, device)

    def call(w):
        value, grad = compiled(jax.device_put(jnp.asarray(w, jnp.float32), device), data)
        return float(value), np.asarray(grad, np.float64)

    return call


# ---- native JAX models ------------------------------------------------------------------------

def module_kind(value) -> str | None:
    """An Equinox or a Flax NNX module (recognised through the modules already imported)."""
    if loaded(value, "equinox", "Module"):
        return "equinox"
    if loaded(value, "flax.nnx", "Module"):
        return "flax-nnx"
    return None


def stochastic_layers(native) -> list[str]:
    """Dropout and batch normalization in training mode, by Equinox's and Flax NNX's own types;
    a pair has none it could draw with: its apply(params, x) takes no key."""
    if native.kind == "equinox":
        import equinox as eqx
        import jax

        kinds = (eqx.nn.Dropout, eqx.nn.BatchNorm)
        return [type(m).__name__ for m in jax.tree_util.tree_leaves(
            native.obj, is_leaf=lambda m: isinstance(m, kinds))
            if isinstance(m, kinds) and not getattr(m, "inference", False)
            and getattr(m, "p", 1.0) > 0]
    if native.kind == "flax-nnx":
        from flax import nnx

        kinds = (nnx.Dropout, nnx.BatchNorm)
        return [type(m).__name__ for _, m in nnx.iter_graph(native.obj)
                if isinstance(m, kinds) and not getattr(m, "deterministic", False)
                and not getattr(m, "use_running_average", False)
                and getattr(m, "rate", 1.0) > 0]
    return []


def jax_device(device: str):
    import jax

    if device == "gpu":
        try:
            return jax.devices("gpu")[0]
        except RuntimeError:
            raise InputError("no GPU visible to JAX") from None
    return jax.devices("cpu")[0]


def jax_ops():
    import jax
    import jax.numpy as jnp

    def pick(a, y):
        return jnp.take_along_axis(a, y.reshape(-1, 1).astype(jnp.int32), -1)[:, 0]

    return array_ops(jnp, lambda a: jax.nn.log_softmax(a, -1), jax.nn.log_sigmoid, pick)


def split_model(native, seed: int):
    """(params, apply(params, x)) of a JAX model (see the module docstring)."""
    import jax

    if native.kind == "jax-pair":
        init, apply = native.obj
        try:
            params = init(jax.random.key(seed))
        except Exception as exc:
            raise InputError(f"{native.what}: init_params(key) failed: {describe(exc)}") \
                from None
        return params, apply
    if native.kind == "equinox":
        import equinox as eqx

        params, static = eqx.partition(native.obj, eqx.is_inexact_array)
        return params, lambda p, x: jax.vmap(eqx.combine(p, static))(x)
    from flax import nnx  # flax-nnx

    graphdef, params, rest = nnx.split(native.obj, nnx.Param, ...)
    return params, lambda p, x: nnx.merge(graphdef, p, rest)(x)


class JaxWorkload(Workload):
    framework = "jax"

    place = staticmethod(jax_device)
    ops = staticmethod(jax_ops)

    def take_parameters(self, native, initial, seed: int) -> list[str]:
        import jax
        import jax.numpy as jnp
        from jax.flatten_util import ravel_pytree

        self.jax, self.jnp = jax, jnp
        self.module = native.obj  # a Flax NNX module's random draws are found by calling it
        params, self.apply = split_model(native, seed)
        leaves = jax.tree_util.tree_leaves_with_path(params)
        check_trainable(sum(int(np.size(leaf)) for _, leaf in leaves), self.what)
        for path, leaf in leaves:
            if not hasattr(leaf, "shape") or not jnp.issubdtype(jnp.asarray(leaf).dtype,
                                                                jnp.floating):
                raise InputError(f"{self.what}: parameter {jax.tree_util.keystr(path)} is not a "
                                 f"float array (got {type(leaf).__name__})")
        params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params)
        names = [jax.tree_util.keystr(path) for path, _ in leaves]
        if initial is not None:
            values = initial_arrays(initial, names, [tuple(leaf.shape) for _, leaf in leaves],
                                    self.what)
            params = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(params),
                                                  [jnp.asarray(v) for v in values])
        self.initial = jax.device_put(params, self.device)
        _, self.unravel = ravel_pytree(self.initial)
        self.ravel = lambda p: ravel_pytree(p)[0]

        def evaluation(params, x, y):
            out = self.apply(params, x)
            return self.loss_fn(out, y), out

        self._evaluate = jax.jit(evaluation)
        return names

    def put(self, values, integers: bool = False):
        dtype = np.int32 if integers else np.float32
        return self.jax.device_put(np.asarray(values).astype(dtype), self.device)

    def trial(self, function, *arguments):
        return self.jax.eval_shape(function, *arguments)  # abstract: nothing compiled

    def is_array(self, value) -> bool:
        return hasattr(value, "shape")

    def mismatch(self, exc: Exception) -> InputError:
        if self.random_in_training():
            return InputError(f"{self.what} has {RANDOM_PASS} (two passes over the same rows "
                              "differ), which apply(params, x) cannot carry through a compiled "
                              f"step ({describe(exc)}); draw no random numbers in the model's "
                              "__call__")
        return input_mismatch(self.what, tuple(self.data[0].shape[1:]), None, exc)

    def forward(self, params, x):
        return self.apply(params, x)

    def random_in_training(self) -> bool:
        """A Flax NNX module called twice on the same rows, on a copy (its Rngs unmoved): a
        pair's or an Equinox module's call takes no random state it could draw from."""
        if self.kind != "flax-nnx":
            return False
        from flax import nnx

        copy, x = nnx.clone(self.module), self.data[0][:64]
        try:
            first, second = np.asarray(copy(x)), np.asarray(copy(x))
        except Exception:  # noqa: BLE001 - a call that fails is judged by the checks after
            return False
        return not np.allclose(first, second, rtol=1e-5, atol=1e-6, equal_nan=True)

    def evaluation(self, params) -> tuple[float, np.ndarray]:
        """All validation rows (its probe's too: the shapes the evaluation compiles for)."""
        value, out = self._evaluate(params, *self.val)
        return float(value), np.asarray(out)

    def init_parameters(self):
        return self.jax.tree.map(lambda a: a.copy(), self.initial)

    def to_flat(self, params) -> np.ndarray:
        return np.asarray(self.ravel(params), np.float64)

    def from_flat(self, w: np.ndarray):
        return self.jax.device_put(self.unravel(self.jnp.asarray(w, self.jnp.float32)),
                                   self.device)

    def flat_value_and_grad(self):
        return flat_value_and_grad(self.initial, lambda params, data: self.loss(params, data, None),
                                   self.data, self.device)

    def parameter_count(self) -> int:
        return int(sum(leaf.size for leaf in self.jax.tree_util.tree_leaves(self.initial)))

    def placed(self) -> str:
        return placed(self.jax.tree_util.tree_leaves(self.initial)[0])


def settled_state(name: str, step, state, *arguments):
    """`state` in the types `step` hands back (abstract evaluation: nothing compiled). A jitted
    step compiles again for every new argument type, weak types included: optax.lbfgs's initial
    state holds weak-typed scalars its update returns strong (a second compile at step 2,
    inside the clock). A state whose structure or shapes change with an update is refused."""
    import jax
    import jax.numpy as jnp

    def types(tree):  # a concrete array's or an abstract one's
        return [(tuple(t.shape), t.dtype, t.weak_type) for t in
                (leaf if isinstance(leaf, jax.ShapeDtypeStruct) else jax.typeof(leaf)
                 for leaf in jax.tree.leaves(tree))]

    after = jax.eval_shape(step, state, *arguments)[0]
    if jax.tree.structure(after) == jax.tree.structure(state):
        state = jax.tree.map(lambda a, t: jnp.array(a, dtype=t.dtype, copy=True), state, after)
        after = jax.eval_shape(step, state, *arguments)[0]
    if jax.tree.structure(after) != jax.tree.structure(state) or types(after) != types(state):
        raise InputError(f"{name}: its state changes structure or shapes with an update (every "
                         "step would compile again inside the clock); not timed")
    return state


def copied(state):
    """Every leaf a fresh buffer of the same type and placement (no new argument type)."""
    import jax

    return jax.tree.map(lambda a: jax.numpy.array(a, copy=True), state)


class OptaxSubmission(Submission):
    """Any optax alias by name (`optax:adam`, `optax:sgd`, ...), its hyperparameters by name
    (checked against the alias's signature). Optimizers that take extra arguments (optax.lbfgs:
    value, grad, value_fn) are given them, on the step's batch."""

    def __init__(self, alias: str, hyperparameters: dict):
        import optax

        self.file = alias if is_file_name(alias) else None
        if self.file:  # a file's function returning a GradientTransformation
            factory = optax_factory(self.file)
            if factory is None:
                raise InputError(f"{split(self.file)[0]}: {split(self.file)[1]} is not an optax "
                                 "factory (a function of a file that uses optax, returning an "
                                 "optax.GradientTransformation)")
            alias = factory.__name__
        self.name = f"optax:{alias}"
        if not self.file:
            factory = getattr(optax, alias, None) if not alias.startswith("_") else None
        if not callable(factory) or isinstance(factory, type):
            raise InputError(f"unknown optax optimizer '{alias}' (any optax alias by name, e.g. "
                             "adam, sgd, adamw, lion, lbfgs)")
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            raise InputError(f"{self.name}: not an optimizer alias") from None
        unknown = [key for key in hyperparameters if key not in signature.parameters]
        if unknown:
            raise InputError(f"{self.name} has no parameter '{unknown[0]}'; allowed: "
                             f"{', '.join(signature.parameters)}")
        missing = [n for n, p in signature.parameters.items() if p.default is p.empty
                   and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                   and n not in hyperparameters]
        if missing:
            raise InputError(f"{self.name} needs {', '.join(missing)} (e.g. --opt-param "
                             f"{missing[0]}=0.01)")
        check_ranges(self.name, hyperparameters, OPTAX_RANGES)
        try:
            self.tx = factory(**hyperparameters)
        except Exception as exc:
            raise InputError(f"{self.file or self.name}: {describe(exc)}") from None
        if not isinstance(self.tx, optax.GradientTransformation):
            raise InputError(f"{self.file or self.name} is not an optimizer (it gives "
                             f"{type(self.tx).__name__}, not an optax GradientTransformation)")
        if self.file:  # updated once from zeros on a unit gradient: raises or not finite
            checked_transform(self.file, self)
        self.extra = isinstance(self.tx, optax.GradientTransformationExtraArgs)
        self.hyperparameters = dict(hyperparameters)

    def init(self, workload, params):
        import jax
        import optax

        tx, extra = self.tx, self.extra

        def step(state, data, index):
            params, opt_state = state

            def value(p):
                return workload.loss(p, data, index)

            loss, grads = jax.value_and_grad(value)(params)
            if extra:
                updates, opt_state = tx.update(grads, opt_state, params, value=loss,
                                               grad=grads, value_fn=value)
            else:
                updates, opt_state = tx.update(grads, opt_state, params)
            return (optax.apply_updates(params, updates), opt_state), loss

        self.step = jax.jit(step, donate_argnums=0)
        try:
            # every leaf its own buffer: an optimizer state may hold the very arrays it was
            # given (optax.lbfgs keeps the parameters), and a buffer donated twice is an error
            state = copied(jax.device_put((params, tx.init(params)), workload.device))
            index = workload.indices([np.zeros(1)])[0]
            state = settled_state(self.name, step, state, workload.data, index)
        except InputError:
            raise
        except Exception as exc:
            raise InputError(f"{self.name} does not run on {workload.what}: "
                             f"{describe(exc)}") from None
        return state

    def warm(self, workload, state, index) -> None:
        """One step on a copy of the state, thrown away: it compiles, and its first call's other
        costs are paid too (compiled ahead of time, step 1 still took ~80 ms against ~0.2)."""
        workload.jax.block_until_ready(self.step(copied(state), workload.data, index))

    def update(self, workload, state, index):
        return self.step(state, workload.data, index)

    def parameters(self, workload, state):
        return state[0]

    def record(self) -> dict:
        import json

        import optax

        return {"optimizer_library": "optax", "optax_version": optax.__version__,
                **(file_record(self.file) if self.file else {}),
                "optimizer_config": json.dumps(self.hyperparameters, sort_keys=True,
                                               default=str)}


def optax_aliases() -> tuple[str, ...]:
    """optax's optimizers, as optax lists them: the functions of its alias module (adam, sgd,
    lbfgs, ...). Not building blocks such as scale or identity, whose updates are not a descent
    step (optax adds updates, so scale(0.1) climbs the loss)."""
    import optax

    return tuple(sorted(name for name in dir(optax) if not name.startswith("_")
                        and inspect.isfunction(getattr(optax, name))
                        and getattr(optax, name).__module__ == OPTAX_ALIAS_MODULE))


def check_optimizer(name: str) -> None:
    """`optax:<name>` names one of optax's optimizers; else one line naming it and the list
    (asked before a command starts Keras, where optax is installed)."""
    import importlib.util

    if importlib.util.find_spec("optax") is None:
        return
    import optax

    aliases = optax_aliases()
    if name in aliases:
        return
    why = (f"unknown optax optimizer '{name}'" if not hasattr(optax, name) else
           f"optax:{name} is not one of optax's optimizers (a building block: its updates are "
           "not a descent step by themselves)")
    raise InputError(f"{why}; optax's optimizers: {', '.join(aliases)}")


class JaxAdapter(Adapter):
    KERAS = True
    DEFAULT = True  # the one-run command's framework for a Keras model given no --backend
    STYLE = ("--", "s")
    LIBRARY = "optax"  # optax:<name>
    CODE_FILES = ("study/frameworks/jax/optax_file.py",)  # a file's optax factory checked
    OPTIMIZER_KIND = "an optax (JAX) optimizer"
    MODULES = "an Equinox or Flax NNX module"
    PAIR = "jax-pair"  # (init_params, apply[, loss])
    COLUMNS = (Column("optax_version", "str", "optax: optimizers: optax's version"),)
    LINE_SEARCH = ("lbfgs",)  # its optimizers whose line search compares the loss at points
    keras_stepper = JaxStepper
    workload = JaxWorkload
    flat_value_and_grad = staticmethod(flat_value_and_grad)
    placed = staticmethod(placed)
    module_kind = staticmethod(module_kind)
    stochastic_layers = staticmethod(stochastic_layers)
    check_optimizer = staticmethod(check_optimizer)

    def gpu_seen(self) -> bool:
        import jax

        try:
            return bool(jax.devices("gpu"))
        except RuntimeError:
            return False

    def submission(self, name: str, hyperparameters: dict) -> OptaxSubmission:
        if not is_file_name(name):
            check_optimizer(name)
        return OptaxSubmission(name, hyperparameters)


ADAPTER = JaxAdapter()
warm = ADAPTER.warm  # the warm process's preload (study.train.plugin.preload)
