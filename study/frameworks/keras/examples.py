"""Keras's shipped models for the train study (its registry entry's `examples`), each taking
(input_shape, outputs) and returning an uncompiled Keras model, as a user's `file.py:function`
does."""

from __future__ import annotations

import numpy as np


def digits_cnn(input_shape, outputs):
    """conv 3x3x1x6 VALID -> avg_pool 2x2 -> relu (the original question's layer), then a dense
    softmax head."""
    import keras

    return keras.Sequential([
        keras.Input(shape=tuple(input_shape)),
        keras.layers.Conv2D(6, 3, padding="valid"),
        keras.layers.AveragePooling2D(2),
        keras.layers.Activation("relu"),
        keras.layers.Flatten(),
        keras.layers.Dense(outputs, activation="softmax"),
    ], name="digits_cnn")


def eve_mlp(input_shape, outputs):
    """Two hidden layers of 32 relu units and a sigmoid output."""
    import keras

    return keras.Sequential([
        keras.Input(shape=tuple(input_shape)),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(32, activation="relu"),
        keras.layers.Dense(outputs, activation="sigmoid"),
    ], name="eve_mlp")


def mnist_convnet(input_shape, outputs):
    """Keras's "simple MNIST convnet" example (keras.io/examples/vision/mnist_convnet); its
    recipe: categorical cross-entropy on one-hot labels, Adam, batch 128."""
    import keras

    return keras.Sequential([
        keras.Input(shape=tuple(input_shape)),
        keras.layers.Conv2D(32, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Conv2D(64, 3, activation="relu"),
        keras.layers.MaxPooling2D(2),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.5),
        keras.layers.Dense(outputs, activation="softmax"),
    ], name="mnist_convnet")


def mnist_net(input_shape, outputs):
    """PyTorch's MNIST example `Net` in Keras: the twin of `mnist-net-torch`, which draws the
    initial weights that example's runs start from and the reference loss they are checked
    against. So it is written as PyTorch has it: rows channels first (1, 28, 28), each weight in
    PyTorch's shape, order and default initialization, flattened in (c, h, w) order, ending in
    log_softmax (the loss: nll)."""
    import keras

    layers = keras.layers
    return keras.Sequential([
        keras.Input(shape=(1, 28, 28)),
        _out_in_layer(keras, "conv", 1, 32, 3), layers.Activation("relu"),
        _out_in_layer(keras, "conv", 32, 64, 3), layers.Activation("relu"),
        layers.MaxPooling2D(2, data_format="channels_first"),
        layers.Dropout(0.25),
        layers.Flatten(),
        _out_in_layer(keras, "linear", 9216, 128), layers.Activation("relu"),
        layers.Dropout(0.5),
        _out_in_layer(keras, "linear", 128, outputs),
        layers.Activation("log_softmax"),
    ], name="mnist_net")


def _out_in_layer(keras, kind: str, inputs: int, outputs: int, size: int = 1):
    """A conv (channels first) or linear layer with PyTorch's weight shape and initialization."""
    from keras import ops

    fan_in = inputs * size * size
    bound = 1.0 / np.sqrt(fan_in)

    class OutInLayout(keras.layers.Layer):
        def build(self, _):
            shape = (outputs, inputs, size, size) if kind == "conv" else (outputs, inputs)
            init = keras.initializers.RandomUniform(-bound, bound)
            self.weight = self.add_weight(shape=shape, initializer=init, name="weight")
            self.bias = self.add_weight(shape=(outputs,), initializer=init, name="bias")

        def call(self, x):
            if kind == "linear":
                return ops.matmul(x, ops.transpose(self.weight)) + self.bias
            kernel = ops.transpose(self.weight, (2, 3, 1, 0))  # to Keras's HWIO
            return (ops.conv(x, kernel, data_format="channels_first")
                    + ops.reshape(self.bias, (1, outputs, 1, 1)))

        def compute_output_shape(self, shape):
            if kind == "linear":
                return (*shape[:-1], outputs)
            return (shape[0], outputs, *(None if d is None else d - size + 1 for d in shape[2:]))

    return OutInLayout()
