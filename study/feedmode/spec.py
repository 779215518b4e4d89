"""One run of the feed-mode study: a mode (and so its framework), its graph-optimisation variant,
dtype and N."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from study.feedmode.model import MODES


@dataclass(frozen=True)
class Spec:
    """Its hash is the run id: the same spec is never measured twice (unless its code changed)."""

    mode: str
    dtype: str
    n: int
    grappler: str = "default"
    calls: int = 10
    device: str = "cpu"
    seed: int = 0
    check_n: int = 16
    repeat: int = 0

    @property
    def run_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def label(self) -> str:
        variant = "" if self.grappler == "default" else f" grappler={self.grappler}"
        again = f" rep={self.repeat}" if self.repeat else ""
        return f"{self.mode} {self.dtype} n={self.n}{variant}{again}"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Spec:
        return cls(**json.loads(text))

    def axes(self) -> dict:
        mode = MODES[self.mode]
        return {**asdict(self), "framework": mode.framework, "api": mode.api, "feed": mode.feed,
                "model": mode.model, "xla": mode.xla}
