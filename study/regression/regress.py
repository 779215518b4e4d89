"""The regression study's single run: `python -m study regress ...` builds one configuration."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from convergence_study.errors import InputError
from datasets import DATASETS, make_problem, validate_dataset
from datasets.reference import KAPPA_NAMES
from optimizers import (
    INITS,
    OPTIMIZERS,
    blas_threads,
    build_rules,
    make_optimizer,
)
from optimizers.bounds import count, duration, explain, no_bound
from optimizers.driver import for_problem, initial_point, predicted
from optimizers.from_file import absolute, is_file_name
from study.cli import key_values
from study.frameworks.registry import (
    BACKENDS,
    DTYPES,
    framework_of,
    make_backend,
    option_names,
)
from study.frameworks.registry import backend as backend_declaration
from study.output import (
    check_output_path,
    parquet_writer,
    reading,
    trace_path,
    write_files_atomic,
)
from study.regression.measure import run_spec
from study.regression.plugin import data_files
from study.regression.spec import RunSpec

ROWS_PARAMETER = {name: d.rows for name, d in DATASETS.items() if d.rows}  # what --rows sets
HYPERPARAMETER_FLAGS = {"step": "step", "lr": "learning_rate", "rho": "rho", "epsilon": "epsilon",
                        "history": "history", "solver": "solver"}
BACKEND_FLAGS = option_names()  # every backend option but the dtype, a flag each
OPTION_HELP = {"formulation": "data (every step reads X) or gram (X^T X formed once in setup, "
                              "then O(d^2) per step)",
               "device": "where it runs (the first is the default)",
               "feed": "how the data reaches the step (the first is the default)",
               "xla": "XLA-compile the step"}
# A run ends within a minute unless asked otherwise: GD on a 20000-row CSV ran past 120 s in
# silence without one (the iteration budget alone says nothing about time).
DEFAULT_TIME_BUDGET = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    data = parser.add_argument_group("data")
    data.add_argument("--dataset", default="eve", help=f"one of: {', '.join(DATASETS)}, or "
                      "path/to/file.py:load (your own loader returning X, y)")
    data.add_argument("--rows", type=int, help="rows of eve / n of synthetic")
    data.add_argument("--standardize", action="store_true", default=None,
                      help="z-score the features")
    data.add_argument("--path", help="tabular: CSV or Parquet file")
    data.add_argument("--features", nargs="+", help="tabular: feature column names")
    data.add_argument("--labels", nargs="+", help="tabular: label column names")
    data.add_argument("--data-param", action="append", default=[], metavar="KEY=VALUE",
                      help="any other dataset parameter, e.g. kappa=1e4 or seed=3")
    opt = parser.add_argument_group("optimizer")
    opt.add_argument("--optimizer", default="lbfgs",
                     help=f"one of: {', '.join(OPTIMIZERS)}, keras:<Class> (any Keras "
                          "optimizer, tensorflow backend) or torch:<Class> (torch.optim's LBFGS, "
                          "SGD, Adam, RMSprop, Adagrad, Adadelta; torch backend) or "
                          "path/to/file.py:Name (your own, docs/your-optimizer.md)")
    opt.add_argument("--step", help="gd: fixed, 1/L, diag (the original program's update) or "
                     "armijo (backtracking)")
    opt.add_argument("--lr", type=float, help="learning rate (gd step=fixed, adadelta)")
    opt.add_argument("--rho", type=float, help="adadelta decay (default 0.95)")
    opt.add_argument("--epsilon", type=float, help="adadelta epsilon (default 1e-8, as TF1)")
    opt.add_argument("--history", type=int, help="L-BFGS history size (default 10)")
    opt.add_argument("--solver", help="closed-form: lstsq or normal")
    opt.add_argument("--opt-param", action="append", default=[], metavar="KEY=VALUE",
                     help="any other optimizer hyperparameter, e.g. momentum=0.9, or a Keras "
                          "or torch optimizer's argument, e.g. learning_rate=0.01, lr=0.01")
    opt.add_argument("--init", default="zeros", help=f"starting point: {', '.join(INITS)}")
    opt.add_argument("--seed", type=int, default=0, help="seed of the random init")
    back = parser.add_argument_group("backend")
    back.add_argument("--backend", default="numpy", help=f"one of: {', '.join(BACKENDS)}")
    back.add_argument("--dtype", default="float64", help=f"one of: {', '.join(DTYPES)}")
    for option in BACKEND_FLAGS:
        add_option(back, option)
    back.add_argument("--blas-threads", default=blas_threads.AUTO, metavar="auto|N",
                      help="numpy: BLAS threads; auto (default): one below the size where the "
                           "library's own threads were measured faster on this machine, "
                           "once, cached; a BLAS thread variable set in the environment wins")
    stop = parser.add_argument_group("stopping")
    stop.add_argument("--tol", type=tolerance, default=1e-8,
                      help="relative suboptimality target, or 'off' (e.g. with --exact-repeat, "
                           "the original program's own rule alone)")
    stop.add_argument("--grad-tol", type=float, help="stop when ||grad|| <= this")
    stop.add_argument("--rel-tol", type=float, help="stall: relative improvement below this ...")
    stop.add_argument("--patience", type=int, default=10, help="... for this many iterations")
    stop.add_argument("--exact-repeat", action="store_true",
                      help="the original rule: stop when the RMSE repeats exactly")
    stop.add_argument("--max-iter", type=int, default=100_000, help="iteration budget")
    stop.add_argument("--time-budget", type=budget, default=DEFAULT_TIME_BUDGET,
                      help="seconds the timed loop may run before the run ends as 'timeout' "
                           f"(default {DEFAULT_TIME_BUDGET:g}; 'off' for none, the iteration "
                           "budget alone)")
    parser.add_argument("--out", help="write the record and its trace as Parquet")


def add_option(group, option: str) -> None:
    """A backend option's flag, its help read from the declarations (which backends take it,
    their values, the first the default); a true/false option is a switch."""
    takers = {name: b.allowed(option) for name, b in BACKENDS.items() if b.allowed(option)}
    values = "; ".join(f"{name}: {', '.join(map(str, v))}" for name, v in takers.items())
    if len(set(takers.values())) == 1:  # the same everywhere: said once
        values = f"{', '.join(map(str, next(iter(takers.values()))))} ({', '.join(takers)})"
    what = OPTION_HELP.get(option, option)
    flag = "--" + option.replace("_", "-")
    if all(isinstance(v[0], bool) for v in takers.values()):
        group.add_argument(flag, dest=option, action="store_true", default=None,
                           help=f"{what} (backends: {', '.join(takers)})")
    else:
        kinds = {type(v[0]) for v in takers.values()}
        kind = next(iter(kinds)) if len(kinds) == 1 and kinds <= {int, float} else None
        group.add_argument(flag, dest=option, type=kind, help=f"{what}: {values}")


def budget(text: str) -> float | None:
    """Seconds, or 'off' for no time budget."""
    if text.strip().lower() == "off":
        return None
    return float(text)


def tolerance(text: str) -> float | None:
    """A positive number, or 'off' for no suboptimality target."""
    if text.strip().lower() == "off":
        return None
    return float(text)


def dataset_params(args) -> dict:
    if is_file_name(args.dataset):  # a user's own loader: its file made absolute for the run
        args.dataset = absolute(args.dataset)
    elif args.dataset not in DATASETS:
        raise InputError(f"unknown dataset '{args.dataset}'; allowed: {', '.join(DATASETS)}, "
                         "path/to/file.py:load")
    if args.rows is not None and args.dataset not in ROWS_PARAMETER:
        raise InputError(f"--rows applies to {', '.join(ROWS_PARAMETER)}, not '{args.dataset}'")
    names = {"rows": ROWS_PARAMETER.get(args.dataset), "path": "path", "features": "features",
             "labels": "labels", "standardize": "standardize"}  # flag -> its parameter
    flags = {names[flag]: getattr(args, flag) for flag in names if getattr(args, flag) is not None}
    return {**flags, **given_once(flags, key_values(args.data_param, "--data-param"),
                                  "--data-param", names)}


def given_once(flags: dict, params: dict, flag: str, names: dict) -> dict:
    """KEY=VALUE parameters, none of which a flag of its own already gave (`--history 5
    --opt-param history=3` ran with 3)."""
    for key in params:
        if key in flags:
            own = next(f for f, name in names.items() if name == key)
            raise InputError(f"{key} is given twice, by --{own} and by {flag}; give it once")
    return params


def configure(args):
    """Everything a run needs, validated before any data is generated or file written."""
    hyperparameters = {name: getattr(args, flag) for flag, name in HYPERPARAMETER_FLAGS.items()
                       if getattr(args, flag) is not None}
    hyperparameters.update(given_once(hyperparameters, key_values(args.opt_param, "--opt-param"),
                                      "--opt-param", HYPERPARAMETER_FLAGS))
    if is_file_name(args.optimizer):  # a run's own process finds the same file
        args.optimizer = absolute(args.optimizer)
    optimizer = make_optimizer(args.optimizer, **hyperparameters)
    options = {flag: getattr(args, flag) for flag in BACKEND_FLAGS
               if getattr(args, flag) is not None}
    check_before_import(args, options, optimizer)
    backend = make_backend(args.backend, args.dtype, **options)
    reason = backend.unavailable() or optimizer.unavailable()
    if reason is not None:  # e.g. a GPU asked for and none visible: never run elsewhere
        raise InputError(reason)
    rules = build_rules(tol=args.tol, grad_tol=args.grad_tol, rel_tol=args.rel_tol,
                        patience=args.patience, exact_repeat=args.exact_repeat,
                        max_iter=args.max_iter, time_budget=args.time_budget)
    if args.init not in INITS:
        raise InputError(f"unknown init '{args.init}'; allowed: {', '.join(INITS)}")
    if args.seed < 0:
        raise InputError(f"--seed must be an integer >= 0, got {args.seed}")
    args.blas_threads = blas_threads.check("--blas-threads", args.blas_threads)
    if args.blas_threads != blas_threads.AUTO and framework_of(args.backend) is not None:
        raise InputError(f"--blas-threads applies to the numpy backend, not '{args.backend}'")
    params = dataset_params(args)
    validate_dataset(args.dataset, **params)  # types, columns, memory: before any data is made
    reading(*data_files(args.dataset, params))
    if args.out:
        check_output_path(args.out)
        check_output_path(trace_path(args.out), "--out's trace file")
    spec = RunSpec("regress", args.dataset, params, args.optimizer, hyperparameters,
                   args.backend, options, args.dtype, args.init, args.seed, 0, dict(rules.spec))
    return spec, optimizer, backend, rules


def check_before_import(args, options: dict, optimizer) -> None:
    """What can be refused without the backend's framework is refused before it is imported,
    so that the one line is not preceded by its and CUDA's start-up logs: the options against
    the backend's declaration, the framework installed, the NumPy-only references, a GPU."""
    declared = backend_declaration(args.backend)
    declared.check({"dtype": args.dtype, **options})
    framework = framework_of(args.backend)
    if framework is None:
        return
    framework.require()
    optimizer.refuse_backend(args.backend)  # e.g. a self-driven reference: numpy only
    device = options.get("device", declared.default("device"))
    if device == "gpu" and not framework.gpu_nodes_present():
        raise InputError(framework.no_gpu())


