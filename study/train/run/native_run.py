"""One native-model run: the model loaded, its workload and the optimizer's submission built and
checked (every bad input one line before anything is timed), then the segmented loop over a
`WorkloadStepper`: the same clock, statuses and setup rule as Keras runs. `prepare` does
everything before the clock, `NativeRun.loop` the timed part; `train` is both and writes
nothing."""

from __future__ import annotations

from convergence_study.errors import InputError
from study.train.models.model import all_labels, class_count, labels_are_indices, loss_label
from study.train.models.model_checks import check_finite_loss, check_native, refuse_stochastic
from study.train.models.native_load import (
    NativeModel,
    check_backend,
    load,
    stochastic_layers,
    with_outputs,
    workload,
)
from study.train.models.workload import LBFGS_NAME, WorkloadStepper
from study.train.run.loop import Target, epoch_batches, finished, run_loop
from study.train.run.native_optimizers import make_submission


def train(model: str | NativeModel, arrays: dict, **options) -> dict:
    """`prepare`'s run, looped: the loop's record, the trace under "trace"."""
    run = prepare(model, arrays, **options)
    return run.finish(*run.loop())


class NativeRun:
    """A run made and checked, not started: `loop()` is the timed part, `finish` the record."""

    def __init__(self, work, submission, stepper, rows, per_epoch, target, metric, options):
        self.work, self.submission, self.stepper = work, submission, stepper
        self.rows, self.per_epoch, self.target, self.metric = rows, per_epoch, target, metric
        self.options = options

    def loop(self) -> tuple[dict, list[dict]]:
        return run_loop(self.stepper, self.stepper.evaluate, target=self.target,
                        **self.options)

    def finish(self, record: dict, trace: list[dict]) -> dict:
        record = finished(record, trace, self.metric, self.per_epoch)
        record.update(
            steps_per_epoch=self.per_epoch, batch_rows=len(self.rows(0)),
            parameters=self.work.parameter_count(), device_name=self.work.placed(),
            target_value=self.target.value, optimizer=self.submission.name,
            **self.work.record(), **self.submission.record())
        record["trace"] = trace
        return record


def prepare(model: str | NativeModel, arrays: dict, *, loss, metric: str, optimizer: str,
            hyperparameters: dict | None = None, batch_size: int = 64, seed: int = 0,
            target: Target | tuple, max_steps: int = 1000, eval_every: int = 0,
            time_budget: float | None = None, device: str = "cpu", initial=None,
            backend: str | None = None, check_initial=None) -> NativeRun:
    """Everything before the clock, each bad input one line: the model loaded, the workload
    and submission built and checked, the batches' order. Trains to `target` ((metric, value,
    mode) or a Target) on `arrays` (x_train, y_train, x_val, y_val); `initial`: an .npz of initial
    parameters (by name, or w0, w1, ...), else the model's own initialization under `seed`.
    L-BFGS is full batch."""
    hyperparameters = dict(hyperparameters or {})
    target = (target if isinstance(target, Target) else Target(*target)).checked(metric)
    if isinstance(model, NativeModel):
        native = model
    else:
        native = load(model, arrays["x_train"].shape[1:], outputs_of(loss, arrays), seed)
        if native is None:
            raise InputError(f"model '{model}' is a Keras model: the Keras path runs it")
    check_backend(native, backend)
    submission = make_submission(optimizer, hyperparameters, native.framework, native.what)
    if native.loss is not None:  # the loss that runs decides the labels, not a name beside it
        native = with_outputs(native, outputs_of(native.loss, arrays))
    refuse_stochastic(optimizer, stochastic_layers(native))
    work = workload(native, arrays, loss, metric, device, initial, seed)
    check_native(work, optimizer)
    size = 0 if optimizer == LBFGS_NAME else batch_size
    rows, per_epoch = epoch_batches(len(arrays["x_train"]), size, seed)
    stepper = WorkloadStepper(work, submission, rows)

    def initial_checked(logs):  # before any training, as the Keras runs check it
        check_finite_loss(logs["val_loss"], work.loss_label, f"{work.what} (validation rows)")
        if check_initial is not None:
            check_initial(logs)
        target.met_at_start(logs)

    options = {"max_steps": max_steps, "eval_every": eval_every or per_epoch,
               "time_budget": time_budget, "check_initial": initial_checked}
    return NativeRun(work, submission, stepper, rows, per_epoch, target, metric, options)


def outputs_of(loss, arrays: dict) -> int:
    """How many outputs the model needs: the class count for a loss of class indices (or a
    callable of unknown meaning on integer labels in one column), else the labels' width."""
    import numpy as np

    y = all_labels(arrays["y_train"], arrays["y_val"])
    indices = labels_are_indices(loss)
    if indices:
        return class_count(y, loss_label(loss))
    if indices is None and y.shape[1] == 1 and np.issubdtype(y.dtype, np.integer) \
            and y.min() >= 0 and y.max() > 1:
        return int(y.max()) + 1
    return y.shape[1]
