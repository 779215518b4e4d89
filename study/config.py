"""Study configs: a TOML file describes a grid of runs; lists expand to a Cartesian product.

Every key, name and value is checked before anything runs, and an error names the file, the key
and what is allowed. A RunSpec is one point of the grid; its id is a stable hash of its content,
so a changed config reruns only what changed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from datasets import DATASETS, validate_dataset
from datasets.errors import InputError
from optimizers import INITS, OPTIMIZERS, build_rules, make_optimizer
from optimizers.backends.numpy import DTYPES
from optimizers.objective import FORMULATIONS

TOP_LEVEL = ("name", "description", "seeds", "repeats", "run_timeout", "memory_budget_gb",
             "init", "stopping", "datasets", "optimizers", "backends", "exclude")
STOPPING_KEYS = ("tol", "grad_tol", "rel_tol", "patience", "exact_repeat", "max_iter",
                 "time_budget")
DEFAULT_STOPPING = {"tol": 1e-8, "max_iter": 100_000}  # as the regress command's defaults
BACKEND_OPTIONS = {
    "numpy": {"dtype": DTYPES, "formulation": FORMULATIONS},
    "tensorflow": {"dtype": DTYPES, "formulation": FORMULATIONS, "device": ("cpu", "gpu"),
                   "feed": ("feed", "resident", "fused", "tf1"), "xla": (False, True)},
}
VALUE_KEYS = ("features", "labels")  # list-valued parameters: a list is one value, not an axis
SEEDED_DATASETS = ("eve", "synthetic")


@dataclass(frozen=True)
class RunSpec:
    """One run of a study: everything needed to repeat it in a fresh process."""

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

    @property
    def run_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> RunSpec:
        return cls(**json.loads(text))

    def data_params(self) -> dict:
        """The dataset's parameters; a seeded data set takes the run's seed unless it sets one."""
        if self.dataset in SEEDED_DATASETS and "seed" not in self.dataset_params:
            return {**self.dataset_params, "seed": self.seed}
        return dict(self.dataset_params)

    def axes(self) -> dict:
        """The flat axis values: what exclusions and --only match, and the results' columns."""
        return {
            "study": self.study, "dataset": self.dataset,
            "dataset_params": json.dumps(self.dataset_params, sort_keys=True),
            **{f"data_{k}": _scalar(v) for k, v in self.dataset_params.items()},
            "optimizer": self.optimizer,
            "hyperparameters": json.dumps(self.hyperparameters, sort_keys=True),
            **{f"hp_{k}": v for k, v in self.hyperparameters.items()},
            "backend": self.backend, "device": self.backend_options.get("device", "cpu"),
            "feed": self.backend_options.get("feed"), "xla": self.backend_options.get("xla"),
            "formulation": self.backend_options.get("formulation", "data"),
            "dtype": self.dtype, "init": self.init, "seed": self.seed, "repeat": self.repeat,
        }

    def label(self) -> str:
        """A short human name for progress bars and logs."""
        hp = ",".join(f"{k}={v}" for k, v in self.hyperparameters.items())
        opts = ",".join(f"{k}={v}" for k, v in self.backend_options.items())
        return (f"{self.dataset} {self.optimizer}({hp}) {self.backend}({opts}) {self.dtype} "
                f"seed={self.seed} rep={self.repeat}")


def _scalar(value):
    return json.dumps(value) if isinstance(value, (list, dict)) else value


@dataclass(frozen=True)
class Study:
    name: str
    path: str
    specs: tuple[RunSpec, ...]
    run_timeout: float
    memory_budget_gb: float | None
    description: str = ""


class ConfigError(InputError):
    pass


def load_study(path) -> Study:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config '{path}' does not exist or is not a file")
    try:
        raw = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    return parse_study(raw, str(path))


