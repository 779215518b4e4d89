"""The PyTorch backend's hand-written twins (see study.bench.twins): its GD loops (eager,
`torch.compile`d, or one CUDA graph) without autograd, and the copy on the device."""

from __future__ import annotations

import time

from study.bench.runs import Unavailable
from study.bench.twins import gd_functions, host_arrays, no_loop, timed_steps

FEEDS = ("feed", "resident", "compiled", "graphed")  # those with a hand-written loop here


def hand_loop(problem, feed: str, dtype: str, device: str, iterations: int) -> float:
    """PyTorch, no autograd (the analytic gradient, as our backend): an eager step with
    `float(f)` every iteration (feed: `torch.from_numpy(X).to(device)` every step; compiled:
    the step under `torch.compile`, compiled by two calls off the clock); graphed: the whole
    run captured once as a CUDA graph (capture off the clock), replayed, read once."""
    if feed not in FEEDS:
        raise no_loop("torch", feed)
    import torch

    Xt_host, y_host, step, inv_n = host_arrays(problem, dtype)
    target = torch.device("cuda" if device == "gpu" else "cpu")
    if feed == "graphed" and target.type != "cuda":
        raise Unavailable("graphed needs a CUDA GPU")
    Xt, y = torch.as_tensor(Xt_host, device=target), torch.as_tensor(y_host, device=target)
    w0 = torch.zeros((problem.d, y_host.shape[1]), dtype=Xt.dtype, device=target)

    evaluate, update = gd_functions(torch.sum, step, inv_n)

    def data():
        if feed == "feed":
            return torch.from_numpy(Xt_host).to(target), torch.from_numpy(y_host).to(target)
        return Xt, y

    with torch.no_grad():
        if feed == "graphed":
            return graphed_torch(evaluate, update, Xt, y, w0, iterations)
        if feed == "compiled":
            update = torch.compile(update)
            f, g = evaluate(Xt, y, w0)
            for _ in range(2):
                float(update(Xt, y, w0, g)[2])
        return timed_steps(evaluate, update, data, w0, iterations)


def graphed_torch(evaluate, update, Xt, y, w0, iterations: int) -> float:
    """The whole run as one CUDA graph: warmed up on a side stream, captured once on static
    tensors, replayed once on the clock and read once. (Not run on a CPU-only machine.)"""
    import torch

    w, g = w0.clone(), evaluate(Xt, y, w0)[1]
    f = torch.zeros((), dtype=Xt.dtype, device=Xt.device)

    def body():
        ww, gg = w, g
        for _ in range(iterations):
            ww, gg, ff = update(Xt, y, ww, gg)
        f.copy_(ff)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        body()
    graph.replay()
    float(f)
    start = time.perf_counter()
    graph.replay()
    float(f)
    return (time.perf_counter() - start) / iterations


def minimal_loop(options: dict, formulation: str):
    if options.get("feed") != "resident" or formulation != "data":
        return None

    def loop(problem, dtype, iterations):
        return hand_loop(problem, "resident", dtype, "cpu", iterations)

    return "driver vs hand-written eager PyTorch loop", loop


def copy_call(shape: tuple, device: str):
    import torch

    target = torch.device("cuda" if device == "gpu" else "cpu")
    x = torch.ones(shape, dtype=torch.float64, device=target)
    out = torch.empty_like(x)

    def call():
        torch.mul(x, 1.0, out=out)
        if target.type == "cuda":
            torch.cuda.synchronize()
    return call
