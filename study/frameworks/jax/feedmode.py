"""The JAX modes of the feed-mode study (imported only for their runs: it imports JAX; the modes
are described in docs/feedmode.md).

The first call is done ahead of time so that its parts are known: trace and lower, then compile
(`compile_seconds`), then run. After the calls, outside every clock: `program_bytes` (the
lowered StableHLO, where an embedded array is stored as raw bytes), `executable_bytes` and
`output_folded`, whether XLA evaluated the network at compile time (its constant folding does so
for ops of up to 45 million elements).
"""

from __future__ import annotations

import io
import re
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.serialize_executable import serialize

from study.feedmode import model as fm
from study.feedmode.measure import Clock, Prepared
from study.feedmode.spec import Spec

WINDOW = (1, fm.POOL, fm.POOL, 1)
# the compiled program's result line: a constant, or a copy of one
FOLDED_ROOT = re.compile(r"^\s*ROOT \S+ = \S+ (constant\(|copy\(%?constant)")


def network(inputs, kernel: np.ndarray):
    """conv (VALID, NHWC x HWIO) -> 2x2 average pool -> relu, in the kernel's dtype."""
    conv = lax.conv_general_dilated(inputs, kernel, window_strides=(1, 1), padding="VALID",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))
    zero = np.zeros((), kernel.dtype)
    total = lax.reduce_window(conv, zero, lax.add, WINDOW, WINDOW, "VALID")
    return jnp.maximum(total * np.asarray(1.0 / fm.POOL**2, kernel.dtype), zero)


def output_folded(hlo: str) -> bool:
    """Whether the entry computation of a compiled module (its text) returns a constant."""
    entry = hlo[hlo.index("\nENTRY"):]
    return any(FOLDED_ROOT.match(line) for line in entry.splitlines())


def build(spec: Spec, x: np.ndarray, kernel: np.ndarray, clock: Clock) -> Prepared:
    """The mode's callable, with its setup phases timed through `clock`."""
    mode = fm.MODES[spec.mode]
    if mode.model != "conv-pool" or spec.grappler != "default":
        raise ValueError(f"{spec.mode}: JAX modes compute the conv-pool network, without "
                         "grappler variants")
    jax.config.update("jax_enable_x64", True)
    with clock.phase("session"):
        device = jax.devices(spec.device)[0]
    if mode.feed == "constant":
        function, args = jax.jit(lambda: network(x, kernel)), ()
    elif mode.feed == "numpy":
        function, args = jax.jit(lambda inputs: network(inputs, kernel)), (x,)
    elif mode.feed == "resident":
        with clock.phase("data"):
            data = jax.device_put(x, device).block_until_ready()
        function, args = jax.jit(lambda inputs: network(inputs, kernel)), (data,)
    else:
        raise ValueError(f"unknown feed '{mode.feed}'")
    built: dict = {}
    placed: dict = {}

    def compute() -> jax.Array:
        if not built:
            t0 = time.perf_counter()
            with jax.default_device(device):
                built["lowered"] = function.lower(*args)
                built["compiled"] = built["lowered"].compile()
            clock.record["compile_seconds"] = time.perf_counter() - t0
        y = built["compiled"](*args).block_until_ready()
        placed.setdefault("device", ",".join(f"{d.platform}:{d.id}" for d in y.devices()))
        return y

    def sizes() -> dict:
        program = io.BytesIO()
        built["lowered"].compiler_ir("stablehlo").operation.write_bytecode(program)
        executable = serialize(built["compiled"])[0]
        return {"program_bytes": len(program.getvalue()), "executable_bytes": len(executable),
                "output_folded": output_folded(built["compiled"].as_text())}

    return Prepared(compute, np.asarray, sizes, built.clear, placed)


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, jax.errors.JaxRuntimeError) and "RESOURCE_EXHAUSTED" in str(exc)
