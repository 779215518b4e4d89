"""One train run in its own process, Keras on the spec's framework. Outside every clock: the data
and the initial weights (the sweep's cache), building and compiling the model, and the check
that the loaded weights give the reference validation loss; then the loop inside the noise
probe (`loop = "fit"`: `model.fit` over the same batches). A GPU run where the framework sees
none is skipped, and the weights' device is checked after the run (TensorFlow would fall back
to the CPU without a word)."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd

from convergence_study.errors import InputError
from datasets.user_file import is_file_name
from optimizers.from_file import provenance
from study.frameworks.registry import FRAMEWORKS
from study.sweep.plugin import Measurement, RunContext
from study.sweep.tuning import NO_RATE, is_tuned
from study.train.frameworks import adapter, check_keras, model_library, native_titles, of_library
from study.train.models.examples import NATIVE_MODELS
from study.train.models.initial import (
    check_agrees,
    data_folder,
    initial_folder,
    keras_instance,
    read_arrays,
    read_initial,
)
from study.train.models.model import outputs_for
from study.train.models.native_load import check_backend, load
from study.train.run.loop import Target, epoch_batches, finished, run_loop
from study.train.run.native_optimizers import KERAS_LIBRARY, check_family, library_of
from study.train.run.native_run import prepare
from study.train.sweep.spec import Spec

FIT_GATHERED_BYTES = 2**31  # the most the fit baseline gathers in memory before its clock
NO_TARGET = ("the target-setting round has no usable run: every run on the held-apart seed "
             "diverged or failed (see the rows with target_how = 'setting')")


def measure(spec: Spec, ctx: RunContext) -> Measurement:
    if is_tuned(spec) and spec.tuning.get("value") is None:
        return Measurement({"status": "skipped", "message": NO_RATE})
    if spec.target.get("how") == "round" and spec.target.get("value") is None:
        return Measurement({"status": "skipped", "message": NO_TARGET})
    found = native_model(spec, ctx)  # before Keras is imported: a native model never needs it
    if found is not None:
        return measure_native(spec, ctx, *found)
    if library_of(spec.optimizer) not in (KERAS_LIBRARY, "ours"):
        native = of_library(library_of(spec.optimizer))
        kind = (f"{native.OPTIMIZER_KIND} (for native {native.TITLE} models)"
                if native is not None else "no Keras optimizer")
        return Measurement({"status": "skipped", "message": (
            f"optimizer '{spec.optimizer}' is {kind}; model '{spec.model}' is a Keras model: "
            "allowed keras:<Class>, lbfgs")})
    try:
        check_keras(spec.backend, f"model '{spec.model}'")
    except InputError as exc:
        return Measurement({"status": "skipped", "message": str(exc)})
    if spec.initial is not None:
        raise InputError(f"initial '{spec.initial}' is for native models ({native_titles()}); a "
                         "Keras model's initial weights are drawn per seed (the same on every "
                         "framework)")
    initial = initial_folder(spec, ctx.cache_dir)  # a model that cannot be built is refused
    keras = model_library()
    keras.check_backend(spec.backend)  # here, before Keras starts its framework (seconds)
    if no_gpu(spec):
        return no_gpu(spec)
    with keras.scope(spec.device):
        return measure_on_device(spec, ctx, initial)


def measure_on_device(spec: Spec, ctx: RunContext, initial) -> Measurement:
    arrays = read_arrays(data_folder(spec.data, ctx.cache_dir))
    weights, meta = read_initial(initial)
    keras = model_library()
    loss = keras.loss_object(spec.loss)
    keras.metric_object(spec.metric)  # an unknown name is refused here, before the model is built
    model = keras.build(spec.model, tuple(meta["input_shape"]), meta["outputs"])
    model.set_weights(weights)
    rows, per_epoch = epoch_batches(len(arrays["x_train"]), spec.batch_size, spec.seed)
    trainer = keras.make_trainer(model, spec, loss, spec.metric, arrays)
    evaluation = keras.evaluation(model, arrays, spec.metric)
    x, y = arrays["x_train"], arrays["y_train"]
    reference = meta["reference_val_loss"]
    initial = {}
    target = Target(spec.target["metric"], spec.target.get("value"),
                    spec.target["mode"]).checked(spec.metric)

    def check_initial(logs):
        check_agrees(logs["val_loss"], reference, f"the loaded initial weights give val_loss "
                     f"{logs['val_loss']:.9g} on {spec.backend}", "the reference")
        met = target.met_at_start(logs, refuse=spec.target.get("how") == "given")
        if met:  # a round's target: said, the user's was refused
            initial["note"] = f" ({met}: the round's margin is too wide for this run)"
    stopping = spec.stopping
    common = {"n_train": len(x), "n_val": len(arrays["x_val"]), "steps_per_epoch": per_epoch,
              "batch_rows": len(rows(0)), "parameters": meta["parameters"],
              "reference_val_loss": reference, "target_value": target.value,
              "target_margin": spec.target.get("margin"),
              "target_seed": spec.target.get("seed"), "model_kind": "keras",
              "optimizer_library": library_of(spec.optimizer),
              **(provenance(spec.optimizer) if is_file_name(spec.optimizer) else {})}
    if spec.loop == "fit":
        check_fit_size(rows, x, y, stopping["max_steps"])
        with ctx.probe:
            record = fit_record(trainer, model, rows, x, y, stopping["max_steps"])
        return Measurement({**common, **record, **trainer.record(), **device_record(spec, model)},
                           {})
    stepper = trainer.stepper(arrays, rows)

    def evaluate():  # off the clock: the state into the model, evaluated, and back
        stepper.write_back()
        logs = evaluation()
        stepper.reload()
        return logs

    with ctx.probe:
        record, trace = run_loop(stepper, evaluate, target=target,
                                 max_steps=stopping["max_steps"],
                                 eval_every=spec.eval_every or per_epoch,
                                 time_budget=stopping.get("time_budget"),
                                 check_initial=check_initial)
    stepper.write_back()
    record["message"] += initial.get("note", "")
    record = finished(record, trace, spec.metric, per_epoch)
    record.update(common, **trainer.record(), **device_record(spec, model))
    return Measurement(record, {"traces": trace_table(trace, spec.metric)})


def native_model(spec: Spec, ctx: RunContext):
    """(the native model, the data arrays) where the spec's model is a native one; else None."""
    head, sep, _ = spec.model.rpartition(":")
    if spec.model not in NATIVE_MODELS and not (sep and head.endswith(".py")):
        return None
    arrays = read_arrays(data_folder(spec.data, ctx.cache_dir))
    outputs = outputs_for(spec.loss, arrays["y_train"], arrays["y_val"], "data")
    native = load(spec.model, arrays["x_train"].shape[1:], outputs, spec.seed)
    return None if native is None else (native, arrays)


