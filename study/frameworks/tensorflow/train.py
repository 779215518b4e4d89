"""The train study on TensorFlow: Keras models only. Device: `tf.device` (TensorFlow places ops
softly, so a run's weights' device is read back after it). Steps: a `tf.function` updating the
variables in place, XLA as the model's `jit_compile` says (what `fit` uses)."""

from __future__ import annotations

import numpy as np

from study.train.frameworks import Adapter
from study.train.run.flat import layout, pieces
from study.train.run.stepper import KerasStepper


class TensorflowStepper(KerasStepper):
    """`fit`'s step without its metrics: the batch gathered by index from training arrays on
    the device, forward, the loss plus the model's own losses, gradients, the update."""

    def __init__(self, model, loss, x, y, rows):
        import tensorflow as tf

        self.tf = tf
        super().__init__(model, loss, x, y, rows)
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

    def put(self, values):
        return self.tf.identity(self.tf.constant(values))

    def run(self, prepared):
        for index in prepared:
            total = self.step(self.x, self.y, index)
        return total

    def read(self, value) -> float:
        return float(value.numpy())


def flat_value_and_grad(weights, loss_at, data, device=None):
    import tensorflow as tf

    shapes, ends = layout(weights)
    data = tuple(tf.constant(a) for a in data)  # placed by the run's device scope

    @tf.function
    def compiled(flat):
        for variable, value in zip(weights, pieces(flat, shapes, ends, tf.reshape),
                                   strict=True):
            variable.assign(value)
        with tf.GradientTape() as tape:
            value = loss_at(weights, data)
        grads = tape.gradient(value, weights)
        return value, tf.concat([tf.reshape(g, [-1]) for g in grads], 0)

    def call(w):
        value, grad = compiled(tf.constant(w, tf.float32))
        return float(value.numpy()), grad.numpy().astype(np.float64)

    return call


class TensorflowAdapter(Adapter):
    KERAS = True
    keras_stepper = TensorflowStepper
    flat_value_and_grad = staticmethod(flat_value_and_grad)

    def gpu_seen(self) -> bool:
        import tensorflow as tf

        return bool(tf.config.list_physical_devices("GPU"))

    def scope(self, device: str):
        import tensorflow as tf

        return tf.device(f"/{device.upper()}:0")

    def placed(self, value) -> str:
        return value.device.rsplit("device:", 1)[-1]


ADAPTER = TensorflowAdapter()
warm = ADAPTER.warm  # the warm process's preload (study.train.plugin.preload)
