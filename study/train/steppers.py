"""The segmented loop's steps for a Keras optimizer, one stepper per framework (the interface:
study.train.loop). Each does per step what Keras's `fit` does, minus the metrics it keeps for
its progress bar: gather the batch by row index from training arrays already on the device,
forward, the compiled loss (plus the model's own losses), gradients, the optimizer's update.
None reads anything back to the host inside a segment; `read` is the one read at its end.

JAX: one `jax.jit` of a stateless step (`model.stateless_call`, `jax.value_and_grad`,
`optimizer.stateless_apply`) with the state (trainable, non-trainable and optimizer values)
donated, as `fit` compiles it (keras/src/backend/jax/trainer.py); the state lives in the step's
buffers and is written into the model's variables before an evaluation and read back after it
(the evaluation's own compiled step donates and replaces them).
TensorFlow: a `tf.function` of the step updating the variables in place, XLA as the model's
`jit_compile` says (what `fit` uses). PyTorch: an eager step (`fit`'s is eager too).
Setup (`warm`, study.train.loop) runs one step for what its first call costs (tracing,
compiling, allocating) and leaves the state where it was: JAX on a copy of the state, thrown
away; TensorFlow and PyTorch on the variables, every one of the model and its optimizer then
put back (`rewound`).
"""

from __future__ import annotations

import numpy as np

from study.train.frameworks import pick


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


def make_stepper(model, loss, x: np.ndarray, y: np.ndarray, rows):
    """The stepper of a compiled model (its optimizer built here), the training arrays put once
    on the device that holds the model's weights."""
    import keras

    model.optimizer.build(model.trainable_variables)
    kind = pick(STEPPERS, keras.backend.backend(), "the segmented loop")
    return kind(model, loss, x, y, rows)


class JaxStepper:
    def __init__(self, model, loss, x, y, rows):
        import jax

        self.jax, self.model, self.rows = jax, model, rows
        self.device = next(iter(model.weights[0].value.devices()))  # where Keras put them
        self.x, self.y = jax.device_put(x, self.device), jax.device_put(y, self.device)
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

    def prepare(self, first: int, count: int):
        return self.jax.device_put([np.asarray(self.rows(i), np.int32)
                                    for i in range(first, first + count)], self.device)

    def warm(self, prepared) -> None:
        """One step on a copy of the state (of the same types and placement: no new compile),
        thrown away: the step is pure, so the state is kept. Compiled ahead of time instead,
        step 1 still paid its first call's costs (~80 ms against ~0.2 ms for step 2)."""
        jax = self.jax
        copy = jax.tree.map(lambda a: jax.numpy.array(a, copy=True), self.state)
        jax.block_until_ready(self.step(copy, self.x, self.y, prepared[0]))

    def run(self, prepared):
        for index in prepared:
            self.state, total = self.step(self.state, self.x, self.y, index)
        return total

    def read(self, value) -> float:
        self.jax.block_until_ready(self.state)
        return float(self.jax.device_get(value))

    def write_back(self) -> None:
        model = self.model
        variables = (model.trainable_variables, model.non_trainable_variables,
                     model.optimizer.variables)
        for group, values in zip(variables, self.state, strict=True):
            for variable, value in zip(group, values, strict=True):
                variable.assign(value)

    def reload(self) -> None:
        """The state from the model's variables, committed to the device as the step's outputs
        are (an uncommitted array is another argument type: the step would compile again)."""
        model = self.model
        self.state = self.jax.device_put(tuple([v.value for v in group] for group in (
            model.trainable_variables, model.non_trainable_variables, model.optimizer.variables)),
            self.device)


class TensorflowStepper:
    def __init__(self, model, loss, x, y, rows):
        import tensorflow as tf

        self.tf, self.model, self.rows = tf, model, rows
        self.x, self.y = tf.identity(tf.constant(x)), tf.identity(tf.constant(y))
        optimizer, weights = model.optimizer, model.trainable_variables

        def step(xs, ys, index):
            with tf.GradientTape() as tape:
                y_pred = model(tf.gather(xs, index), training=True)
                total = loss(tf.gather(ys, index), y_pred)
                if model.losses:
                    total = total + tf.add_n(model.losses)
            grads = tape.gradient(total, [v.value for v in weights])
            optimizer.apply(grads, weights)
            return total

        self.step = tf.function(step, jit_compile=bool(model.jit_compile), reduce_retracing=True)

    def prepare(self, first: int, count: int):
        return [self.tf.identity(self.tf.constant(np.asarray(self.rows(i), np.int32)))
                for i in range(first, first + count)]

    def warm(self, prepared) -> None:
        rewound(self.model, lambda: self.read(self.run(prepared[:1])))

    def run(self, prepared):
        for index in prepared:
            total = self.step(self.x, self.y, index)
        return total

    def read(self, value) -> float:
        return float(value.numpy())

    def write_back(self) -> None:  # the variables are updated in place
        pass

    def reload(self) -> None:
        pass


class TorchStepper:
    def __init__(self, model, loss, x, y, rows):
        import torch

        self.torch, self.model, self.loss, self.rows = torch, model, loss, rows
        self.device = model.weights[0].value.device  # where Keras put them
        self.x = torch.as_tensor(x, device=self.device)
        self.y = torch.as_tensor(y, device=self.device)

    def prepare(self, first: int, count: int):
        return [self.torch.as_tensor(np.asarray(self.rows(i), np.int64), device=self.device)
                for i in range(first, first + count)]

    def warm(self, prepared) -> None:
        rewound(self.model, lambda: self.read(self.run(prepared[:1])))

    def run(self, prepared):
        torch, model = self.torch, self.model
        for index in prepared:
            y_pred = model(self.x[index], training=True)
            model.zero_grad()
            total = self.loss(self.y[index], y_pred)
            if model.losses:
                total = total + torch.stack([torch.as_tensor(v) for v in model.losses]).sum()
            total.backward()
            weights = model.trainable_weights[:]
            with torch.no_grad():
                model.optimizer.apply([v.value.grad for v in weights], weights)
        return total.detach()

    def read(self, value) -> float:
        return float(value.item())

    def write_back(self) -> None:  # the variables are updated in place
        pass

    def reload(self) -> None:
        pass


STEPPERS = {"jax": JaxStepper, "tensorflow": TensorflowStepper, "torch": TorchStepper}
