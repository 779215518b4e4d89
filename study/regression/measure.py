"""One regression run, in its own process: the data set (from the sweep's cache), the run, its
record and trace. Data generation and the reference solve happen outside every timed region,
once per data set in a sweep."""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np

from convergence_study.errors import LibraryFailure, Uncertifiable
from datasets import make_problem
from datasets.problem import Problem
from datasets.reference import Reference
from datasets.user_file import content_hash, split
from optimizers import blas_threads, build_rules, make_optimizer, run
from optimizers.from_file import is_file_name, provenance
from optimizers.result import RunResult
from study.frameworks.registry import framework_of, make_backend
from study.regression.spec import RunSpec
from study.sweep import cache
from study.sweep.fingerprint import manifest, python_files
from study.sweep.plugin import Measurement, RunContext
from study.sweep.tuning import NO_RATE, is_tuned

SPEC_COLUMNS = ("optimizer", "backend", "dtype", "dataset", "init", "seed", "dataset_params",
                "hyperparameters")


def problem_key(spec: RunSpec) -> dict:
    """What the data set and its reference depend on: parameters, the data code, and for a
    file its identity and change times (a write always moves ctime, which no copy preserves;
    the row's fingerprint hashes the file's content, study.regression.plugin.data_files)."""
    params = spec.data_params()
    key = {"dataset": spec.dataset, "params": params,
           "code": manifest(python_files("datasets"))}
    if is_file_name(spec.dataset):  # a user's loader: its content too
        key["loader"] = content_hash(split(spec.dataset)[0])
    if "path" in params:
        if not Path(params["path"]).is_file():
            make_problem(spec.dataset, **params)  # the loader's own error names the file
        stat = Path(params["path"]).stat()
        key["file"] = [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    return key


def load_problem(spec: RunSpec, cache_dir: Path) -> Problem:
    """The spec's data set with its certified reference: made, validated and solved once per
    sweep, then read from the cache."""

    def make(folder: Path) -> None:
        problem = make_problem(spec.dataset, **spec.data_params())
        reference = problem.reference
        np.save(folder / "X.npy", problem.X)
        np.save(folder / "y.npy", problem.y)
        np.save(folder / "w_star.npy", reference.w)
        (folder / "meta.json").write_text(json.dumps({
            "name": problem.name, "params": problem.params, "reference": reference.to_dict(),
            "column_peaks": [peak.tolist() for peak in problem.column_peaks],
            "feature_names": list(problem.feature_names),
            "label_names": list(problem.label_names)}, default=str))

    folder = cache.entry(cache_dir, problem_key(spec), make)
    meta = json.loads((folder / "meta.json").read_text())
    problem = Problem(np.load(folder / "X.npy"), np.load(folder / "y.npy"), meta["name"],
                      meta["params"], tuple(meta["feature_names"]), tuple(meta["label_names"]))
    return problem.with_reference(Reference.from_dict(meta["reference"],
                                                      np.load(folder / "w_star.npy")),
                                  meta.get("column_peaks"))


def measure(spec: RunSpec, ctx: RunContext) -> Measurement:
    if is_tuned(spec) and spec.tuning.get("value") is None:
        return Measurement({"status": "skipped", "message": NO_RATE})
    problem = load_problem(spec, ctx.cache_dir)
    try:
        result, _ = run_spec(spec, problem, probe=ctx.probe)
    except Uncertifiable as refusal:  # recorded, not raised: the sweep goes on
        return Measurement(uncertifiable_record(problem, spec, str(refusal)), {})
    except LibraryFailure as failure:  # the library's own update failed: said in its row
        return Measurement({"status": "failed", "message": str(failure)}, {})
    record = result.record()
    for key in SPEC_COLUMNS:
        record.pop(key, None)  # the spec's axes are the canonical values
    record["placed_on"] = record.pop("device")
    record["read_pass_seconds"] = read_pass_seconds(problem.X.astype(spec.dtype, copy=False))
    return Measurement(record, {"traces": result.trace})


def run_spec(spec: RunSpec, problem: Problem, *, threads=blas_threads.AUTO,
             probe=None) -> tuple[RunResult, blas_threads.Choice | None]:
    """The run a spec describes, on its problem, under the BLAS threads chosen for it (their
    columns join its record): the one way a regression run is measured, by the sweep's
    `measure` and by `regress` alike. `probe` is the sweep's calibration around the run."""
    optimizer = make_optimizer(spec.optimizer, **spec.hyperparameters)
    backend = make_backend(spec.backend, spec.dtype, **spec.backend_options)
    rules = build_rules(**spec.stopping)
    choice = threads_for(spec, problem, threads)  # before the probe: a calibration is untimed
    with choice.limits() if choice else nullcontext(), nullcontext() if probe is None else probe:
        result = run(problem, optimizer, rules, backend=backend, init=spec.init, seed=spec.seed)
    if choice:
        result.extra.update(choice.columns())
    if is_file_name(spec.optimizer):  # a user's own: which file, which content
        result.extra.update(provenance(spec.optimizer))
    return result, choice


def threads_for(spec: RunSpec, problem: Problem,
                requested=blas_threads.AUTO) -> blas_threads.Choice | None:
    """The BLAS thread count of a run on the NumPy stack (optimizers.blas_threads), chosen from
    the size of the matrix its loop multiplies; None for a framework's backend (its own
    threads). `requested`: auto, or a count (regress's --blas-threads) taken as given."""
    if framework_of(spec.backend) is not None:
        return None
    size = blas_threads.matrix_bytes(problem.n, problem.d, spec.dtype,
                                     spec.backend_options.get("formulation", "data"))
    return blas_threads.choose(size, requested)


def uncertifiable_record(problem: Problem, spec: RunSpec, message: str) -> dict:
    """The row of a refused run: the reference it could not be judged against, and why."""
    ref = problem.reference
    return {"status": "uncertifiable", "message": message, "n": problem.n, "d": problem.d,
            "f_star": ref.f, "f_star_accuracy": ref.accuracy,
            "suboptimality_floor": ref.floor, **ref.conditioning(),
            **{f"stop_{k}": v for k, v in spec.stopping.items()}}


def read_pass_seconds(X, repeats: int = 5) -> float:
    """One read pass over X (X.sum()), timed in the run's own process after the run: the unit
    that makes seconds per iteration comparable across machines ("passes per iteration")."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        X.sum()
        times.append(time.perf_counter() - start)
    return float(np.median(times))
