"""L-BFGS from TensorFlow Probability, as one more labelled variant (`lbfgs-tfp`) on the TF backend.

An optimizer like the others (init/update on a NamedTuple state), so every feed mode runs it:
`update` is one more iteration of `tfp.optimizer.lbfgs_minimize`, resumed from the previous
results. TFP's own convergence tests are off (tolerances 0) so that the run's rules decide; when
TFP stops by itself (a failed line search) further updates leave the state as it is until a rule
fires, and the record says so (`tfp_iterations`, `tfp_converged`, `tfp_failed`). Evaluations are
TFP's own count. Without `tensorflow-probability` and `tf-keras` (the `tfp` extra) a run is
recorded as skipped.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from convergence_study.errors import InputError
from optimizers.base import Optimizer, count


def tfp_module():
    """tensorflow_probability, or an InputError saying why it cannot be imported."""
    try:
        import tensorflow_probability as tfp
    except Exception as exc:  # noqa: BLE001 -- TFP fails in several ways on a mismatched TF
        raise InputError(f"lbfgs-tfp: tensorflow_probability is not importable "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                         "install the 'tfp' extra") from None
    return tfp


class TfpLBFGSState(NamedTuple):
    w: object
    f: object
    g: object
    results: object  # tfp's LBfgsOptimizerResults: position, history queue, counters, flags


@dataclass(frozen=True)
class TfpLBFGS(Optimizer):
    history: int = 10
    name: str = "lbfgs-tfp"
    only_on = "tensorflow"
    evaluations = {"nfev": 1, "ngev": 1, "nhvp": 0}  # nominal; `report` gives TFP's own counts

    def __post_init__(self):
        count("history", self.history, optimizer="lbfgs-tfp")

    def hyperparameters(self) -> dict:
        return {"history": self.history}

    def unavailable(self) -> str | None:
        try:
            tfp_module()
        except InputError as exc:
            return str(exc)
        return None

    def setup(self, problem, objective, ops):
        tfp_module()
        return ()

    def _minimize(self, objective, shape, **kwargs):
        import tensorflow as tf

        def value_and_gradient(x):
            f, g = objective.value_and_grad(tf.reshape(x, shape))
            return f, tf.reshape(g, [-1])

        return tfp_module().optimizer.lbfgs_minimize(
            value_and_gradient, num_correction_pairs=self.history, tolerance=0.0,
            x_tolerance=0.0, f_relative_tolerance=0.0, **kwargs)

    def _state(self, results, shape):
        import tensorflow as tf

        return TfpLBFGSState(tf.reshape(results.position, shape), results.objective_value,
                             tf.reshape(results.objective_gradient, shape), results)

    def init(self, objective, ops, params, w0) -> TfpLBFGSState:
        import tensorflow as tf

        results = self._minimize(objective, w0.shape, initial_position=tf.reshape(w0, [-1]),
                                 max_iterations=0)
        return self._state(results, w0.shape)

    def update(self, objective, ops, params, state) -> TfpLBFGSState:
        results = self._minimize(objective, state.w.shape, initial_position=None,
                                 previous_optimizer_results=state.results,
                                 max_iterations=state.results.num_iterations + 1)
        return self._state(results, state.w.shape)

    def state_record(self, state) -> dict:
        """Host-side counts of a final state: evaluations and TFP's own view of the run."""
        results = state.results
        nfev = int(results.num_objective_evaluations)
        return {"nfev": nfev, "ngev": nfev, "nhvp": 0,
                "tfp_iterations": int(results.num_iterations),
                "tfp_converged": bool(results.converged), "tfp_failed": bool(results.failed)}
