"""Host reads per iteration, counted in every mode of every installed backend: a host read of a
device value is a synchronization, so the harness makes exactly the ones its stopping rules
need (DESIGN.md, "The harness out of the way"): one per iteration where a step is called from
the host loop (numpy, feed, resident, compiled, tf1), one per chunk where the loop runs on the
device (JAX fused, PyTorch graphed; TensorFlow's fused loop is one chunk).

Each framework's reads are counted where every read of it passes: torch.Tensor's numpy, item,
tolist and scalar conversions (np.asarray goes through numpy); a JAX array's `_value` (tolist,
int, float, bool, device_get; np.asarray on a CPU reads through the buffer protocol, which no
patch sees, so the JAX backend reads with tolist); an eager TensorFlow tensor's `_numpy`
(numpy, int, float, bool, np.asarray); a TF1 Session.run; NumPy's one `observe` of the host
loop. The count is taken for
two run lengths, from the moment the run's clock starts, and compared as a difference, so the
final fetch of the result cancels, and any read added per iteration or per chunk fails.
"""

from __future__ import annotations

import os

import pytest

from datasets import make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.result import Stopwatch
from study.frameworks.registry import BACKENDS, FRAMEWORKS, make_backend

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

SHORT, LONG = 6, 16  # iterations of the two runs compared
PER_CHUNK = {("jax", "fused"), ("torch", "graphed"), ("tensorflow", "fused")}


def installed(name: str) -> bool:
    framework = BACKENDS[name].framework
    return framework is None or FRAMEWORKS[framework].installed()


def cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def modes():
    out = [pytest.param("numpy", None, id="numpy")]
    for name, backend in BACKENDS.items():
        for feed in backend.allowed("feed"):
            mark = pytest.mark.skipif(not installed(name), reason=f"{name} is not installed")
            out.append(pytest.param(name, feed, id=f"{name}-{feed}", marks=mark))
    return out


class Counter:
    """Reads once the run's clock has started: a run makes its setup clock first, then the
    loop's (optimizers.result.Stopwatch), so compiling and warm-up calls, whose reads vary
    with the framework's caches, are not counted."""

    reads = 0
    clocks = 0

    def wrap(self, function):
        def counted(*arguments, **keywords):
            self.reads += self.clocks >= 2
            return function(*arguments, **keywords)

        return counted


def count_reads(monkeypatch, backend: str, feed) -> Counter:
    """Patch the framework's host-read choke points to count into a Counter."""
    counter = Counter()
    started = Stopwatch.__init__

    def clock(self):
        counter.clocks += 1
        started(self)

    monkeypatch.setattr(Stopwatch, "__init__", clock)
    if backend == "numpy" or feed == "tf1":
        if feed == "tf1":
            from tensorflow.python.client import session

            monkeypatch.setattr(session.BaseSession, "run",
                                counter.wrap(session.BaseSession.run))
        else:
            from optimizers import driver

            loop = driver.host_loop

            def host_loop(problem, rules, *, init, step, observe):
                return loop(problem, rules, init=init, step=step, observe=counter.wrap(observe))

            monkeypatch.setattr(driver, "host_loop", host_loop)
            from study.frameworks.numpy import backend as numpy_backend

            monkeypatch.setattr(numpy_backend, "host_loop", host_loop)  # its own name for it
    elif backend == "torch":
        import torch

        for name in ("numpy", "item", "tolist", "__bool__", "__float__", "__int__"):
            monkeypatch.setattr(torch.Tensor, name, counter.wrap(getattr(torch.Tensor, name)))
    elif backend == "jax":
        from jax._src.array import ArrayImpl

        monkeypatch.setattr(ArrayImpl, "_value", property(counter.wrap(ArrayImpl._value.fget)))
    elif backend == "tensorflow":
        from tensorflow.python.framework import ops

        monkeypatch.setattr(ops._EagerTensorBase, "_numpy",
                            counter.wrap(ops._EagerTensorBase._numpy))
    return counter


@pytest.fixture(scope="module")
def problem():
    return make_problem("synthetic", n=300, d=4, kappa=100.0, seed=5)