def measure_native(spec: Spec, ctx: RunContext, native, arrays: dict) -> Measurement:
    """A native model through study.train.run.native_run, the row and trace the Keras path gives.
    A shipped native example starts from its Keras twin's weights for the seed (its validation
    loss checked against theirs) unless `initial` names an .npz."""

    try:  # a model and a framework or optimizer that do not go together: no run, said why
        check_backend(native, spec.backend)
        check_family(spec.optimizer, native.framework, native.what)
    except InputError as exc:
        return Measurement({"status": "skipped", "message": str(exc)})
    if spec.loop != "steps":
        raise InputError(f"loop '{spec.loop}' times Keras's model.fit; {native.what} is a native "
                         "model: use loop = 'steps'")
    if no_gpu(spec):
        return no_gpu(spec)
    initial, reference = spec.initial, None
    if initial is None and spec.model in NATIVE_MODELS:
        folder = initial_folder(keras_instance(spec), ctx.cache_dir)
        initial, reference = folder / "weights.npz", read_initial(folder)[1]["reference_val_loss"]

    def check_initial(logs):
        if reference is not None:
            check_agrees(logs["val_loss"], reference, f"{native.what} gives val_loss "
                         f"{logs['val_loss']:.9g} at its Keras twin's initial weights", "the twin")

    target = Target(spec.target["metric"], spec.target.get("value"), spec.target["mode"])
    run = prepare(native, arrays, loss=spec.loss, metric=spec.metric, optimizer=spec.optimizer,
                  hyperparameters=spec.hyperparameters, batch_size=spec.batch_size,
                  seed=spec.seed, target=target, max_steps=spec.stopping["max_steps"],
                  eval_every=spec.eval_every, time_budget=spec.stopping.get("time_budget"),
                  device=spec.device, initial=initial, backend=spec.backend,
                  check_initial=check_initial)
    with ctx.probe:
        looped = run.loop()
    record = run.finish(*looped)
    trace = record.pop("trace")
    for key in ("optimizer", "framework"):  # the spec's axes say them
        record.pop(key, None)
    check_placed(spec.device, record["device_name"])
    record.update(n_train=len(arrays["x_train"]), n_val=len(arrays["x_val"]),
                  reference_val_loss=reference, target_margin=spec.target.get("margin"),
                  target_seed=spec.target.get("seed"))
    return Measurement(record, {"traces": trace_table(trace, spec.metric)})


