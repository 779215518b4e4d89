"""`python -m study train`: one configuration of the train study, measured in this process with
the spec and measurement a sweep's run has (KERAS_BACKEND set before Keras is imported). Its
cache lives in a temporary folder unless --cache names one, so a refused run writes nothing."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from contextlib import nullcontext

from convergence_study.errors import InputError, failure_line
from datasets.user_file import absolute, is_file_name
from study.cli import key_values
from study.frameworks.registry import DEVICES
from study.frameworks.registry import FRAMEWORKS as REGISTRY
from study.output import (
    check_output_folder,
    check_output_path,
    parquet_writer,
    reading,
    trace_path,
    write_files_atomic,
)
from study.sweep.grid import ConfigError
from study.sweep.plugin import RunContext
from study.train.frameworks import (
    check_framework,
    check_keras,
    default_framework,
    native_adapters,
    native_modules,
    trainable,
)
from study.train.models.data import LAYOUTS, check_data
from study.train.models.examples import DATA, FRAMEWORK_OF, MODELS
from study.train.models.model import SHIPPED, check_initial_file, check_model_name, model_file
from study.train.plugin import input_files
from study.train.run.measure import measure, one_line
from study.train.run.native_optimizers import (
    check_library_name,
    check_name,
    library_of,
    native_libraries,
)
from study.train.sweep.config import FIT_MIN_STEPS, LOOPS, check_stopping, check_target
from study.train.sweep.spec import LBFGS, Spec

# what a shipped data set is judged by, unless --loss / --metric say otherwise
EXAMPLE_DEFAULTS = {"digits": ("sparse_categorical_crossentropy", "accuracy"),
                    "digits28": ("sparse_categorical_crossentropy", "accuracy"),
                    "eve-late-week": ("binary_crossentropy", "accuracy")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help=f"{', '.join(SHIPPED)}, a .keras file or "
                        "file.py:function(input_shape, outputs) returning a Keras model, "
                        f"{native_modules()} or (init_params, apply)")
    parser.add_argument("--data", required=True, help=f"{', '.join(DATA)}, a .npz file "
                        "(x_train, y_train, x_val, y_val) or a CSV/Parquet file")
    parser.add_argument("--features", nargs="+", help="CSV/Parquet: feature columns")
    parser.add_argument("--labels", help="CSV/Parquet: the label column")
    parser.add_argument("--data-param", action="append", default=[], metavar="KEY=VALUE",
                        help="validation_fraction, split_seed, rows (eve-late-week), "
                        "one_hot=True (digits, digits28), ...")
    parser.add_argument("--layout", help="the image arrays' layout for the "
                        "model: channels_last (as stored, the default) or channels_first "
                        "(moved once, before the clock: (N, H, W, C) -> (N, C, H, W))")
    parser.add_argument("--loss", help="a loss by name (default for the shipped data); "
                        "NAME:from_logits for a model whose last layer is linear, nll for "
                        "log-probabilities; none for a model returned with its own loss")
    parser.add_argument("--metric", help="a Keras metric by name (default: accuracy)")
    parser.add_argument("--optimizer", default="keras:Adam", help="keras:<Class> (Keras models), "
                        f"{_native_forms()} or lbfgs")
    parser.add_argument("--opt-param", action="append", default=[], metavar="KEY=VALUE",
                        help="the optimizer's arguments, e.g. learning_rate=0.01")
    parser.add_argument("--backend", help=f"{', '.join(trainable())} (default: a native "
                        f"example's own framework, else {default_framework()})")
    parser.add_argument("--initial", help="a native model's initial parameters: an .npz (by "
                        "parameter name, or w0, w1, ... in Keras's order)")
    parser.add_argument("--device", default="cpu", help=", ".join(DEVICES))
    parser.add_argument("--batch-size", type=int, help="rows per step; 0: full batch "
                        "(default 64; lbfgs is always full batch)")
    parser.add_argument("--eval-every", type=int, default=0, help="steps; 0: once per epoch")
    parser.add_argument("--target", required=True, metavar="METRIC=VALUE",
                        help="e.g. val_loss=0.35 or val_accuracy=0.9")
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--time-budget", type=float, help="seconds of training")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop", default="steps", help="steps (ours) or fit (model.fit)")
    parser.add_argument("--cache", help="keep the data and initial weights in this folder")
    parser.add_argument("--out", help="write the row as Parquet and the trace beside it")


def _native_forms() -> str:
    """Each native library's optimizers as the help names them: torch:<Class> (PyTorch models)."""
    return ", ".join(f"{a.LIBRARY}:{a.OPTIMIZER_FORM} ({a.TITLE} models)"
                     for a in native_adapters())