@pytest.mark.parametrize("backend, feed", modes())
def test_reads_per_iteration_or_per_chunk(problem, monkeypatch, backend, feed):
    dtype = "float32" if (backend, feed) == ("torch", "compiled") else "float64"
    reads_per_iteration_or_chunk(problem, monkeypatch, backend, feed, dtype)


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_compiled_torch_float64_on_a_cpu_reads_once_with_the_same_rows(problem, monkeypatch):
    """TorchDynamo guards a 0-d float64 CPU tensor argument (a step size) with .item() at every
    call: the compiled step gets its constants as Python floats (`host_numbers`), one read per
    iteration, and the run is the one its tensors gave, bit for bit."""
    from study.frameworks.torch import backend as torch_backend

    reads_per_iteration_or_chunk(problem, monkeypatch, "torch", "compiled", "float64")

    def rows(optimizer):
        result = run(problem, optimizer, build_rules(tol=1e-10, max_iter=150),
                     backend=make_backend("torch", "float64", feed="compiled"))
        return (result.iterations, result.status, result.w.tobytes(),
                result.trace.drop(columns="seconds").to_numpy().tobytes())

    for optimizer in (make_optimizer("gd"), make_optimizer("nesterov")):
        floats = rows(optimizer)
        with monkeypatch.context() as patch:
            patch.setattr(torch_backend, "host_numbers", lambda params, torch: params)
            assert rows(optimizer) == floats


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
@pytest.mark.parametrize("feed", ["resident", "feed"])
def test_eager_torch_off_the_schedule_reads_the_loss_alone_with_the_same_rows(
        problem, monkeypatch, feed):
    """An eager step off the trace's schedule makes no stats (its loss is the read; the norm is
    read only where the loss leaves the quiet region, here where the target fires): still one
    read an iteration there (iterations 300-319: two kept by the schedule, 18 not), and the
    rows of a run that makes the stats at every iterate, bit for bit."""
    from study.frameworks.torch import backend as torch_backend

    def engine():
        return make_backend("torch", "float64", feed=feed)

    reads = {}
    for iterations in (300, 320):
        made = engine()
        with monkeypatch.context() as patch:
            counter = count_reads(patch, "torch", feed)
            run(problem, make_optimizer("gd"), build_rules(max_iter=iterations), backend=made)
        reads[iterations] = counter.reads
    assert reads[320] - reads[300] == 20

    def rows():
        result = run(problem, make_optimizer("gd"), build_rules(tol=1e-9, max_iter=5000),
                     backend=engine())
        return (result.iterations, result.status, result.grad_norm, result.w.tobytes(),
                result.trace.drop(columns="seconds").to_numpy().tobytes())

    glanced = rows()
    assert glanced[1] == "converged" and glanced[0] > 100
    loop = torch_backend.host_loop
    with monkeypatch.context() as patch:  # the stats at every iterate, as before
        patch.setattr(torch_backend, "host_loop",
                      lambda *args, glance=None, **keywords: loop(*args, **keywords))
        assert rows() == glanced