def trace_table(trace: list[dict], metric: str) -> pd.DataFrame:
    return pd.DataFrame([{"step": t["step"], "seconds": t["seconds"],
                          "train_loss": t["train_loss"], "val_loss": t["val_loss"],
                          "val_metric": t.get(f"val_{metric}")} for t in trace])


def no_gpu(spec: Spec) -> Measurement | None:
    """A GPU run where the framework (in this process) sees none: skipped."""
    if spec.device == "gpu" and not adapter(spec.backend).gpu_seen():
        return Measurement({"status": "skipped", "message": FRAMEWORKS[spec.backend].no_gpu()})
    return None


def check_placed(device: str, name: str) -> None:
    if name.lower().startswith(("gpu", "cuda")) != (device == "gpu"):
        raise RuntimeError(f"asked for the {device.upper()} but the weights lie on {name}")


def device_record(spec: Spec, model) -> dict:
    """Where the weights lay after the run, checked against the device asked for."""
    name = model_library().placed(model)
    check_placed(spec.device, name)
    return {"device_name": name}


def check_fit_size(rows, x, y, steps: int) -> None:
    """The fit baseline gathers all its batches before its clock and has no time budget: a
    max_steps meant as "no step limit" (up to 2**63 - 1) is refused, not a MemoryError."""
    per_step = len(rows(0)) * (x[:1].nbytes + y[:1].nbytes)
    if (steps - 2) * per_step > FIT_GATHERED_BYTES:
        raise InputError(f"loop 'fit' gathers its {steps} steps' batches in memory before its "
                         f"clock ({(steps - 2) * per_step / 2**30:.3g} GiB) and has no time "
                         f"budget: give max_steps of at most {FIT_GATHERED_BYTES // per_step + 2}"
                         ", or loop 'steps'")


def fit_record(trainer, model, rows, x, y, steps: int) -> dict:
    """model.fit over the batches the loop would take, one epoch, no shuffling, no validation:
    its seconds per step against the loop's. A first step and a one-step fit run untimed as
    setup: fit hands the compiled step other argument types than train_on_batch (on JAX it
    compiled again inside the timed fit, which read as fit taking twice the loop's time)."""
    def batches(first: int, last: int) -> tuple:  # gathered before any clock is read
        order = np.concatenate([rows(i) for i in range(first, last)])
        return x[order], y[order]

    def fit(arrays: tuple):
        return model.fit(*arrays, batch_size=len(rows(0)), epochs=1, shuffle=False, verbose=0)

    first, warm_up, timed = batches(0, 1), batches(1, 2), batches(2, steps)
    t0 = time.perf_counter()
    trainer.step(*first)
    fit(warm_up)
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    history = fit(timed)
    seconds = time.perf_counter() - t0
    loss = float(history.history["loss"][-1])
    return {"status": "completed", "message": f"model.fit over {steps - 2} steps",
            "steps": steps, "setup_seconds": setup, "seconds": seconds,
            "seconds_per_step": seconds / (steps - 2), "train_loss": loss,
            "total_seconds": setup + seconds, "evaluations": 0, "eval_seconds": 0.0}


def one_line(record: dict) -> str:
    """The one-run command's summary line."""
    parts = [record["status"], f"{record['steps']} steps",
             f"setup {record['setup_seconds']:.3g} s", f"training {record['seconds']:.3g} s"]
    if record.get("seconds_to_target") is not None:
        parts.append(f"to target {record['seconds_to_target']:.3g} s "
                     f"({record['seconds_to_target_with_setup']:.3g} s with setup)")
    if record.get("seconds_per_step"):
        parts.append(f"{1e3 * record['seconds_per_step']:.3g} ms/step")
    parts.append(f"evaluation {record['eval_seconds']:.3g} s apart")
    if record.get("default_learning_rate") is not None:
        parts.append(f"learning_rate {record['default_learning_rate']:.3g} (Keras's default "
                     f"for {record.get('keras_class')}: none was given)")
    return ", ".join(parts) + "\n  " + record["message"] + "\n  " + json.dumps(
        {k: record.get(k) for k in ("val_loss", "val_metric", "best_value", "target_value")})
