"""One feed-mode run, measured in its own process (forked by the sweep engine for each run).

The record is saved (`ctx.save_partial`) at every phase, so that a run killed for time or
memory still tells how far it got; the tests call `measure_record` directly.

What is timed, in order (each phase outside the others' clocks):
- build: graph construction (TF1 modes; the constant modes embed the whole input here);
- session: `tf.compat.v1.Session(...)` (TF1) or the eager context's initialisation (TF2);
- data: placing the input once where a mode keeps it (variable initialiser, tf.constant);
- first call, then `calls` further calls, each ending with the result on the host as a NumPy
  array (`sess.run` / `.numpy()`), so the device is synchronised. For tf.function modes the
  first call includes tracing (and XLA compilation).
The noise probe (`ctx.probe`) wraps the calls. Then, outside every clock: the serialized
GraphDef size, and the check of the mode against the NumPy reference at `check_n` rows (a fresh
graph or function). Peak memory is the engine's (net of what the process inherited).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import pandas as pd
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from study.feedmode import model as fm
from study.feedmode.spec import Spec
from study.sweep.plugin import Measurement, RunContext

DEVICE_NAMES = {"cpu": "/device:CPU:0", "gpu": "/device:GPU:0"}


def session_config(grappler: str) -> tf.compat.v1.ConfigProto:
    """The TF1 session options of a graph optimisation variant (see feedmode.GRAPPLER)."""
    config = tf.compat.v1.ConfigProto()
    rewrite = config.graph_options.rewrite_options
    if grappler not in fm.GRAPPLER:
        raise ValueError(f"unknown grappler variant '{grappler}'")
    if grappler != "default":
        rewrite.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
    if grappler in ("no-folding", "off"):
        # the classic graph optimizer at L0 without its constant folding; "no-folding" keeps
        # CSE and inlining on (L1 would switch constant folding back on), "off" drops them
        options = config.graph_options.optimizer_options
        options.opt_level = tf.compat.v1.OptimizerOptions.L0
        options.do_constant_folding = False
        options.do_common_subexpression_elimination = grappler == "no-folding"
        options.do_function_inlining = grappler == "no-folding"
    if grappler == "off":
        rewrite.disable_meta_optimizer = True
    return config


def network(model: str, inputs, kernel):
    """The computation, written once for every mode (kernel: a small NumPy constant)."""
    if model == "fused-conv":
        return tf.nn.relu(tf.nn.conv2d(inputs, kernel, strides=fm.POOL, padding="VALID"))
    conv = tf.nn.conv2d(inputs, kernel, strides=1, padding="VALID")
    return tf.nn.relu(tf.nn.avg_pool2d(conv, ksize=fm.POOL, strides=fm.POOL, padding="VALID"))


class Clock:
    """Times phases into the record and saves the record before and after each (not inside)."""

    def __init__(self, record: dict, save: Callable[[dict], None]):
        self.record, self.save = record, save

    def enter(self, phase: str) -> None:
        self.record["phase"] = phase
        self.save(self.record)

    @contextmanager
    def phase(self, name: str):
        self.enter(name)
        t0 = time.perf_counter()
        yield
        self.record[f"{name}_seconds"] = time.perf_counter() - t0
        self.save(self.record)


@dataclass
class Prepared:
    call: Callable[[], np.ndarray]          # one synchronised call, the result on the host
    graph_bytes: Callable[[], int] | None   # serialized GraphDef size, measured after the calls
    close: Callable[[], None]
    placed: dict                            # 'device': where the output was computed


def _fetch(tensor, placed: dict) -> np.ndarray:
    placed.setdefault("device", tensor.device)
    return tensor.numpy()


def _to_device(x: np.ndarray, device: str):
    with tf.device(device):
        tensor = tf.identity(tf.constant(x))
    tf.reduce_sum(tensor[:1]).numpy()   # wait for the copy (a no-op wait on the CPU)
    return tensor


def build(spec: Spec, x: np.ndarray, kernel: np.ndarray, clock: Clock) -> Prepared:
    """The mode's callable, with its setup phases timed through `clock`."""
    mode = fm.MODES[spec.mode]
    device = DEVICE_NAMES[spec.device]
    dtype = tf.as_dtype(spec.dtype)
    if mode.api == "tf1":
        return _build_tf1(mode, spec.grappler, x, kernel, dtype, device, clock)
    if spec.grappler != "default":
        raise ValueError("grappler variants apply to the TF1 modes only")
    with clock.phase("session"):   # what a Session does for TF1: set up the runtime and devices
        tf.config.list_logical_devices()
    placed: dict = {}
    if mode.api == "eager":
        if mode.feed == "numpy":
            data = x
        else:
            with clock.phase("data"):
                data = _to_device(x, device)

        def eager_call():
            with tf.device(device):
                return _fetch(network(mode.model, data, kernel), placed)
        return Prepared(eager_call, None, lambda: None, placed)

    def fn(inputs):
        with tf.device(device):
            return network(mode.model, inputs, kernel)

    if mode.feed == "argument":
        with clock.phase("data"):
            data = _to_device(x, device)
        function = tf.function(fn, input_signature=[tf.TensorSpec(x.shape, dtype)],
                               jit_compile=mode.xla)

        def call():
            return _fetch(function(data), placed)
    elif mode.feed == "captured-tensor":
        with clock.phase("data"):
            data = _to_device(x, device)
        function = tf.function(lambda: fn(data), jit_compile=mode.xla)

        def call():
            return _fetch(function(), placed)
    elif mode.feed == "numpy":
        function = tf.function(lambda: fn(x), jit_compile=mode.xla)

        def call():
            return _fetch(function(), placed)
    else:
        raise ValueError(f"unknown feed '{mode.feed}'")

    def graph_bytes():
        return function.get_concrete_function().graph.as_graph_def().ByteSize()
    return Prepared(call, graph_bytes, lambda: None, placed)


