"""The feed-mode study's config: calls, device, seed, check_n and [[grid]] tables of modes,
dtypes, n, grappler variants and repeats (each run = mode x grappler x dtype x n x repeat; a
grid's own `repeats` replaces the study's; a run in two grids runs once). `python -m study
feedmode` flags replace the same key everywhere (`with_flags`)."""

from __future__ import annotations

import math
from itertools import product

from convergence_study.errors import InputError
from study.feedmode.model import DEVICES, DTYPES, GRAPPLER, MODES
from study.feedmode.spec import Spec
from study.frameworks.registry import FRAMEWORKS
from study.sweep.grid import ConfigError, check_size, positive_number

MAX_CALLS = 100_000
CONFIG_KEYS = ("calls", "device", "seed", "check_n", "grid")
GRID_KEYS = ("name", "modes", "dtypes", "n", "grappler", "repeats")
DEFAULTS = {"n": [60000], "dtypes": ["float64"], "modes": list(MODES), "grappler": ["default"],
            "calls": 10, "device": "cpu", "seed": 0, "check_n": 16}
FLAGS = {"n": "--n", "dtypes": "--dtype", "modes": "--modes", "grappler": "--grappler",
         "calls": "--calls", "device": "--device", "seed": "--seed", "check_n": "--check-n",
         "run_timeout": "--run-timeout", "memory_budget_gb": "--memory-budget-gb"}


def check_list(value, where: str, kind, allowed=None) -> list:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ConfigError(f"{where} is empty")
    for v in values:
        if kind is int and (not isinstance(v, int) or isinstance(v, bool)):
            raise ConfigError(f"{where}: '{v}' is not an integer")
        if kind is str and not isinstance(v, str):
            raise ConfigError(f"{where}: '{v}' is not a string")
        if allowed is not None and v not in allowed:
            raise ConfigError(f"{where}: unknown value '{v}'; allowed: {', '.join(allowed)}")
        if kind is int and v <= 0:
            raise ConfigError(f"{where}: {v} must be a positive integer")
    return values


def check_value(key: str, value, where: str):
    """One top-level value, checked; `where` names the flag or the file and key."""
    if key in ("calls", "check_n", "seed"):
        least, what = (0, "a non-negative") if key == "seed" else (1, "a positive")
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ConfigError(f"{where} must be {what} integer, not {value!r}")
        if key == "calls" and value > MAX_CALLS:
            raise ConfigError(f"{where}: {value} calls, more than {MAX_CALLS} (each timed call "
                              "is a row of calls.parquet; the run would end at its timeout)")
    elif key == "device":
        if value not in DEVICES:
            raise ConfigError(f"{where}: unknown device '{value}'; allowed: {', '.join(DEVICES)}")
    elif key in ("run_timeout", "memory_budget_gb"):
        if not positive_number(value):
            raise ConfigError(f"{where} must be a positive number, not {value!r}")
    return value


GRID_CHECKS = {"n": (int, None), "dtypes": (str, DTYPES), "modes": (str, tuple(MODES)),
               "grappler": (str, tuple(GRAPPLER))}


def with_flags(raw: dict, flags: dict) -> dict:
    """The config with command-line values in place of the same keys (in every [[grid]]);
    each flag's value is checked first, so that an error names the flag."""
    flags = {k: v for k, v in flags.items() if v is not None}
    for key, value in flags.items():
        if key in GRID_CHECKS:
            check_list(value, FLAGS[key], *GRID_CHECKS[key])
        else:
            check_value(key, value, FLAGS[key])
    raw = dict(raw)
    raw.update({k: v for k, v in flags.items() if k not in GRID_CHECKS})
    grid_flags = {k: v for k, v in flags.items() if k in GRID_CHECKS}
    if grid_flags:
        raw["grid"] = [{**grid, **grid_flags} for grid in (raw.get("grid") or [{}])]
    return raw


def expand_specs(raw: dict, source: str, name: str, repeats: int) -> list[Spec]:
    """Specs of the config; grappler variants other than 'default' apply to the TF1 modes only,
    so other combinations of a grid are left out (a grid left with no run is an error)."""
    top = {k: raw.get(k, DEFAULTS[k]) for k in ("calls", "device", "seed", "check_n")}
    for key, value in top.items():
        check_value(key, value, f"{source}: {key}")
    grids = raw.get("grid") or [{}]
    if not isinstance(grids, list) or not all(isinstance(g, dict) for g in grids):
        raise ConfigError(f"{source}: 'grid' must be an array of tables ([[grid]])")
    specs = {}
    for number, grid in enumerate(grids, 1):
        for key in grid:
            if key not in GRID_KEYS:
                raise ConfigError(f"{source}: unknown key '{key}' in [[grid]] {number}; "
                                  f"allowed: {', '.join(GRID_KEYS)}")
        where = f"{source}: [[grid]] {grid.get('name', number)}"
        defaults = {**DEFAULTS, "modes": modes_on(top["device"])}
        axes = {k: check_list(grid.get(k, defaults[k]), f"{where}: {k}", *GRID_CHECKS[k])
                for k in GRID_CHECKS}
        for mode in axes["modes"]:
            framework = FRAMEWORKS[MODES[mode].framework]
            if top["device"] not in framework.devices:
                raise ConfigError(f"{where}: mode '{mode}' runs on {framework.title}, which has "
                                  f"no {top['device']} device (it runs on: "
                                  f"{', '.join(framework.devices)})")
        grid_repeats = grid.get("repeats", repeats)
        if isinstance(grid_repeats, bool) or not isinstance(grid_repeats, int) \
                or grid_repeats < 1:
            raise ConfigError(f"{where}: repeats must be an integer >= 1, got {grid_repeats!r}")
        check_size(math.prod(map(len, axes.values())) * grid_repeats, where)
        produced = 0
        for mode, variant, dtype, n, repeat in product(axes["modes"], axes["grappler"],
                                                       axes["dtypes"], axes["n"],
                                                       range(grid_repeats)):
            if variant != "default" and MODES[mode].api != "tf1":
                continue
            spec = Spec(mode=mode, dtype=dtype, n=n, grappler=variant, repeat=repeat, **top)
            specs.setdefault(spec.run_id, spec)
            produced += 1
        if not produced:
            raise InputError(f"{where}: no run left: grappler variants other than 'default' "
                             f"apply to the TF1 modes only ({', '.join(tf1_modes())})")
    return list(specs.values())


def modes_on(device: str) -> list[str]:
    """The modes a grid runs by default: those whose framework runs on the device."""
    return [name for name, mode in MODES.items()
            if device in FRAMEWORKS[mode.framework].devices]


def tf1_modes() -> list[str]:
    return [name for name, mode in MODES.items() if mode.api == "tf1"]