def reads_per_iteration_or_chunk(problem, monkeypatch, backend, feed, dtype):
    options = {"dtype": dtype} if feed is None else {"feed": feed, "dtype": dtype}
    if feed == "graphed":
        options["device"] = "gpu"
        if not cuda():  # its host side on the CPU, each capture replaced by the eager chunk
            from functools import partial

            from study.frameworks.torch import backend as torch_backend

            monkeypatch.setattr(torch_backend, "_warm_up", lambda init, step, data, params,
                                start: step(data, params, init(data, params, start)[0])[0])
            monkeypatch.setattr(torch_backend, "_capture", lambda chunk, sizes: {
                size: partial(chunk, size) for size in sizes})
    if (backend, feed) == ("jax", "fused"):  # chunks of one iteration after the first two
        from study.frameworks.jax import backend as jax_backend

        monkeypatch.setattr(jax_backend, "FIRST_CHUNK", 2)
        monkeypatch.setattr(jax_backend, "CHUNK_SECONDS", 1e-12)
    counts = {}
    for iterations in (SHORT, LONG):
        engine = make_backend(backend, **options)  # made (and its framework loaded) unpatched
        if feed == "graphed" and not cuda():
            engine.device = "cpu"  # after the check that refuses graphed on a CPU
        with monkeypatch.context() as patch:
            counter = count_reads(patch, backend, feed)
            result = run(problem, make_optimizer("gd"), build_rules(max_iter=iterations),
                         backend=engine)
        assert result.iterations == iterations, result.message
        extra = result.extra
        chunks = extra.get("fused_chunks", extra.get("graphed_chunks", 1))
        counts[iterations] = (counter.reads, chunks)
    (short_reads, short_chunks), (long_reads, long_chunks) = counts[SHORT], counts[LONG]
    if (backend, feed) in PER_CHUNK:
        expected, per = long_chunks - short_chunks, "chunk"
    else:
        expected, per = LONG - SHORT, "iteration"
    assert long_reads - short_reads == expected, (
        f"{backend} {feed}: {long_reads - short_reads} host reads for {LONG - SHORT} more "
        f"iterations ({long_chunks - short_chunks} more chunks): one per {per} expected")
    if (backend, feed) == ("jax", "fused"):
        assert long_chunks - short_chunks == LONG - SHORT  # the chunks really were small


@pytest.mark.skipif(not installed("jax"), reason="jax is not installed")
def test_jax_feed_hands_each_call_host_arrays_it_must_copy(problem, monkeypatch):
    """On a CPU, XLA takes a 64-byte-aligned host array without copying it (the premise,
    checked first): feed handed JAX views of its own buffers and so copied nothing. Its host
    arrays now sit where JAX cannot alias them, so every call copies, as `feed_dict` did."""
    import jax
    import numpy as np

    from study.frameworks.jax import backend as jax_backend

    make_backend("jax", "float64", feed="feed")  # x64 on, as in a run
    aligned = np.asarray(jax.device_put(np.ones((4, 1000))))
    assert jax.device_put(aligned).unsafe_buffer_pointer() == aligned.ctypes.data  # aliased
    handed = []
    place = jax_backend.host_array
    monkeypatch.setattr(jax_backend, "host_array", lambda a: handed.append(place(a)) or
                        handed[-1])
    result = run(problem, make_optimizer("gd"), build_rules(max_iter=3),
                 backend=make_backend("jax", "float64", feed="feed"))
    assert result.iterations == 3 and handed
    for array in handed:
        assert isinstance(array, np.ndarray)
        assert jax.device_put(array).unsafe_buffer_pointer() != array.ctypes.data  # copied


@pytest.mark.skipif(not installed("torch"), reason="torch is not installed")
def test_torch_resident_gd_dispatches_the_hand_loops_ops_and_the_stats_only(problem):
    """Eagerly, every op is a dispatch (on a GPU a kernel launch): per iteration our GD step
    dispatches what the bench's hand-written loop does, plus the gradient norm and the stack
    that make the rules' one read; any op more per iteration (a constant made again, a scalar
    product recomputed) fails. The hand loop's float(f) is its read."""
    from collections import Counter

    from torch.utils._python_dispatch import TorchDispatchMode

    from study.frameworks.torch.twin import hand_loop

    class Dispatched(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops[str(func)] += 1
            return func(*args, **(kwargs or {}))

    def per_iteration(loop):
        counts = []
        for iterations in (SHORT, LONG):
            with Dispatched() as dispatched:
                loop(iterations)
            counts.append(dispatched.ops)
        return Counter({op: (counts[1][op] - counts[0][op]) / (LONG - SHORT)
                        for op in counts[1] if counts[1][op] != counts[0][op]})

    ours = per_iteration(lambda i: run(problem, make_optimizer("gd"), build_rules(max_iter=i),
                                       backend=make_backend("torch", "float64",
                                                            feed="resident")))
    hand = per_iteration(lambda i: hand_loop(problem, "resident", "float64", "cpu", i))
    stats = Counter({"aten.linalg_vector_norm.default": 1, "aten.stack.default": 1})
    read = Counter({"aten._local_scalar_dense.default": 1})
    assert ours == hand - read + stats, (ours, hand)
