"""What a bench measures, in one place: the sections and their order, the engines (read from the
backend registry: every backend's feed modes, as `Backend.label` names them), the goals and the
target tolerance, and the plans (`FULL`, `QUICK`; the tests make a tiny one with
`dataclasses.replace`). The sections read every size from the `Plan` they are given."""

from __future__ import annotations

from dataclasses import dataclass, replace

from convergence_study.errors import InputError
from study.frameworks.registry import BACKENDS

SECTIONS = ("iterations", "overhead", "scaling", "feedmode", "target", "harness", "bandwidth",
            "peer")
GPU_SECTIONS = ("harness", "bandwidth")  # what `--device gpu` runs (the rest measure the host)

# engines limited to this many BLAS threads for the run (threadpoolctl, restored afterwards):
# label -> (the engine it limits, threads). On a loaded machine, a BLAS thread waiting for a
# descheduled sibling costs more than the second core gives
BLAS_THREADS = {"numpy-blas1": ("numpy", 1)}


def engines() -> dict[str, tuple[str, dict]]:
    """Every engine the registry declares, read now: its label (`Backend.label`) -> (backend
    name, options), one per feed mode, with and without XLA where the backend takes it, then the
    BLAS-limited variants. Formulation and device are added per measurement. A backend
    registered later (a plugin's) is here by itself; the plans below pick what they measure."""
    table = {}
    for name, declared in BACKENDS.items():
        xla = (False, True) if True in declared.allowed("xla") else (False,)
        for compiled in xla:
            for feed in declared.allowed("feed") or (None,):
                options = {**({"feed": feed} if feed else {}), **({"xla": True} if compiled
                                                                  else {})}
                table.setdefault(declared.label(options), (name, options))
    for label, (base, _) in BLAS_THREADS.items():
        if base in table:
            table[label] = table[base]
    return table


def engine(label: str) -> tuple[str, dict]:
    """(backend name, options) of an engine label; an unknown one is one line listing them."""
    table = engines()
    if label not in table:
        raise InputError(f"unknown engine '{label}'; allowed: {', '.join(table)}")
    return table[label]


TF1_OPTIMIZERS = ("gd", "adadelta")  # the original TF1 program's optimizer classes
TARGET_TOL = 1e-8
HARNESS_GOAL = 1.05
TRACE_GOAL = 1.03
LOOP_GOAL = 1.3  # harness section: ours over a hand-written loop making the same host reads
PASSES = {"gd": 2, "lbfgs": 3}  # reads of X per iteration (bandwidth section)
# peer section (issue 53): ours over SciPy's L-BFGS-B / the hand loop; the sweep's seconds per
# run beyond the runs' own measured time
PEER_GOALS = {"lbfgs per iteration": 1.5, "lbfgs to target": 1.0, "gd per iteration": 1.3,
              "sweep overhead per run": 0.25}