def main(args) -> int:
    spec, optimizer, backend, rules = configure(args)
    # the data set as the flags give it (not spec.data_params(): regress never gave a seeded
    # data set its --seed), then the run as the sweep measures one (study.regression.measure)
    problem = make_problem(args.dataset, **spec.dataset_params)
    print(bound_line(problem, optimizer, rules, backend, args))
    result, choice = run_spec(spec, problem, threads=args.blas_threads)
    if result.status == "skipped":  # the library records it; the CLI refuses, writing nothing
        raise InputError(result.message)
    print(result.summary() + (f"; {choice.describe()}" if choice else ""))
    if result.status != "converged":
        print(f"  {result.message}")
    print(result.reference_line())
    print(f"  ({KAPPA_NAMES})")
    print(coefficients_line(problem, result.w))
    print(verdict_line(result))
    if args.out:
        write_files_atomic({  # both or neither: a trace is never left without its record
            trace_path(args.out): parquet_writer(result.trace.assign(run=0)),
            args.out: parquet_writer(pd.DataFrame([result.record()]))})
        print(f"wrote {args.out} and {trace_path(args.out)}")
    return 0


# `regress` prints the fitted coefficients up to this many (the row's coefficients column and
# --out's record hold them all)
PRINTED_COEFFICIENTS = 10


