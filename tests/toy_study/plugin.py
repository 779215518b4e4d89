"""The toy study's plugin: two methods whose cost is a made-up number per seed (nothing is
timed), one question (is A cheaper than B?), its report section and what `compare` pairs."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

import numpy as np

from study.conclusions import paired
from study.paired import compare
from study.sweep.grid import as_list
from study.sweep.plugin import StudyPlugin
from study.sweep.schema import ENGINE, Column, Schema

QUESTION = "Toy: was method A cheaper than method B?"
INSTANCE = ["seed"]


@dataclass(frozen=True)
class Spec:
    method: str
    seed: int = 0
    slower: float = 2.0  # B's cost over A's
    repeat: int = 0

    @property
    def run_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def axes(self) -> dict:
        return {"method": self.method, "seed": self.seed, "repeat": self.repeat}

    def label(self) -> str:
        return f"{self.method} seed={self.seed}"


class Toy(StudyPlugin):
    KIND = "toy_study"
    CONFIG_KEYS = ("methods", "seeds", "slower")
    SCHEMA = ENGINE + Schema("runs", (Column("method", "str"), Column("seed", "int"),
                                      Column("cost", "float")))
    MEASURE_STATUSES = ("ok",)

    def expand(self, raw, source, name, repeats):
        return [Spec(method, seed, raw.get("slower", 2.0), repeat)
                for method in as_list(raw.get("methods", ["A", "B"]))
                for seed in as_list(raw.get("seeds", [0, 1, 2, 3])) for repeat in range(repeats)]

    def spec_from_json(self, text):
        return Spec(**json.loads(text))

    def framework(self, spec):
        return None

    def code_files(self, spec):
        return ["tests/toy_study/plugin.py", "tests/toy_study/measure.py"]

    def summary(self, runs):
        return f"{len(runs)} toy runs"

    def conclusions(self, runs, study):
        ok = runs[runs["status"] == "ok"]
        a, b = ok[ok["method"] == "A"], ok[ok["method"] == "B"]
        c = compare(a, b, INSTANCE, "cost")
        if not c.instances:
            return []
        return [paired("toy.a-vs-b", QUESTION, "Per seed", c, "A", "B", "cost",
                       f"{study}-toy", answer=True)]

    def pairs(self, runs):
        cost = runs["cost"].where(runs["status"] == "ok", np.inf)
        return runs.assign(config=runs["method"], cost=cost), INSTANCE, {"cost": "cost"}

    def subjects(self, runs):
        return [] if runs.empty else ["the toy methods"]


PLUGIN = Toy()
