"""The checks every model kind goes through before any clock (a Keras model on each framework, a
torch.nn.Module, a JAX pair, an Equinox or Flax NNX module), each written once:

  - finite outputs of the kind the loss takes (probabilities, logits, log-probabilities), read
    off a probe batch at the initial weights: study.train.model.check_outputs (the Keras path
    calls it in its initial-weights helper, native models here);
  - a finite loss there: an initial NaN or inf would be recorded `diverged` after one step, the
    label of an optimizer that blew up;
  - no L-BFGS (ours, torch:LBFGS, optax:lbfgs) on a model whose training objective draws noise
    or depends on the batch: the same one line for every kind (`refuse_stochastic`), from the
    layers each framework's adapter finds and, for torch, two training passes that differ;
  - rows that fit the model's input: the data's arrays reach the model as they are, so a
    mismatch is one line naming both shapes and what to change (`input_mismatch`), the
    model's expected shape read where it can be (Keras's input_shape, a torch model's first
    conv or linear layer) and a JAX model's in its probe call's own words.

Why here: these were the Keras path's alone, and native models that broke them trained garbage
silently (a log_softmax model under a probability loss was even recorded `reached`)."""

from __future__ import annotations

import math

from datasets.errors import InputError
from study.train.model import check_outputs
from study.train.workload import describe

# the optimizers whose line search compares the loss at several points of one objective
LINE_SEARCH = ("lbfgs", "torch:LBFGS", "optax:lbfgs")


def refuse_stochastic(optimizer: str, found: list[str]) -> None:
    """L-BFGS on a model with layers random or batch-dependent in training: one line, the same
    for every model kind (a no-op where nothing was found or the optimizer has no line
    search)."""
    if found and optimizer in LINE_SEARCH:
        raise InputError(f"{optimizer} needs a deterministic training objective, but the model "
                         f"has {', '.join(found)} (random or batch-dependent in training): its "
                         "line search would compare different objectives; use a first-order "
                         "optimizer (Adam, SGD, ...), or a model without those layers")


def input_mismatch(what: str, rows: tuple, expected: tuple | None,
                   exc: BaseException) -> InputError:
    """The one line for data rows of shape `rows` that the model cannot take. `expected`: the
    rows the model takes (a str for an axis it leaves open, such as 'H'), None where it cannot
    be read; then the model's own error says it. What to change follows from the two shapes:
    channels last given to a channels-first model (or the reverse) is a layout."""
    rows = tuple(int(d) for d in rows)
    if _fits(rows, expected):  # built for these rows, failing inside: its own words say why
        expected = None
    takes = f", which takes rows of shape {_shape(expected)}" if expected else ""
    line = f"the data's rows (shape {rows}) do not fit {what}{takes}"
    if len(rows) >= 2 and _fits((rows[-1], *rows[:-1]), expected):
        fix = ("the arrays are channels last and the model takes channels first: give layout "
               "= \"channels_first\" on the data block (--layout channels_first), which moves "
               "the channel axis once, before the clock")
    elif len(rows) >= 2 and _fits((*rows[1:], rows[0]), expected):
        fix = ("the model takes channels last: leave out layout = \"channels_first\" (or store "
               f"the arrays as {(*rows[1:], rows[0])} per row)")
    elif expected:
        fix = f"give rows of shape {_shape(expected)}, or a model built for {rows}"
    else:
        fix = (f"give a model built for rows of {rows}, or rows of the shape it takes (image "
               "arrays: layout = \"channels_first\" on the data block, --layout "
               "channels_first, moves the channel axis after the rows; channels_last, the "
               "default, keeps them as stored)")
    said = "" if expected and "layout" in fix else f" ({describe(exc)})"
    return InputError(f"{line}{said}: {fix}; the arrays reach the model as they are")


def _fits(rows: tuple, expected: tuple | None) -> bool:
    """Rows of this shape are what the model takes (an axis it leaves open takes any size)."""
    return bool(expected) and len(rows) == len(expected) and all(
        not isinstance(e, int) or e == d for d, e in zip(rows, expected, strict=True))


def _shape(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def check_finite_loss(value: float, label, what: str) -> None:
    if not math.isfinite(value):
        raise InputError(f"{what}: the loss ({label}) is {value} at the initial weights, before "
                         "any training: nothing can be trained from there; check the model's "
                         "initialization, its outputs and the loss")


def check_native(work, optimizer: str) -> None:
    """A native model's workload at its initial parameters, before any clock: the outputs on a
    probe batch (finite, the kind the loss takes), the loss there (finite), and, for an L-BFGS,
    whether two training passes over the same rows differ."""
    outputs, value = work.probe()
    check_outputs(work.loss_used, outputs, work.what)
    check_finite_loss(value, work.loss_label, work.what)
    if optimizer in LINE_SEARCH and work.random_in_training():
        # two training passes over the same rows differ: noise no layer type said
        refuse_stochastic(optimizer, ["a training pass that draws noise"])
