"""JAX's shipped native models (study.train.models.examples says what they are): the
digits CNN and the eve MLP as pure-JAX (init_params, apply) pairs, and the digits CNN as an
Equinox module, in Keras's parameter layout."""

from __future__ import annotations

from study.train.models.examples import _cnn_shapes, _glorot_limit, _mlp_shapes


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
