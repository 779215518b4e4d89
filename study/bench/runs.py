"""One run through the public API (`optimizers.run`) and the row it becomes: the backend a label
names, its BLAS thread limit, and a configuration that cannot run here turned into a row that
says why (`Unavailable`) rather than a crash of the bench. Also the progress lines on stderr."""

from __future__ import annotations

import sys
from contextlib import nullcontext

from convergence_study.errors import InputError, failure_line
from optimizers import build_rules, make_optimizer, run
from study import interrupts
from study.bench.plan import BLAS_THREADS, TF1_OPTIMIZERS, engine
from study.frameworks.registry import backend, make_backend


class Unavailable(Exception):
    """A configuration that cannot run here (an option not in this version, no GPU): a row
    with status 'unavailable' and the reason, never a crash of the bench."""


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def shown(row: dict, key: str, unit: str) -> str:
    """A row's figure for the progress lines on stderr."""
    if row.get("status") != "ok":
        return f"{row.get('status')}: {row.get('message')}"
    value = row.get(key, float("nan"))
    return "target not reached" if value != value else f"{value:.3g}{unit}"


def backend_for(label: str, dtype: str, formulation: str = "data", device: str = "cpu"):
    """The backend a label names; an option this version does not have -> Unavailable."""

    name, options = engine(label)
    options = dict(options)
    if device != "cpu" and backend(name).allowed("device"):  # NumPy's runs on the host
        options["device"] = device
    if formulation != "data":
        options["formulation"] = formulation
    try:
        return make_backend(name, dtype, **options)
    except InputError as exc:  # e.g. tf1 with the gram formulation
        raise Unavailable(f"{label} {formulation}: {failure_line(exc)}") from None


def run_once(problem, optimizer: str, label: str, dtype: str, formulation: str, *,
             device: str = "cpu", **stopping):
    """One run through `optimizers.run`; a run this machine cannot do -> Unavailable."""

    if label == "tf1" and optimizer not in TF1_OPTIMIZERS:
        raise Unavailable(f"tf1 runs {', '.join(TF1_OPTIMIZERS)} only")
    backend = backend_for(label, dtype, formulation, device)
    try:
        with blas_threads(label):
            result = run(problem, make_optimizer(optimizer), build_rules(**stopping),
                         backend=backend)
    except InputError as exc:
        interrupts.check()  # an error an interrupt caused is the interrupt
        raise Unavailable(failure_line(exc)) from None
    interrupts.check()  # one a library swallowed ends the bench here, not at its end
    if result.status == "skipped":
        raise Unavailable(result.message)
    return result


def blas_threads(label: str):
    """The BLAS thread limit of a backend label, as a context (nothing for most labels)."""
    if label not in BLAS_THREADS:
        return nullcontext()
    limit = BLAS_THREADS[label][1]
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=limit, user_api="blas")


def describe(label: str) -> dict:
    name, options = engine(label)
    return {"backend": label, "backend_name": name, "feed": options.get("feed", ""),
            "xla": bool(options.get("xla", False)),
            "blas_threads": BLAS_THREADS.get(label, (label, 0))[1]}  # 0: the library's default


def failed_row(row: dict, exc: BaseException) -> dict:
    interrupts.check()  # an error an interrupt caused is the interrupt, not a row
    status = "unavailable" if isinstance(exc, Unavailable) else "error"
    return {**row, "status": status, "message": str(exc) if status == "unavailable"
            else failure_line(exc)}
