"""TensorFlow: the original question's TF1 program (tf1.py) beside TF2's modes; its own
optimizer is TensorFlow Probability's L-BFGS (`lbfgs-tfp`)."""

from __future__ import annotations

from optimizers import OPTIMIZERS
from study.frameworks.registry import (
    DEVICES,
    DTYPES,
    FORMULATIONS,
    Backend,
    FeedMode,
    Framework,
    register,
)
from study.frameworks.tensorflow.optimizers import TfpLBFGS

TF_MODES = {
    "numpy": FeedMode("tf1", "numpy", "conv-pool", False,
                      "TF1 graph; the NumPy array passed straight into the ops (a graph "
                      "constant)"),
    "constant": FeedMode("tf1", "constant", "conv-pool", False,
                         "TF1 graph; tf.constant(x) (a graph constant)"),
    "placeholder": FeedMode("tf1", "placeholder", "conv-pool", False,
                            "TF1 graph; tf.placeholder fed with feed_dict at every call"),
    "variable": FeedMode("tf1", "variable", "conv-pool", False,
                         "TF1 graph; a tf.Variable initialised once from a placeholder "
                         "(resident)"),
    "eager-numpy": FeedMode("eager", "numpy", "conv-pool", False,
                            "TF2 eager ops called on the NumPy array"),
    "eager-tensor": FeedMode("eager", "tensor", "conv-pool", False,
                             "TF2 eager ops called on a tensor made once"),
    "function-arg": FeedMode("function", "argument", "conv-pool", False,
                             "tf.function with an input_signature, the data passed as a tensor"),
    "function-const": FeedMode("function", "captured-tensor", "conv-pool", False,
                               "tf.function closing over tf.constant(x) (captured by "
                               "reference)"),
    "function-numpy": FeedMode("function", "numpy", "conv-pool", False,
                               "tf.function closing over the NumPy array (embedded as a "
                               "constant)"),
    "function-xla": FeedMode("function", "argument", "conv-pool", True,
                             "function-arg with jit_compile=True (XLA)"),
    "fused": FeedMode("function", "argument", "fused-conv", False,
                      "function-arg computing one 4x4 stride-2 convolution (3x3 kernel * 2x2 "
                      "box of 1/4), then relu: no 30x30 intermediate"),
}

register(None, Framework(
    "tensorflow", "tensorflow", "TensorFlow",
    ("tensorflow", "keras", "tensorflow-probability"), None,
    preload=("tensorflow",),
    gpu_count="import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))",
    feedmode=f"{__name__}.feedmode", feedmodes=TF_MODES,
    train=f"{__name__}.train"))
register(Backend(
    "tensorflow", "tensorflow", f"{__name__}.backend", "TensorflowBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS, "device": DEVICES,
     "feed": ("fused", "feed", "resident", "tf1"), "xla": (False, True)},
    files=("study/frameworks/numpy/backend.py", "study/frameworks/tensorflow/backend.py",
           "study/frameworks/tensorflow/tf1.py"),
    labels={"feed": "tf-feed", "resident": "tf-resident", "fused": "tf-fused", "tf1": "tf1"},
    ops="TensorflowOps",
    styles={"tf1": (":", "v"), "tf-feed": ("--", "^"), "tf-resident": ("-.", "D"),
            "tf-fused": ((0, (5, 1)), "P"), "tf-fused+xla": ((0, (3, 1, 1, 1)), "X"),
            "tf-fused+gram": ((0, (1, 2)), "*")},
    twin=f"{__name__}.twin"))

# TensorFlow Probability's, on the tensorflow backend (extra 'tfp')
OPTIMIZERS["lbfgs-tfp"] = TfpLBFGS
