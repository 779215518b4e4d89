"""What the steppers of a compiled Keras model share (one subclass per framework, in its folder:
its adapter's `keras_stepper`). Each does per step what `fit` does minus its metrics, and reads
nothing back to the host inside a segment (the interface: study.train.run.loop). Nothing here
imports Keras: the variables' own methods are enough."""

from __future__ import annotations

import numpy as np


class KerasStepper:
    """The training arrays put once on the weights' device, a segment's row indices before the
    clock; the variables stepped in place (nothing to write back or reload)."""

    INDEX = np.int32  # the row indices' type

    def __init__(self, model, loss, x, y, rows):
        self.model, self.loss, self.rows = model, loss, rows
        self.x, self.y = self.put(x), self.put(y)

    def put(self, values):
        """Host values on the weights' device."""
        raise NotImplementedError

    def prepare(self, first: int, count: int):
        return [self.put(np.asarray(self.rows(i), self.INDEX))
                for i in range(first, first + count)]

    def warm(self, prepared) -> None:
        rewound(self.model, lambda: self.read(self.run(prepared[:1])))

    def write_back(self) -> None:
        pass

    def reload(self) -> None:
        pass


def rewound(model, step) -> None:
    """`step()` run once for what its first call costs, then every variable of the model and its
    optimizer set back: the first timed step starts where it would have."""
    variables = [*model.variables, *model.optimizer.variables]
    saved = [v.numpy() for v in variables]  # a host copy (keras.ops.convert_to_numpy's)
    step()
    for variable, value in zip(variables, saved, strict=True):
        variable.assign(value)
