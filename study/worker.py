"""One run in a fresh process: `python -m study.worker RESULTS_DIR` with the RunSpec JSON on stdin.

Data generation happens here, outside every timed region; the row written holds the spec's axis
values, the run record, the environment and the peak memory of this process.
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import time
import traceback

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

from datasets import make_problem  # noqa: E402
from optimizers import build_rules, make_backend, make_optimizer, run  # noqa: E402
from study.config import RunSpec  # noqa: E402
from study.environment import collect  # noqa: E402
from study.records import ResultsFolder  # noqa: E402


def peak_memory_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def base_row(spec: RunSpec) -> dict:
    """The columns every row starts with; a Dask executor fills in worker_address."""
    return {"run_id": spec.run_id, **spec.axes(), "spec": spec.to_json(),
            "worker_host": socket.gethostname(), "worker_address": None}


def execute(spec: RunSpec) -> tuple[dict, object]:
    problem = make_problem(spec.dataset, **spec.data_params())
    optimizer = make_optimizer(spec.optimizer, **spec.hyperparameters)
    backend = make_backend(spec.backend, spec.dtype, **spec.backend_options)
    rules = build_rules(**spec.stopping)
    result = run(problem, optimizer, rules, backend=backend, init=spec.init, seed=spec.seed)
    record = result.record()
    for key in ("optimizer", "backend", "dtype", "dataset", "init", "seed", "dataset_params",
                "hyperparameters"):
        record.pop(key, None)  # the spec's axes are the canonical values
    record["device_name"] = record.pop("device")
    record["read_pass_seconds"] = read_pass_seconds(problem.X.astype(spec.dtype))
    return record, result.trace


def read_pass_seconds(X, repeats: int = 5) -> float:
    """One read pass over X (X.sum()), timed in the run's own process after the run: the unit
    that makes seconds per iteration comparable across machines ("passes per iteration")."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        X.sum()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = ResultsFolder(argv[0])
    spec = RunSpec.from_json(sys.stdin.read())
    row = base_row(spec)
    trace = None
    try:
        record, trace = execute(spec)
        row.update(record)
    except Exception as exc:  # recorded as an error row; the traceback goes to the log
        traceback.print_exc()
        row.update(status="error", message=f"{type(exc).__name__}: {exc}".splitlines()[0])
    row.update(collect())
    row["peak_memory_mb"] = peak_memory_mb()
    folder.write_run(row, trace)
    return 0


if __name__ == "__main__":
    sys.exit(main())
