"""PyTorch: its own optimizers are torch.optim's (`torch:<Class>`) and a file's torch.optim
subclass (`path.py:Class`)."""

from __future__ import annotations

from optimizers import PREFIXES
from optimizers.from_file import FILE_LIBRARIES
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
from study.frameworks.torch.optimizers import TORCH_PREFIX, TorchOptimizer, build, torch_class

register(None, Framework(
    "torch", "torch", "PyTorch", ("torch",), "torch",
    preload=("torch",),
    gpu_count="import torch; print(torch.cuda.device_count())",
    feedmode=f"{__name__}.feedmode", feedmodes={
        "torch-numpy": FeedMode("eager", "numpy", "conv-pool", False,
                                "PyTorch eager, torch.from_numpy(x).to(device) at every call",
                                ("torch-resident", PER_CALL)),
        "torch-resident": FeedMode("eager", "resident", "conv-pool", False,
                                   "PyTorch eager on a tensor made once on the device"),
        "torch-compile-arg": FeedMode("compile", "argument", "conv-pool", False,
                                      "torch.compile of the network, the resident tensor passed "
                                      "as an argument", ("torch-resident", PER_CALL)),
        "torch-compile-captured": FeedMode("compile", "captured-tensor", "conv-pool", False,
                                           "torch.compile of a function closing over the "
                                           "resident tensor", ("torch-compile-arg", FIRST_CALL)),
    },
    train=f"{__name__}.train",
    examples={name: f"{__name__}.examples:{name.replace('-', '_')}"
              for name in ("digits-cnn-torch", "eve-mlp-torch", "mnist-net-torch")}))
register(Backend(
    "torch", "torch", f"{__name__}.backend", "TorchBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS, "device": DEVICES,
     "feed": ("resident", "feed", "compiled", "graphed")},
    needs={("feed", "graphed"): ("device", "gpu", "it replays CUDA graphs")},
    files=("study/frameworks/torch/backend.py",), ops="TorchOps",
    styles={"torch-feed": ((0, (7, 3, 1, 3)), ">"), "torch-resident": ((0, (1, 1)), "h"),
            "torch-compiled": ((0, (9, 2)), "8"), "torch-graphed": ((0, (3, 1, 3, 3)), "+")},
    twin=f"{__name__}.twin"))

PREFIXES[TORCH_PREFIX] = TorchOptimizer  # torch.optim's: `torch:LBFGS`
# a file's torch.optim.Optimizer subclass, run by the same harness
FILE_LIBRARIES[TORCH_PREFIX] = (torch_class, build)
