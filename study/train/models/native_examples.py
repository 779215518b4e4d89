"""The shipped examples as native models, beside the Keras ones (study.train.models.examples): the
same architectures, written in PyTorch, as a pure-JAX pair and as an Equinox module, with their
parameters in Keras's layout and order (a conv kernel HWIO, a dense kernel (in, out), kernel then
bias per layer), so that one `.npz` of w0, w1, ... (Keras's get_weights order, the train study's
weights.npz) gives all of them the same initial weights and the same outputs, and the Keras, PyTorch
and JAX runs can be compared on one instance.

Without an .npz each initializes as Keras does by default (Glorot-uniform kernels, zero
biases), drawn by its own framework's generator under the run's seed.

Each function takes (input_shape, outputs, seed=0), as a user's `file.py:function` does.

`mnist-net-torch` is the other way round: PyTorch's MNIST example as written upstream
(channels-first rows, its own parameters), and its Keras twin
(study.train.models.examples.mnist_net) is written with PyTorch's layout, so the twin's draw
loads into it all the same.
"""

from __future__ import annotations

import math

# --- digits-cnn: conv 3x3x1x6 VALID -> avg_pool 2x2 -> relu -> flatten (h, w, c) -> dense softmax


def _glorot_limit(shape) -> float:
    receptive = math.prod(shape[:-2]) if len(shape) > 2 else 1
    fan_in, fan_out = shape[-2] * receptive, shape[-1] * receptive
    return math.sqrt(6.0 / (fan_in + fan_out))


def _cnn_shapes(input_shape, outputs):
    height, width, channels = input_shape
    pooled = ((height - 2) // 2) * ((width - 2) // 2) * 6
    return [(3, 3, channels, 6), (6,), (pooled, outputs), (outputs,)]


def _mlp_shapes(input_shape, outputs):
    (features,) = input_shape
    return [(features, 32), (32,), (32, 32), (32,), (32, outputs), (outputs,)]


def digits_cnn_torch(input_shape, outputs, seed: int = 0):
    """digits-cnn in PyTorch (NHWC input, as the data and Keras have it)."""
    import torch
    import torch.nn.functional as F

    class DigitsCNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            generator = torch.Generator().manual_seed(seed)
            shapes = _cnn_shapes(input_shape, outputs)
            self.conv_kernel, self.conv_bias, self.dense_kernel, self.dense_bias = (
                torch.nn.Parameter(_torch_init(torch, shape, generator)) for shape in shapes)

        def forward(self, x):
            h = F.conv2d(x.permute(0, 3, 1, 2), self.conv_kernel.permute(3, 2, 0, 1),
                         self.conv_bias)
            h = torch.relu(F.avg_pool2d(h, 2))
            h = h.permute(0, 2, 3, 1).flatten(1)  # Keras's Flatten order: (h, w, c)
            return torch.softmax(h @ self.dense_kernel + self.dense_bias, -1)

    return DigitsCNN()


def eve_mlp_torch(input_shape, outputs, seed: int = 0):
    """eve-mlp in PyTorch: 32-32 relu units and a sigmoid."""
    import torch

    class EveMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            generator = torch.Generator().manual_seed(seed)
            self.weights = torch.nn.ParameterList(
                torch.nn.Parameter(_torch_init(torch, shape, generator))
                for shape in _mlp_shapes(input_shape, outputs))

        def forward(self, x):
            w = self.weights
            h = torch.relu(x @ w[0] + w[1])
            h = torch.relu(h @ w[2] + w[3])
            return torch.sigmoid(h @ w[4] + w[5])

    return EveMLP()


def _torch_init(torch, shape, generator):
    if len(shape) == 1:
        return torch.zeros(shape)
    limit = _glorot_limit(shape)
    return (torch.rand(shape, generator=generator) * 2 - 1) * limit


def _jax_init(shapes):
    def init_params(key):
        import jax
        import jax.numpy as jnp

        keys = jax.random.split(key, len(shapes))
        return [jnp.zeros(shape) if len(shape) == 1 else
                jax.random.uniform(k, shape, minval=-_glorot_limit(shape),
                                   maxval=_glorot_limit(shape))
                for k, shape in zip(keys, shapes, strict=True)]

    return init_params


def _cnn_apply(params, x):
    import jax

    conv_kernel, conv_bias, dense_kernel, dense_bias = params
    h = jax.lax.conv_general_dilated(x, conv_kernel, (1, 1), "VALID",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC")) + conv_bias
    n, height, width, channels = h.shape
    h = h[:, :height // 2 * 2, :width // 2 * 2]
    h = h.reshape(n, height // 2, 2, width // 2, 2, channels).mean((2, 4))
    h = jax.nn.relu(h).reshape(n, -1)
    return jax.nn.softmax(h @ dense_kernel + dense_bias, -1)


def _mlp_apply(params, x):
    import jax

    h = jax.nn.relu(x @ params[0] + params[1])
    h = jax.nn.relu(h @ params[2] + params[3])
    return jax.nn.sigmoid(h @ params[4] + params[5])


def digits_cnn_jax(input_shape, outputs):
    """digits-cnn as a pure-JAX pair (init_params(key), apply(params, x))."""
    return _jax_init(_cnn_shapes(input_shape, outputs)), _cnn_apply


def eve_mlp_jax(input_shape, outputs):
    """eve-mlp as a pure-JAX pair."""
    return _jax_init(_mlp_shapes(input_shape, outputs)), _mlp_apply


def digits_cnn_equinox(input_shape, outputs, seed: int = 0):
    """digits-cnn as an Equinox module (applied per example, Equinox's convention)."""
    import equinox as eqx
    import jax

    class DigitsCNN(eqx.Module):
        conv_kernel: jax.Array
        conv_bias: jax.Array
        dense_kernel: jax.Array
        dense_bias: jax.Array

        def __call__(self, x):
            params = (self.conv_kernel, self.conv_bias, self.dense_kernel, self.dense_bias)
            return _cnn_apply(params, x[None])[0]

    return DigitsCNN(*_jax_init(_cnn_shapes(input_shape, outputs))(jax.random.key(seed)))


def mnist_net_torch(input_shape, outputs):
    """PyTorch's MNIST example `Net` (github.com/pytorch/examples, mnist/main.py) as written
    there: channels-first rows (1, 28, 28: the data's `layout = "channels_first"`), log_softmax
    outputs (the loss: nll, PyTorch's F.nll_loss), trained there with Adadelta at lr 1.0, batch
    64. Its parameters are PyTorch's own, in its order; a run of the example starts from its
    Keras twin's draw for the seed (study.train.models.examples.mnist_net, the same shapes and
    initializer), or from PyTorch's default initialization when built on its own."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, outputs)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    return Net()


NATIVE_MODELS = {"digits-cnn-torch": digits_cnn_torch, "digits-cnn-jax": digits_cnn_jax,
                 "digits-cnn-equinox": digits_cnn_equinox, "eve-mlp-torch": eve_mlp_torch,
                 "eve-mlp-jax": eve_mlp_jax, "mnist-net-torch": mnist_net_torch}
# each shipped native example's framework (the command and config can pick the backend from the
# name, before anything is imported)
FRAMEWORK_OF = {name: name.rsplit("-", 1)[1].replace("equinox", "jax") for name in NATIVE_MODELS}
