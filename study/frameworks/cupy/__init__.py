"""CuPy, NumPy's API on the GPU (GPU only): the NumPy backend and the feed-mode CNN on CuPy
arrays."""

from __future__ import annotations

from study.frameworks.registry import (
    DTYPES,
    FORMULATIONS,
    PER_CALL,
    Backend,
    FeedMode,
    Framework,
    register,
)

register(None, Framework(
    "cupy", "cupy", "CuPy", ("cupy-cuda12x", "cupy-cuda13x"), "cupy",
    installs=("cupy-cuda12x", "cupy-cuda13x", "cupy"), preload=("cupy",), devices=("gpu",),
    gpu_count="import cupy\ntry:\n    print(cupy.cuda.runtime.getDeviceCount())\n"
              "except Exception:\n    print(0)",
    feedmode=f"{__name__}.feedmode", feedmodes={
        "cupy-numpy": FeedMode("raw", "numpy", "conv-pool", False,
                               "CuPy (NumPy's API on the GPU), cupy.asarray(x) at every call",
                               ("cupy-resident", PER_CALL)),
        "cupy-resident": FeedMode("raw", "resident", "conv-pool", False,
                                  "CuPy on an array copied to the GPU once"),
    }))
register(Backend(
    "cupy", "cupy", f"{__name__}.backend", "CupyBackend",
    {"dtype": DTYPES, "formulation": FORMULATIONS, "device": ("gpu",),
     "feed": ("resident",)},
    files=("study/frameworks/numpy/backend.py", "study/frameworks/cupy/backend.py"), ops="CupyOps",
    styles={"cupy-resident": ((0, (2, 2, 6, 2)), "1"), "cupy-resident+gram": ((0, (1, 4)), "3")}))
