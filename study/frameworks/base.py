"""What every regression backend does the same way, written once; a framework's backend
overrides what differs: its ops (`make_ops`), its GPU probe (`gpu_available`) and its loop
(`run`). A run asked of a backend that cannot make it (a GPU absent, an optimizer's library
missing) is a `skipped` Outcome, never a run on the CPU under a GPU label.
"""

from __future__ import annotations

import numpy as np

from optimizers.result import Outcome, apply_state_record
from study.frameworks import registry

# the options every backend keeps as fields of its own; the others are its options() columns
COMMON = ("dtype", "formulation", "device")


class BaseBackend:
    """A backend named `name` in the registry: its options checked against that declaration
    (a missing one takes the declared default) and kept as attributes of the same names."""

    name = ""

    def __init__(self, dtype: str = "float64", formulation: str = "data", **options):
        declared = registry.backend(self.name)
        declared.check({"dtype": dtype, "formulation": formulation, **options})
        self.dtype = np.dtype(dtype)
        self.formulation = formulation
        self.device = options.get("device", declared.default("device") or "cpu")
        self._options = {key: options.get(key, declared.default(key))
                         for key in declared.options if key not in COMMON}
        for key, value in self._options.items():
            setattr(self, key, value)
        self._ops = None

    @property
    def ops(self):
        """The array operations, made on first use (a framework's import and device probe wait
        for the run's own process)."""
        if self._ops is None:
            self._ops = self.make_ops()
        return self._ops

    def make_ops(self):
        return self

    def options(self) -> dict:
        """The backend's own options as the row records them (feed, xla, ...)."""
        return dict(self._options)

    def gpu_available(self) -> bool:
        return False

    def unavailable(self) -> str | None:
        """Why this backend cannot run here (a GPU asked for but none visible), or None."""
        if self.device == "gpu" and not self.gpu_available():
            return registry.framework_of(self.name).no_gpu()
        return None

    def minimize(self, problem, optimizer, rules, w0) -> Outcome:
        """The run on this backend: refused for an optimizer of another backend, skipped where
        it cannot be made here, else the framework's loop (`run`), its optimizer's own counts
        read from the final state, and its result checked to lie on the device asked for."""
        optimizer.refuse_backend(self.name)
        reason = self.unavailable() or optimizer.unavailable()
        if reason is not None:  # recorded, never run on the CPU under a GPU label
            return Outcome(np.asarray(w0, dtype=self.dtype), 0, 0.0, 0.0, "skipped", reason,
                           device=self.device, extra={**self.options(), "device_name": ""})
        outcome, state = self.run(problem, optimizer, rules, w0)
        if state is not None:
            outcome = apply_state_record(outcome, optimizer, state)
        if self.device == "gpu" and not outcome.device.upper().startswith(("GPU", "CUDA")):
            raise RuntimeError(f"asked for the GPU but the result lies on {outcome.device}")
        return outcome

    def run(self, problem, optimizer, rules, w0) -> tuple[Outcome, object]:
        """The framework's loop: (outcome, final state on the host, or None when the optimizer
        has no state to read counts from)."""
        raise NotImplementedError(f"backend '{self.name}' has no loop")