def _build_tf1(mode, grappler, x, kernel, dtype, device, clock) -> Prepared:
    graph = tf.Graph()
    feeds = None
    with clock.phase("build"), graph.as_default(), graph.device(device):
        if mode.feed == "numpy":
            inputs = x
        elif mode.feed == "constant":
            inputs = tf.constant(x, dtype=dtype)
        elif mode.feed in ("placeholder", "variable"):
            holder = tf.compat.v1.placeholder(dtype, shape=x.shape, name="x")
            if mode.feed == "placeholder":
                inputs, feeds = holder, {holder: x}
            else:
                inputs = tf.Variable(holder, trainable=False, name="x_resident")
        else:
            raise ValueError(f"unknown feed '{mode.feed}'")
        output = network(mode.model, inputs, kernel)
    with clock.phase("session"):
        session = tf.compat.v1.Session(graph=graph, config=session_config(grappler))
    if mode.feed == "variable":
        with clock.phase("data"):
            session.run(inputs.initializer, feed_dict={holder: x})

    def call():
        return session.run(output, feed_dict=feeds)
    return Prepared(call, lambda: graph.as_graph_def().ByteSize(), session.close,
                    {"device": output.device})


def check(spec: Spec) -> tuple[float, bool]:
    """The mode at check_n rows, in a fresh graph or function, against the NumPy reference."""
    x = fm.make_input(spec.check_n, spec.dtype, spec.seed)
    kernel = fm.make_kernel(spec.dtype, spec.seed)
    expected = fm.reference(x, kernel)
    if fm.MODES[spec.mode].model == "fused-conv":
        kernel = fm.fused_kernel(kernel)
    prepared = build(spec, x, kernel, Clock({}, lambda record: None))
    try:
        got = prepared.call()
    finally:
        prepared.close()
    tol = fm.TOLERANCE[spec.dtype]
    if got.shape != expected.shape:
        return float("inf"), False
    error = float(np.max(np.abs(got.astype(np.float64) - expected)))
    return error, bool(np.allclose(got, expected, rtol=tol, atol=tol))


def measure_record(spec: Spec, record: dict | None = None,
                   save: Callable[[dict], None] = lambda record: None, probe=None) -> dict:
    """Measure one spec in this process (see the module docstring for what and in which order)."""
    record = {} if record is None else record
    clock = Clock(record, save)
    clock.enter("setup")
    x = fm.make_input(spec.n, spec.dtype, spec.seed)
    kernel = fm.make_kernel(spec.dtype, spec.seed)
    if fm.MODES[spec.mode].model == "fused-conv":
        kernel = fm.fused_kernel(kernel)
    prepared = build(spec, x, kernel, clock)

    with probe if probe is not None else nullcontext():
        clock.enter("first_call")
        t0 = time.perf_counter()
        y = prepared.call()
        record["first_call_seconds"] = time.perf_counter() - t0
        record["output_shape"] = list(y.shape)
        record["checksum"] = checksum = fm.checksum(y)
        record["device_name"] = prepared.placed.get("device")
        del y
        stable, steady = True, []
        record["steady_seconds"] = steady
        for call in range(1, spec.calls + 1):
            clock.enter(f"call {call}")
            t0 = time.perf_counter()
            y = prepared.call()
            steady.append(time.perf_counter() - t0)
            stable = stable and fm.checksum(y) == checksum
            del y
    record["checksum_stable"] = stable
    record["steady_median_seconds"] = float(np.median(steady))
    record["steady_min_seconds"] = float(np.min(steady))
    record["steady_max_seconds"] = float(np.max(steady))
    record["first_over_steady"] = record["first_call_seconds"] / record["steady_median_seconds"]
    record["total_calls_seconds"] = record["first_call_seconds"] + float(np.sum(steady))
    record["total_seconds"] = record["total_calls_seconds"] + sum(
        record.get(f"{p}_seconds") or 0.0 for p in ("build", "session", "data"))

    clock.enter("graphdef")
    record["graphdef_bytes"] = prepared.graph_bytes() if prepared.graph_bytes else None
    prepared.close()
    del prepared, x

    clock.enter("check")
    error, ok = check(spec)
    record["check_max_abs_error"] = error
    record["check_tolerance"] = fm.TOLERANCE[spec.dtype]
    record["check_ok"] = ok
    record["status"] = "ok" if ok else "mismatch"
    record["message"] = "" if ok else (
        f"max abs error {error:.3g} vs the NumPy reference at n={spec.check_n} exceeds "
        f"{fm.TOLERANCE[spec.dtype]:g}")
    record["phase"] = "done"
    save(record)
    return record


def measure(spec: Spec, ctx: RunContext) -> Measurement:
    """The engine's entry: the record as the row, the calls as a side table."""
    record: dict = {}
    try:
        measure_record(spec, record, ctx.save_partial, ctx.probe)
    except (tf.errors.ResourceExhaustedError, MemoryError) as exc:
        record.update(status="oom", message=f"{type(exc).__name__}: {exc}".splitlines()[0])
    steady = record.pop("steady_seconds", None) or []
    if isinstance(record.get("output_shape"), list):
        record["output_shape"] = "x".join(map(str, record["output_shape"]))
    calls = [{"call": i, "kind": "first" if i == 0 else "steady", "seconds": seconds}
             for i, seconds in enumerate([record["first_call_seconds"], *steady])
             if seconds is not None] if "first_call_seconds" in record else []
    return Measurement(record, {"calls": pd.DataFrame(calls, columns=["call", "kind",
                                                                      "seconds"])})
