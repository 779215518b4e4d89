"""One run of the train study: a model on a data set, an optimizer, a framework, a batch size,
a target and a budget, for one seed. Its hash is the run id.

The field names `hyperparameters`, `seed`, `repeat`, `stopping` and `tuning` are the ones the
learning-rate tuning protocol (study.sweep.tuning) replaces, so the protocol runs unchanged.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields
from functools import cached_property

from study.sweep.tuning import tuning_axes

LBFGS = "lbfgs"  # our L-BFGS on the flattened weights (full batch); else a library's optimizer


@dataclass(frozen=True)
class Spec:
    study: str
    model: str  # a shipped example's name, a .keras file, or file.py:function
    data: dict  # {"name": ...} or {"path": ..., features/labels/validation_fraction/...}
    loss: str | None  # a loss by name (study.train.models.model); None: the one the model returns
    metric: str  # a Keras metric by name (besides the loss)
    optimizer: str  # keras:<Class> | torch:<Class> | optax:<name> | lbfgs
    hyperparameters: dict
    backend: str  # a framework with a train adapter (study.train.adapters): KERAS_BACKEND of
    # its process where Keras runs on it
    batch_size: int  # 0: full batch
    eval_every: int  # steps between evaluations; 0: once per epoch
    target: dict  # {"metric", "value", "mode", "how"}; how: "given" or "round"
    seed: int
    repeat: int = 0
    stopping: dict = field(default_factory=dict)  # max_steps, time_budget (training seconds)
    tuning: dict = field(default_factory=dict)  # study.sweep.tuning's protocol
    loop: str = "steps"  # steps: our timed loop; fit: model.fit over the same steps (overhead)
    device: str = "cpu"  # cpu or gpu: where the framework runs it (study.train.run.measure)
    initial: str | None = None  # a native model's .npz of initial parameters (None: the seed's)
    problem: str | None = None  # the [[problems]] block's name: what the report calls it

    @cached_property
    def run_id(self) -> str:
        """The hash of the spec without the target round's list of optimizer configurations (the
        whole study's: adding an optimizer would change every round-targeted run's id)."""
        fields_ = json.loads(self.to_json())
        fields_["target"].pop("configurations", None)
        fields_.pop("problem", None)  # a name, not what is measured: renaming re-runs nothing
        if fields_["initial"] is None:  # the ids of runs from before it was a field
            del fields_["initial"]
        return hashlib.sha256(json.dumps(fields_, sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps({f.name: getattr(self, f.name) for f in fields(self)}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Spec:
        fields_ = json.loads(text)
        fields_.pop("eval_sleep", None)  # rows from before it left the spec (always 0 there)
        return cls(**fields_)

    def data_name(self) -> str:
        return self.data.get("name") or self.data.get("path", "?")

    def instance(self) -> tuple:
        """What a paired comparison holds fixed: model, data and seed (weights, order, split)."""
        return (self.model, json.dumps(self.data, sort_keys=True), self.seed)

    def axes(self) -> dict:
        return {
            "study": self.study, "model": self.model, "data": self.data_name(),
            "data_params": json.dumps(self.data, sort_keys=True), "loss": self.loss,
            "metric": self.metric, "optimizer": self.optimizer,
            "hyperparameters": json.dumps(self.hyperparameters, sort_keys=True),
            **{f"hp_{k}": v for k, v in self.hyperparameters.items()},
            "backend": self.backend, "device": self.device, "batch_size": self.batch_size,
            "eval_every": self.eval_every, "target_metric": self.target.get("metric"),
            "target_mode": self.target.get("mode"), "target_how": self.target.get("how"),
            "seed": self.seed, "repeat": self.repeat, "loop": self.loop, "initial": self.initial,
            "problem": self.problem,
            "stopping": json.dumps(self.stopping, sort_keys=True),
            **{f"stop_{k}": v for k, v in self.stopping.items()},
            **tuning_axes(self.tuning),
        }

    def label(self) -> str:
        hp = ",".join(f"{k}={v}" for k, v in self.hyperparameters.items())
        role = f" [{self.tuning['role']}]" if self.tuning else ""
        return (f"{self.model} on {self.data_name()} {self.optimizer}({hp}) {self.backend}"
                f"/{self.device} "
                f"batch={self.batch_size or 'full'} seed={self.seed} rep={self.repeat}{role}")