@dataclass(frozen=True)
class Plan:
    """What one bench measures; `FULL` and `QUICK` below, the tests use a tiny one."""

    name: str = "full"
    rows: int = 1_000_000                       # of the eve set (iterations, overhead, target)
    dtypes: tuple = ("float64", "float32")
    formulations: tuple = ("data", "gram")
    optimizers: tuple = ("gd", "adadelta", "lbfgs")
    backends: tuple = ("numpy", "numpy-blas1", "tf-feed", "tf-resident", "tf-fused",
                       "tf-fused+xla", "tf1", "jax-feed", "jax-resident", "jax-fused",
                       "torch-feed", "torch-resident", "torch-compiled")  # labels of engines()
    data_iterations: int = 20                   # iterations per timed run, formulation data
    gram_iterations: int = 200                  # ... formulation gram (O(d^2) iterations)
    repeats: int = 5                            # timed runs per configuration (median)
    read_repeats: int = 3                       # read passes per timed run, interleaved
    overhead_repeats: int = 7
    overhead_gram_iterations: int = 2000        # gram iterations are ~10 us: many per run
    trace_backends: tuple = ("numpy", "tf-resident")  # the trace cost (when in the plan)
    overhead_backends: tuple = ("numpy", "numpy-blas1", "tf-fused", "tf-fused+xla", "jax-fused",
                                "torch-resident")
    scaling_n: tuple = (10_000, 100_000, 1_000_000, 10_000_000)
    scaling_d: tuple = (5, 16, 64, 256, 512)
    scaling_d_rows: int = 4096                  # n of the d sweep (>= max d)
    scaling_methods: tuple = (("gd", "numpy", "data"), ("adadelta", "numpy", "data"),
                              ("lbfgs", "numpy", "data"), ("gd", "numpy", "gram"),
                              ("lbfgs", "numpy", "gram"), ("gd", "tf-fused", "data"),
                              ("lbfgs", "tf-fused", "data"), ("lbfgs", "tf-fused", "gram"))
    scaling_iterations: int = 5
    scaling_repeats: int = 3
    scaling_time_budget: float = 10.0           # seconds of one run to the target
    feed_n: int = 5000
    feed_dtypes: tuple = ("float32", "float64")
    feed_modes: tuple = ()                      # () = every mode of feed_frameworks
    feed_frameworks: tuple = ("tensorflow",)    # (the registry's FeedMode declarations)
    feed_calls: int = 5
    target_repeats: int = 5
    target_candidates: tuple = (("lbfgs", "numpy", "data"), ("lbfgs", "numpy", "gram"),
                                ("lbfgs", "tf-fused", "data"), ("lbfgs", "tf-fused", "gram"),
                                ("lbfgs", "tf-fused+xla", "data"), ("lbfgs", "jax-fused", "data"),
                                ("lbfgs", "torch-resident", "data"),
                                ("scipy-lbfgs", "numpy", "data"), ("gd", "numpy", "gram"))
    harness_rows: tuple = (1_000_000,)          # n of the harness section on the CPU
    # ... and (n, iterations) of small problems (issue 53: 1k rows), over a run long enough that
    # most iterates are off the trace's schedule, as in a run to a target
    harness_small: tuple = ((1_000, 2_000),)
    gpu_harness_rows: tuple = (1_000_000, 10_000_000)  # ... with --device gpu
    harness_dtypes: tuple = ("float64", "float32")
    harness_iterations: int = 50
    harness_repeats: int = 5
    harness_backends: tuple = ()                # () = every installed backend, every feed
    bandwidth_rows: tuple = (1_000_000,)
    gpu_bandwidth_rows: tuple = (1_000_000, 10_000_000)
    bandwidth_dtypes: tuple = ("float64", "float32")
    bandwidth_backends: tuple = ()              # () = every installed backend, every feed
    bandwidth_iterations: int = 20
    bandwidth_repeats: int = 3
    probe_rows: int = 1_000_000                 # the float32 probes (JAX, GD fused)
    gpu_probe_rows: int = 10_000_000
    peer_problems: tuple = (("least-squares", 569, 30), ("logistic", 569, 30),
                            ("least-squares", 1000, 5), ("logistic", 1000, 5),
                            ("least-squares", 10_000, 50), ("logistic", 10_000, 50),
                            ("least-squares", 1_000_000, 5))  # (objective, n, d)
    peer_kappa: float = 1e4
    peer_iterations: int = 50                   # per-iteration budget (no target)
    peer_long_iterations: int = 2000            # ... and GD's over a long run
    peer_long_rows: int = 100_000               # ... on problems up to this size (at 1M rows a
    #                                             GD iteration is the products, 10 ms)
    peer_max_iter: int = 20_000                 # the cap of a run to the target
    peer_repeats: int = 5
    peer_sweep_runs: int = 20                   # 0: no sweep row
    peer_blas_threads: int = 1                  # both sides of every pair


FULL = Plan()
QUICK = replace(
    FULL, name="quick", rows=100_000, dtypes=("float64",),
    backends=("numpy", "numpy-blas1", "tf-resident", "tf-fused", "jax-fused", "torch-resident"),
    repeats=2, overhead_repeats=5,
    overhead_backends=("numpy", "numpy-blas1", "tf-fused", "jax-fused", "torch-resident"),
    scaling_n=(10_000, 30_000, 100_000), scaling_d=(5, 32, 128), scaling_d_rows=2048,
    scaling_methods=(("gd", "numpy", "data"), ("lbfgs", "numpy", "data"),
                     ("lbfgs", "numpy", "gram"), ("lbfgs", "tf-fused", "data")),
    scaling_repeats=2, scaling_time_budget=3.0, feed_n=1000, feed_dtypes=("float32",),
    feed_calls=3, target_repeats=3, harness_rows=(100_000,), gpu_harness_rows=(100_000,),
    harness_small=((1_000, 500),),
    harness_dtypes=("float64",), harness_iterations=20, harness_repeats=2,
    bandwidth_rows=(100_000,), gpu_bandwidth_rows=(100_000,), bandwidth_dtypes=("float64",),
    bandwidth_backends=("numpy", "jax"),
    bandwidth_iterations=10, bandwidth_repeats=2, probe_rows=100_000, gpu_probe_rows=100_000,
    target_candidates=(("lbfgs", "numpy", "data"), ("lbfgs", "numpy", "gram"),
                       ("lbfgs", "tf-fused", "data"), ("lbfgs", "tf-fused", "gram"),
                       ("scipy-lbfgs", "numpy", "data")),
    peer_problems=(("least-squares", 569, 30), ("logistic", 569, 30),
                   ("least-squares", 1000, 5), ("least-squares", 10_000, 50)), peer_repeats=3,
)


def for_device(plan: Plan, device: str) -> Plan:
    """The plan with its GPU sizes in place of the host's when `device` is 'gpu' (a GPU is
    fast enough for the 10M-row rows the issue asks for; this 2-core host is not)."""
    if device != "gpu":
        return plan
    return replace(plan, harness_rows=plan.gpu_harness_rows, harness_small=(),
                   bandwidth_rows=plan.gpu_bandwidth_rows, probe_rows=plan.gpu_probe_rows)
