"""The checks every model kind goes through before any clock: finite outputs of the kind the loss
takes, a finite loss there, and no line-search optimizer on a model whose training objective
draws noise or depends on the batch. Why: native models that broke these trained garbage
silently (a log_softmax model under a probability loss was even recorded `reached`)."""

from __future__ import annotations

import math

from convergence_study.errors import InputError
from study.train.frameworks import native_adapters
from study.train.models.model import check_outputs

RANDOM_PASS = "a training pass that draws noise"  # found by behaviour, not by a layer's type


def line_search() -> tuple[str, ...]:
    """The optimizers whose line search compares the loss at several points of one objective."""
    return ("lbfgs", *(f"{a.LIBRARY}:{name}" for a in native_adapters() for name in a.LINE_SEARCH))


def refuse_stochastic(optimizer: str, found: list[str]) -> None:
    """A line-search optimizer on a model with layers random or batch-dependent in training:
    one line, the same for every model kind."""
    if found and optimizer in line_search():
        raise InputError(f"{optimizer} needs a deterministic training objective, but the model "
                         f"has {', '.join(found)} (random or batch-dependent in training): its "
                         "line search would compare different objectives; use a first-order "
                         "optimizer (Adam, SGD, ...), or a model without those layers")


def check_finite_loss(value: float, label, what: str) -> None:
    if not math.isfinite(value):
        raise InputError(f"{what}: the loss ({label}) is {value} at the initial weights, before "
                         "any training: nothing can be trained from there; check the model's "
                         "initialization, its outputs and the loss")


def check_native(work, optimizer: str) -> None:
    """A native model's workload at its initial parameters, before any clock."""
    outputs, value = work.probe()
    check_outputs(work.loss_used, outputs, work.what)
    check_finite_loss(value, work.loss_label, work.what)
    if optimizer in line_search() and work.random_in_training():
        # two training passes over the same rows differ: noise no layer type said
        refuse_stochastic(optimizer, [RANDOM_PASS])