def parse_study(raw: dict, source: str) -> Study:
    where = source

    def fail(key, message):
        raise ConfigError(f"{where}: {key}: {message}")

    _unknown(raw, TOP_LEVEL, where, "top-level key")
    name = raw.get("name", Path(source).stem)
    if not isinstance(name, str) or not name or "/" in name:
        fail("name", f"must be a non-empty string without '/', got {name!r}")
    seeds = _list(raw.get("seeds", [0]))
    for seed in seeds:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            fail("seeds", f"each seed must be an integer >= 0, got {seed!r}")
    repeats = raw.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        fail("repeats", f"must be an integer >= 1, got {repeats!r}")
    run_timeout = raw.get("run_timeout", 600)
    if not _positive_number(run_timeout):
        fail("run_timeout", f"must be a number of seconds > 0, got {run_timeout!r}")
    memory = raw.get("memory_budget_gb")
    if memory is not None and not _positive_number(memory):
        fail("memory_budget_gb", f"must be a number > 0, got {memory!r}")
    inits = _list(raw.get("init", "zeros"))
    for init in inits:
        if init not in INITS:
            fail("init", f"unknown init {init!r}; allowed: {', '.join(INITS)}")

    stopping = raw.get("stopping", {})
    if not isinstance(stopping, dict):
        fail("stopping", "must be a table")
    _unknown(stopping, STOPPING_KEYS, where, "key in [stopping]")
    stopping = {**DEFAULT_STOPPING, **stopping}
    try:
        build_rules(**stopping)
    except InputError as exc:
        fail("stopping", str(exc))
    except TypeError as exc:
        fail("stopping", f"wrong type: {exc}")

    checks = {"datasets": (DATASETS, validate_dataset), "optimizers": (OPTIMIZERS, make_optimizer),
              "backends": (BACKEND_OPTIONS, _check_backend)}
    points = {}
    for section, (names, check) in checks.items():
        points[section] = [point for block in _blocks(raw, section, where)
                           for point in _expand_block(block, where, section, names)]
        for point_name, params in points[section]:
            try:
                check(point_name, **params)
            except InputError as exc:
                fail(section, str(exc))
            except TypeError as exc:
                fail(section, f"wrong type: {exc}")

    excludes = raw.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        fail("exclude", "must be an array of tables ([[exclude]])")

    grid = []
    for (dname, dparams), (oname, hparams), (bname, bparams), init, seed, repeat in \
            itertools.product(points["datasets"], points["optimizers"], points["backends"],
                              inits, seeds, range(repeats)):
        bparams = dict(bparams)
        dtype = bparams.pop("dtype", "float64")
        grid.append(RunSpec(name, dname, dict(dparams), oname, dict(hparams), bname, bparams,
                            dtype, init, seed, repeat, dict(stopping)))
    known = {key for spec in grid for key in spec.axes()}
    for rule in excludes:
        for key in rule:
            if axis_key(known, key) is None and not _known_axis(key):
                fail("exclude", f"unknown axis '{key}'; axes: {', '.join(sorted(known))}")
    specs = [s for s in grid if not any(_matches(s.axes(), rule) for rule in excludes)]
    if not specs:
        fail("grid", "the grid is empty (every combination is excluded)")
    ids = [s.run_id for s in specs]
    if len(set(ids)) != len(ids):
        fail("grid", "the grid contains the same run twice; check for repeated list values")
    return Study(name, source, tuple(specs), float(run_timeout),
                 float(memory) if memory is not None else None, raw.get("description", ""))


def _known_axis(key: str) -> bool:
    return key in ("study", "dataset", "optimizer", "backend", "device", "feed", "xla", "dtype",
                   "init", "seed", "repeat") or key.startswith(("hp_", "data_"))


def _matches(axes: dict, rule: dict) -> bool:
    for key, wanted in rule.items():
        value = lookup_axis(axes, key)
        options = wanted if isinstance(wanted, list) else [wanted]
        if value not in options:
            return False
    return True


def axis_key(axes, key: str) -> str | None:
    """The column an axis name refers to: itself, or a parameter's bare name (step = hp_step)."""
    return next((c for c in (key, f"hp_{key}", f"data_{key}") if c in axes), None)


def lookup_axis(axes: dict, key: str):
    column = axis_key(axes, key)
    return axes[column] if column is not None else None


def _unknown(table: dict, allowed, where: str, what: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown {what} '{key}'; allowed: {', '.join(allowed)}")


def _blocks(raw: dict, key: str, where: str) -> list[dict]:
    blocks = raw.get(key)
    if not blocks:
        raise ConfigError(f"{where}: {key}: at least one [[{key}]] table is required")
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise ConfigError(f"{where}: {key}: must be an array of tables ([[{key}]])")
    return blocks


def _expand_block(block: dict, where: str, key: str, names) -> list[tuple[str, dict]]:
    """One [[datasets]] / [[optimizers]] / [[backends]] table -> its (name, params) points."""
    name = block.get("name")
    if not isinstance(name, str) or name not in names:
        raise ConfigError(f"{where}: {key}: unknown name {name!r}; allowed: {', '.join(names)}")
    params = {k: v for k, v in block.items() if k != "name"}
    axes = []
    for k, v in params.items():
        if k in VALUE_KEYS:
            values = v if v and isinstance(v, list) and isinstance(v[0], list) else [v]
        else:
            values = _list(v)
        if not values:
            raise ConfigError(f"{where}: {key}: '{name}' {k} is an empty list")
        axes.append([(k, value) for value in values])
    return [(name, dict(point)) for point in itertools.product(*axes)]


def _check_backend(name: str, **options) -> None:
    allowed = BACKEND_OPTIONS[name]
    for key, value in options.items():
        if key not in allowed:
            raise InputError(f"backend '{name}' has no option '{key}'; allowed: "
                             f"{', '.join(allowed)}")
        if value not in allowed[key] or isinstance(value, bool) != isinstance(allowed[key][0],
                                                                                bool):
            raise InputError(f"{name} {key} = {value!r} is not allowed; allowed: "
                             f"{', '.join(map(str, allowed[key]))}")


def _list(value) -> list:
    return value if isinstance(value, list) else [value]


def _positive_number(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)