def spec_from(args) -> Spec:
    """The run's spec, every value checked before Keras is imported."""
    check_model_name(args.model, "--model")
    data = {"name": args.data} if args.data in DATA else {"path": args.data}
    if args.features is not None:
        data["features"] = args.features
    if args.labels is not None:
        data["labels"] = args.labels
    data.update(key_values(args.data_param, "--data-param"))
    if args.layout is not None:
        if args.layout not in LAYOUTS:
            raise InputError(f"--layout: unknown '{args.layout}'; allowed: {', '.join(LAYOUTS)}")
        data["layout"] = args.layout
    check_data(data, "--data")
    loss, metric = EXAMPLE_DEFAULTS.get(args.data, (None, "accuracy"))
    loss, metric = args.loss or loss, args.metric or metric
    if loss is None and getattr(model_file(args.model), "suffix", None) != ".py":
        # a file.py:function may return its loss with the model: its run says if it does not
        raise InputError("--loss is required for your own data (a Keras loss by name)")
    if args.backend is None:
        args.backend = FRAMEWORK_OF.get(args.model, default_framework())
    check_framework(args.backend, "--backend")
    if args.model in MODELS or args.model.endswith(".keras"):
        check_keras(args.backend, f"model '{args.model}'", "--backend")
    REGISTRY[args.backend].require()
    if args.device not in DEVICES:
        raise InputError(f"--device: unknown '{args.device}'; allowed: {', '.join(DEVICES)}")
    if args.device == "gpu" and not REGISTRY[args.backend].gpu_nodes_present():
        raise InputError(REGISTRY[args.backend].no_gpu())  # before the framework's start-up logs
    try:
        check_name(args.optimizer)
        check_library_name(args.optimizer)  # before the initial weights are drawn (Keras)
    except InputError as exc:
        raise InputError(f"--{exc}" if str(exc).startswith("optimizer") else str(exc)) \
            from None
    if is_file_name(args.optimizer):  # the same file in the run's fresh process
        args.optimizer = absolute(args.optimizer)
    check_initial_file(args.initial, args.model, "--initial")
    name, _, value = args.target.partition("=")
    try:  # no "=": an empty value, no number
        table = {"metric": name, "value": float(value)}
    except ValueError:
        raise InputError(f"--target '{args.target}' is not METRIC=VALUE") from None
    stopping = {"max_steps": args.max_steps}
    if args.time_budget is not None:
        stopping["time_budget"] = args.time_budget
    try:
        target = check_target(table, "--target", metric, [args.seed], [], args.backend, loss)
        stopping = check_stopping(stopping, "--max-steps/--time-budget")
    except ConfigError as exc:
        raise InputError(str(exc)) from None
    check_loop(args)
    for flag in ("batch_size", "eval_every", "seed"):
        if (getattr(args, flag) or 0) < 0:
            raise InputError(f"--{flag.replace('_', '-')} must be >= 0")
    if args.optimizer == LBFGS and args.batch_size not in (None, 0):
        raise InputError(f"--batch-size {args.batch_size}: lbfgs takes a full batch (every "
                         "step is one iteration on all training rows); leave --batch-size out")
    batch_size = 64 if args.batch_size is None else args.batch_size
    return Spec("train", args.model, data, loss, metric, args.optimizer,
                key_values(args.opt_param, "--opt-param"), args.backend,
                0 if args.optimizer == LBFGS else batch_size, args.eval_every, target,
                args.seed, 0, stopping, {}, args.loop, args.device,
                None if args.initial is None else str(args.initial))


def check_loop(args) -> None:
    """`--loop fit` times Keras's own fit: a Keras optimizer only, and at least a compiling
    step, an untimed warm-up fit and one timed step (study.train.run.measure.fit_record)."""
    if args.loop not in LOOPS:
        raise InputError(f"--loop: unknown '{args.loop}'; allowed: {', '.join(LOOPS)}")
    if args.loop == "fit" and (args.model in FRAMEWORK_OF
                               or library_of(args.optimizer) in native_libraries()):
        raise InputError("--loop fit times Keras's model.fit, which runs Keras models and "
                         "optimizers only; use --loop steps for a native model")
    if args.loop == "fit" and args.optimizer == LBFGS:
        raise InputError("--loop fit times Keras's model.fit, which cannot run lbfgs (ours, on "
                         "the flat weights); use a keras:<Class> optimizer or --loop steps")
    if args.loop == "fit" and args.max_steps < FIT_MIN_STEPS:
        raise InputError(f"--loop fit needs --max-steps of at least {FIT_MIN_STEPS} (a "
                         "compiling step, a warm-up fit, then the timed steps), got "
                         f"{args.max_steps}")


def main(args) -> int:
    spec = spec_from(args)
    reading(*input_files(spec))  # the model's file (file.py:function too), data, --initial
    if args.out:
        check_output_path(args.out)
        check_output_path(trace_path(args.out), "--out's trace file")
    if args.cache:
        check_output_folder(args.cache, "--cache")
    held = os.environ.get("KERAS_BACKEND")
    os.environ["KERAS_BACKEND"] = spec.backend  # before Keras is imported (by measure)
    try:
        with (nullcontext(args.cache) if args.cache else tempfile.TemporaryDirectory()) as cache:
            try:
                result = measure(spec, RunContext(cache_dir=cache, probe=nullcontext()))
            except InputError:
                raise
            except Exception as exc:  # inside Keras or its framework: its own words, one line
                print(f"convergence-study train: error: {failure_line(exc)}", file=sys.stderr)
                return 1
    finally:
        if held is None:
            os.environ.pop("KERAS_BACKEND", None)
        else:
            os.environ["KERAS_BACKEND"] = held
    record = result.row
    if record.get("status") == "skipped":  # a sweep records it; one run refuses, writing nothing
        raise InputError(record["message"])
    print(one_line(record))
    if args.out:
        write_out(args.out, spec, result)
    return 0


def write_out(out: str, spec: Spec, result) -> None:
    import pandas as pd

    row = {"run_id": spec.run_id, "spec": spec.to_json(), **spec.axes(), **result.row}
    files = {out: parquet_writer(pd.DataFrame([row]))}
    if "traces" in result.tables:
        files[trace_path(out)] = parquet_writer(result.tables["traces"])
    write_files_atomic(files)
    print(f"wrote {' and '.join(files)}")
