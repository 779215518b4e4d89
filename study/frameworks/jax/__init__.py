"""JAX: its own optimizers are optax's L-BFGS (`optax-lbfgs`) and an optax factory of yours from
a file (`path.py:factory`, optax_file.py)."""

from __future__ import annotations

from optimizers import OPTIMIZERS
from optimizers.from_file import FILE_LIBRARIES
from study.frameworks.jax.optax_file import OPTAX_PREFIX, build, optax_factory
from study.frameworks.jax.optimizers import OptaxLBFGS
from study.frameworks.registry import (
    DEVICES,
    DTYPES,
    FIRST_CALL,
    FORMULATIONS,
    PER_CALL,
    Backend,
    FeedMode,
    Framework,
    register,
)

register(None, Framework(
    "jax", "jax", "JAX", ("jax", "jaxlib", "optax"), "jax",
    preload=("jax", "jax.numpy", "jax.scipy.linalg"),
    gpu_count="import jax\ntry:\n    print(len(jax.devices('gpu')))\n"
              "except RuntimeError:\n    print(0)",
    feedmode=f"{__name__}.feedmode", feedmodes={
        "jax-numpy": FeedMode("jit", "numpy", "conv-pool", True,
                              "jax.jit of the network, the NumPy array passed at every call "
                              "(copied to the device each call)", ("jax-resident", PER_CALL)),
        "jax-resident": FeedMode("jit", "resident", "conv-pool", True,
                                 "jax.jit of the network, given an array put on the device once "
                                 "(jax.device_put)"),
        "jax-constant": FeedMode("jit", "constant", "conv-pool", True,
                                 "jax.jit of a function closing over the NumPy array (embedded "
                                 "in the program as a constant)", ("jax-resident", FIRST_CALL)),
    },
    train=f"{__name__}.train",
    examples={name: f"{__name__}.examples:{name.replace('-', '_')}"
              for name in ("digits-cnn-jax", "eve-mlp-jax", "digits-cnn-equinox")}))
register(Backend(
    "jax", "jax", f"{__name__}.backend", "JaxBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS, "device": DEVICES,
     "feed": ("fused", "feed", "resident")},
    files=("study/frameworks/jax/backend.py",), ops="JaxOps",
    styles={"jax-feed": ((0, (6, 2)), "<"), "jax-resident": ((0, (2, 1)), "d"),
            "jax-fused": ((0, (4, 1, 1, 1, 1, 1)), "p"), "jax-fused+gram": ((0, (1, 3)), "H")},
    twin=f"{__name__}.twin"))

OPTIMIZERS["optax-lbfgs"] = OptaxLBFGS  # optax's, with its zoom line search, on the jax backend
# a file's function returning an optax GradientTransformation (optax_file.py)
FILE_LIBRARIES[OPTAX_PREFIX] = (optax_factory, build)
