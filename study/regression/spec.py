"""One point of a regression study's grid: everything needed to repeat the run in a fresh
process. Its id is a stable hash of its content, so a changed config reruns only what changed."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, fields, replace
from functools import cached_property

from datasets import dataset
from datasets.from_file import short_name
from optimizers.from_file import declared_name, is_file_name
from study.frameworks.registry import BACKENDS
from study.sweep.tuning import tuning_axes

# backend options with a column of their own; any other a backend declares is `option_<name>`
OWN_COLUMNS = ("device", "feed", "xla", "formulation")


@dataclass(frozen=True)
class RunSpec:
    study: str
    dataset: str
    dataset_params: dict
    optimizer: str
    hyperparameters: dict
    backend: str
    backend_options: dict
    dtype: str
    init: str
    seed: int
    repeat: int
    stopping: dict = field(default_factory=dict)
    # the learning-rate tuning protocol (study/sweep/tuning.py): {} for an ordinary run,
    # {"role": "tuning"} for a grid run, {"role": "tuned", grid, seed, ...} for a measured one
    tuning: dict = field(default_factory=dict)

    @cached_property  # a spec never changes; a grid asks for each id several times
    def run_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def to_json(self) -> str:
        # the fields as they are: their values are plain JSON (asdict's deep copy was most of
        # planning a large grid's runs)
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.tuning:  # left out, so that an untuned run keeps the id it always had
            del values["tuning"]
        return json.dumps(values, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls(**json.loads(text))

    def data_params(self) -> dict:
        """The dataset's parameters; a seeded data set takes the run's seed unless it sets one."""
        if dataset(self.dataset).seeded and "seed" not in self.dataset_params:
            return {**self.dataset_params, "seed": self.seed}
        return dict(self.dataset_params)

    def instance(self) -> tuple:
        """What a paired comparison holds fixed: the data (its parameters and seed) and the
        starting point (init and its seed)."""
        return (self.dataset, json.dumps(self.dataset_params, sort_keys=True), self.seed,
                self.init)

    def axes(self) -> dict:
        """The flat axis values: what exclusions and --only match, and the results' columns."""
        return {
            "study": self.study,  # a user's loader by its file's and its own name
            "dataset": short_name(self.dataset) if is_file_name(self.dataset) else self.dataset,
            "dataset_params": json.dumps(self.dataset_params, sort_keys=True),
            **{f"data_{k}": _scalar(v) for k, v in self.dataset_params.items()},
            "optimizer": declared_name(self.optimizer) if is_file_name(self.optimizer)
            else self.optimizer,  # a user's own by the name it declares
            "hyperparameters": json.dumps(self.hyperparameters, sort_keys=True),
            **{f"hp_{k}": v for k, v in self.hyperparameters.items()},
            "backend": self.backend, "device": self.backend_options.get("device", "cpu"),
            **self.resolved_options(),
            "formulation": self.backend_options.get("formulation", "data"),
            **{f"option_{k}": v for k, v in self.backend_options.items()
               if k not in OWN_COLUMNS},
            "dtype": self.dtype, "init": self.init, "seed": self.seed, "repeat": self.repeat,
            "stopping": json.dumps(self.stopping, sort_keys=True),
            **{f"stop_{k}": v for k, v in self.stopping.items()},
            **tuning_axes(self.tuning, holdout=self.tuning_holdout),
        }

    def resolved_options(self) -> dict:
        """feed and xla as the run resolves them (the backend's default where the config names
        none), so that a row that never ran (skipped) names the configuration its measured
        siblings name, and a paired comparison finds them one configuration."""
        declared = BACKENDS.get(self.backend)
        default = declared.default if declared is not None else lambda option: None
        return {option: self.backend_options.get(option, default(option))
                for option in ("feed", "xla")}

    def tuning_holdout(self) -> str:
        """What the held-apart tuning seed really holds apart from this instance: 'instance'
        (other data, and another start if init is seeded), 'start point only' (the data set
        ignores the seed: its own seed is fixed, or it is the user's file), or 'nothing' (the
        same data from the same zero start: the tuning runs measure the very instance)."""
        tuning_seed = self.tuning["seed"]
        held = replace(self, seed=tuning_seed, tuning={})
        if held.data_params() != self.data_params():
            return "instance"
        return "start point only" if self.init != "zeros" else "nothing"

    def label(self) -> str:
        """A short human name for progress bars and logs."""
        hp = ",".join(f"{k}={v}" for k, v in self.hyperparameters.items())
        opts = ",".join(f"{k}={v}" for k, v in self.backend_options.items())
        role = f" [{self.tuning['role']}]" if self.tuning else ""
        return (f"{self.dataset} {self.optimizer}({hp}) {self.backend}({opts}) {self.dtype} "
                f"seed={self.seed} rep={self.repeat}{role}")


def _scalar(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value