def coefficients_line(problem, w) -> str:
    """The fitted coefficients by feature name (to check against lstsq or sklearn), for small d."""
    w = np.asarray(w, dtype=np.float64).reshape(problem.d, -1)
    if problem.d > PRINTED_COEFFICIENTS:
        return (f"coefficients: {problem.d} per label column, not printed above "
                f"{PRINTED_COEFFICIENTS} (--out's record holds them: its coefficients column)")
    return "\n".join(
        f"coefficients of {label}: " + ", ".join(
            f"{name} {value:.10g}" for name, value in zip(problem.feature_names, w[:, j],
                                                          strict=True))
        for j, label in enumerate(problem.label_names))


def bound_line(problem, optimizer, rules, backend, args) -> str:
    """What the method's classical bound predicts (optimizers.bounds), said before the run
    starts: after the checks `run` makes first (the method fits the problem, the data fits the
    dtype), from the reference's cached conditioning."""
    optimizer = for_problem(optimizer, problem)
    w0 = initial_point(problem, args.init, args.seed)
    problem.check_dtype_range(backend.dtype, w0)
    ref, tol = problem.reference, rules.spec.get("tol")
    prediction, eps0 = predicted(problem, optimizer, tol, w0)
    standardized = bool(problem.params.get("standardize"))
    kappas = f"kappa {ref.kappa_raw:.3g} as run"
    if problem.objective == "logistic":  # the 1/L step's global L over mu at w*: the bound's
        global_kappa = f"{ref.kappa_gd:.3g}" if not np.isnan(ref.kappa_gd) else "unknown"
        kappas = (f"kappa {ref.kappa_raw:.3g} at the optimum, {global_kappa} with the global "
                  "L the 1/L step uses")
    if not standardized and np.isfinite(ref.kappa_standardized):
        kappas += f" ({ref.kappa_standardized:.3g} with standardized columns)"
    if tol is None or prediction.iterations is None:
        return f"before the run: {kappas}; {optimizer.name}: {no_bound(prediction)}"
    return f"before the run: {kappas}; " + explain(
        optimizer.name, prediction, eps0, tol, kappa_standardized=ref.kappa_standardized,
        kappa_diag_step=ref.kappa_diag_step, standardized=standardized)


def verdict_line(result) -> str:
    """Whether the run matched its bound (the row's bound_verdict), in one line."""
    said = result.prediction.get("bound_verdict", "")
    bound = result.prediction.get("predicted_iterations")
    if bound is None:
        return f"against the bound: {said}"
    text = (f"against the bound: {said} ({result.iterations} iterations; the bound: about "
            f"{count(bound)}")
    if not result.target_reached and bound > result.iterations:
        text += (f", {duration(bound * result.seconds_per_iteration)} at this run's time per "
                 "iteration (a prediction)")
    return text + ")"
