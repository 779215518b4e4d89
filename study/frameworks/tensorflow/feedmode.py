"""The TensorFlow modes of the feed-mode study (imported only for their runs: it imports
TensorFlow; the modes are described in docs/feedmode.md). `build` returns a mode's callable;
`study.feedmode.measure` times it.

A TF1 `Session.run` fetches NumPy arrays, so compute runs the graph up to a session handle of
the output (the tensor stays on its device) and fetch reads it with a second, small run (its
fixed cost, tens of microseconds, is in the fetch); the handle is deleted outside both clocks.
`graphdef_bytes` is the network's GraphDef, without the handle's ops.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import rewriter_config_pb2

from study.feedmode import model as fm
from study.feedmode.measure import Clock, Prepared
from study.feedmode.spec import Spec

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


def _synchronized(tensor, placed: dict):
    """The output once every device has finished (a TF2 call's compute ends here)."""
    placed.setdefault("device", tensor.device)
    tf.test.experimental.sync_devices()
    return tensor


def _fetch(tensor) -> np.ndarray:
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
    if mode.feed == "numpy":
        data = x
    else:
        with clock.phase("data"):
            data = _to_device(x, device)
    if mode.api == "eager":
        def eager_call():
            with tf.device(device):
                return _synchronized(network(mode.model, data, kernel), placed)
        return Prepared(eager_call, _fetch, lambda: {"graphdef_bytes": None}, placed=placed)

    def fn(inputs):
        with tf.device(device):
            return network(mode.model, inputs, kernel)

    if mode.feed == "argument":
        function = tf.function(fn, input_signature=[tf.TensorSpec(x.shape, dtype)],
                               jit_compile=mode.xla)
        arguments = (data,)
    elif mode.feed in ("captured-tensor", "numpy"):  # closing over the tensor or the array
        function, arguments = tf.function(lambda: fn(data), jit_compile=mode.xla), ()
    else:
        raise ValueError(f"unknown feed '{mode.feed}'")

    def call():
        return _synchronized(function(*arguments), placed)

    def sizes():
        graph = function.get_concrete_function().graph
        return {"graphdef_bytes": graph.as_graph_def().ByteSize()}
    return Prepared(call, _fetch, sizes, placed=placed)


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
    built = {op.name for op in graph.get_operations()}
    with graph.as_default(), graph.device(device):   # outside the build's clock
        # the output kept in the session store, and a reader of it made before the session, so
        # that no timed run extends the graph
        handle = tf.compat.v1.get_session_handle(output)
        read_holder = tf.compat.v1.placeholder(tf.string, shape=())
        reader = tf.raw_ops.GetSessionTensor(handle=read_holder, dtype=dtype)
    with clock.phase("session"):
        session = tf.compat.v1.Session(graph=graph, config=session_config(grappler))
    if mode.feed == "variable":
        with clock.phase("data"):
            session.run(inputs.initializer, feed_dict={holder: x})
    try:   # the reader's executor, made now and outside the clocks: the session's first run of a
        # new signature prunes a copy of the whole graph (an embedded input included), which a
        # user's one session.run(output) would not pay; the handle names no stored tensor
        session.run(reader, feed_dict={read_holder: f"none;0;{device}"})
    except tf.errors.InvalidArgumentError:
        pass

    def compute():
        return session.run(handle, feed_dict=feeds)   # a TensorHandle

    def fetch(held) -> np.ndarray:
        return session.run(reader, feed_dict={read_holder: held.handle})

    def release(held) -> None:
        # now, not when garbage-collected: the session deletes dead handles ten at a time,
        # inside whichever run comes next, and would keep ten outputs alive meanwhile (its
        # first call adds the deleter's ops to the graph, outside the clocks)
        held.delete()

    def sizes() -> dict:
        """The GraphDef of the network as built, without the handle's ops (removed in place: a
        copy of a constant mode's GraphDef would double its memory)."""
        graph_def = graph.as_graph_def()
        for i in reversed([i for i, node in enumerate(graph_def.node) if node.name not in built]):
            del graph_def.node[i]
        return {"graphdef_bytes": graph_def.ByteSize()}

    return Prepared(compute, fetch, sizes, session.close, {"device": output.device}, release)


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, tf.errors.ResourceExhaustedError)
