"""A study config (TOML) -> the list of specs to run.

The engine reads the keys every study has (COMMON_KEYS); the study's plugin expands its own
sections into specs. A list value is an axis: blocks expand to the Cartesian product of their
axes. `[[exclude]]` tables and `--only KEY=VALUE` select by the specs' axis values, where a
parameter may be named bare (`step` for `hp_step`). Everything is checked before anything runs;
an error names the file, the key and what is allowed.

A spec may wait for other runs (a plugin's `prerequisites`): they join the grid just before it,
and it runs as the plugin's `resolve` makes it from their rows.
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import psutil

from convergence_study.errors import InputError
from datasets.files import check_input_file
from study import DEFAULT_KIND
from study.sweep.plugin import STUDIES, load_kind
from study.sweep.schema import _missing

TIMEOUT_ENDS = "timeout_ends_configuration"  # the key, also named in the rows it skips
COMMON_KEYS = ("kind", "name", "description", "repeats", "run_timeout", "memory_budget_gb",
               TIMEOUT_ENDS, "exclude", "adaptive")
ADAPTIVE_KEYS = ("margin", "max_instances", "batch", "time_budget")
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class ConfigError(InputError):
    pass


@dataclass(frozen=True)
class Study:
    """A config, validated: which plugin, the folder name, the runs and their budgets."""

    kind: str
    name: str
    source: str
    specs: tuple
    run_timeout: float
    memory_budget_gb: float
    description: str = ""
    # a configuration whose run timed out on one seed runs no further seed (they are recorded
    # skipped, saying why): a run that cannot reach the target need not say so three times
    timeout_ends_configuration: bool = False
    adaptive: Adaptive | None = None  # None: Adaptive()'s defaults


@dataclass(frozen=True)
class Adaptive:
    """[adaptive]: the settings of study.sweep.adaptive's loop."""

    margin: float = 0.1  # equivalent: the ratio within [1 / (1 + margin), 1 + margin]
    max_instances: int = 12  # replicates (seeds, or repeats) per configuration, in all
    batch: int = 2
    time_budget: float = 15.0


# [adaptive]'s largest values: the sequential projection looks no further than 1000 instances
MAX_INSTANCES = 1000
MAX_BATCH = 100


def parse_adaptive(table, source: str) -> Adaptive:
    if table is None:
        return Adaptive()
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: adaptive: must be a table ([adaptive])")
    unknown(table, ADAPTIVE_KEYS, source, "key of [adaptive]")
    margin = table.get("margin", Adaptive.margin)
    if not positive_number(margin) or margin >= 1:
        raise ConfigError(f"{source}: adaptive: margin: must be a number in (0, 1), e.g. 0.1 "
                          f"for +-10%, got {margin!r}")
    for key, least, most in (("max_instances", 2, MAX_INSTANCES), ("batch", 1, MAX_BATCH)):
        value = table.get(key, getattr(Adaptive, key))
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise ConfigError(f"{source}: adaptive: {key}: must be an integer from {least} to "
                              f"{most}, got {value!r}")
    budget = table.get("time_budget", Adaptive.time_budget)
    if not positive_number(budget):
        raise ConfigError(f"{source}: adaptive: time_budget: must be a number of seconds > 0, "
                          f"got {budget!r}")
    return Adaptive(float(margin), table.get("max_instances", Adaptive.max_instances),
                    table.get("batch", Adaptive.batch), float(budget))


def read_config(path) -> dict:
    path = Path(path)
    try:
        check_input_file(path, "config")
    except InputError as exc:
        raise ConfigError(str(exc)) from None
    try:
        raw = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"config '{path}': cannot read it ({exc.strerror})") from None
    check_integers(raw, str(path))
    return raw


INT64 = (-2**63, 2**63 - 1)
# Runs one config may hold: a folder reads every row to assemble its tables (about 15 ms a row,
# 25 minutes at this size). Counted before the grid is made, so a huge one is refused at once.
MAX_RUNS = 100_000


def check_size(runs: int, source: str) -> None:
    if runs > MAX_RUNS:
        raise ConfigError(f"{source}: grid: {runs} runs, more than the {MAX_RUNS} one study "
                          f"folder is made for (each run is a process and a row file, and every "
                          f"row is read again to assemble the tables); split it into several "
                          f"configs or narrow its axes")


def check_integers(value, where: str) -> None:
    """TOML integers are 64-bit, as every integer column is; Python's reader takes any size."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_integers(item, f"{where}: {key}")
    elif isinstance(value, list):
        for item in value:
            check_integers(item, where)
    elif isinstance(value, int) and not INT64[0] <= value <= INT64[1]:
        raise ConfigError(f"{where}: {value} does not fit a 64-bit integer (TOML's integers "
                          f"run from -2**63 to 2**63 - 1)")


def load_study(path) -> Study:
    return parse_study(read_config(path), str(path))


def parse_study(raw: dict, source: str) -> Study:
    """Validate the common keys, let the study's plugin expand its sections, apply excludes."""

    def fail(key, message):
        raise ConfigError(f"{source}: {key}: {message}")

    kind = raw.get("kind", DEFAULT_KIND)
    if kind not in STUDIES:
        fail("kind", f"unknown study kind {kind!r}; allowed: {', '.join(STUDIES)}")
    plugin = load_kind(kind)
    unknown(raw, COMMON_KEYS + plugin.CONFIG_KEYS, source, "top-level key")
    name = raw.get("name", Path(source).stem)
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        fail("name", f"must be a plain folder name (letters, digits, '.', '_', '-'), "
                     f"got {name!r}")
    description = raw.get("description", "")
    if not isinstance(description, str):
        fail("description", f"must be a string, got {description!r}")
    repeats = raw.get("repeats", 1)
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        fail("repeats", f"must be an integer >= 1, got {repeats!r}")
    run_timeout = raw.get("run_timeout", 600)
    if not positive_number(run_timeout):
        fail("run_timeout", f"must be a number of seconds > 0, got {run_timeout!r}")
    memory = raw.get("memory_budget_gb")
    if memory is not None and not positive_number(memory):
        fail("memory_budget_gb", f"must be a number > 0, got {memory!r}")
    ends = raw.get(TIMEOUT_ENDS, False)
    if not isinstance(ends, bool):
        fail(TIMEOUT_ENDS, f"must be true or false, got {ends!r}")
    adaptive = parse_adaptive(raw.get("adaptive"), source)
    excludes = raw.get("exclude", [])
    if not isinstance(excludes, list) or not all(isinstance(e, dict) for e in excludes):
        fail("exclude", "must be an array of tables ([[exclude]])")

    specs = plugin.expand(raw, source, name, repeats)
    axes = [spec.axes() for spec in specs]
    known = {key for values in axes for key in values}
    present: dict[str, set] = {}  # axis -> the values the runs have, shared by the rules
    for rule in excludes:
        for key in rule:
            if axis_key(known, key) is None:
                fail("exclude", f"unknown axis '{key}'; axes: {', '.join(sorted(known))}")
        problem = unmatched(rule, axes, present)
        if problem:
            fail("exclude", problem)
    specs = [s for s, values in zip(specs, axes, strict=True)
             if not any(matches(values, rule) for rule in excludes)]
    if not specs:
        fail("grid", "the grid is empty (every combination is excluded)")
    problem = plugin.check_grid(specs)
    if problem:
        fail("grid", problem)
    ids = [s.run_id for s in specs]
    if len(set(ids)) != len(ids):
        fail("grid", "the grid contains the same run twice; check for repeated list values")
    specs = with_prerequisites(plugin, specs)
    budget = float(memory) if memory is not None else default_memory_budget_gb()
    return Study(kind, name, source, tuple(specs), float(run_timeout), budget, description,
                 ends, adaptive)


REPLICATE_AXES = ("seed", "repeat")


def configuration(spec) -> str:
    """What a spec is apart from its seed and repeat: the runs of one configuration."""
    return _key(spec.axes())


def _key(axes: dict) -> str:
    return json.dumps({k: v for k, v in axes.items() if k not in REPLICATE_AXES},
                      sort_keys=True, default=str)


@functools.lru_cache(maxsize=65536)
def _configuration_of(spec_from_json, text: str) -> str | None:
    try:
        return configuration(spec_from_json(text))
    except (TypeError, ValueError, KeyError, AttributeError):  # a spec of older code
        return None


def configurations(runs, plugin):
    """Each row's `configuration`, the one key every reader groups runs by, so that two
    configurations are never pooled; a row without a readable spec, by its schema's axes."""
    import pandas as pd

    axes = plugin.SCHEMA.axes
    columns = [c for c in runs.columns if c in axes or c.startswith(tuple(
        a for a in axes if a.endswith("_")))]

    if runs.empty:
        return pd.Series(dtype=object, index=runs.index)
    specs = runs["spec"].to_numpy(object) if "spec" in runs else [None] * len(runs)
    keys = [_configuration_of(plugin.spec_from_json, text) if isinstance(text, str) else None
            for text in specs]
    if any(key is None for key in keys):
        rows = runs[columns].to_dict("records")
        keys = [key or _key({c: None if _missing(v) else v for c, v in row.items()})
                for key, row in zip(keys, rows, strict=True)]
    return pd.Series(keys, index=runs.index, dtype=object)


# a family's JSON column, said by its flat columns where they differ
_FLAT = {"hyperparameters": "hp_", "stopping": "stop_", "dataset_params": "data_",
         "data_params": "data_"}


def distinct_labels(labels, keys, scope=None):
    """Labels (a Series), one per configuration (`keys`): where one label names several
    configurations within a `scope`, each gets the axes that tell them apart ('... [lr=0.005]'),
    so that nothing pools two configurations under one name."""
    import pandas as pd

    scope = [""] * len(labels) if scope is None else scope
    found: dict = {}
    for where, label, key in zip(scope, labels, keys, strict=True):
        found.setdefault((where, label), set()).add(key)
    suffix = {}
    for (where, label), group in found.items():
        if len(group) < 2:
            continue
        axes = {key: json.loads(key) for key in group}
        names = set().union(*axes.values())
        differ = sorted(n for n in names
                        if len({json.dumps(a.get(n), default=str) for a in axes.values()}) > 1)
        differ = [n for n in differ
                  if not (n in _FLAT and any(d.startswith(_FLAT[n]) for d in differ))]
        for key, values in axes.items():
            shown = ", ".join(f"{_bare(n)}={values.get(n)}" for n in differ)
            suffix[(where, label, key)] = f" [{shown}]"
    return pd.Series([label + suffix.get((where, label, key), "")
                      for where, label, key in zip(scope, labels, keys, strict=True)],
                     index=labels.index, dtype=object)


def _bare(axis: str) -> str:
    """hp_step -> step: a parameter by its own name."""
    flat = axis not in _FLAT and axis.startswith(tuple(_FLAT.values()) + ("option_",))
    return axis.split("_", 1)[1] if flat else axis


def default_memory_budget_gb() -> float:
    """80% of the machine's memory: a run is stopped before the kernel's OOM killer chooses."""
    return round(0.8 * psutil.virtual_memory().total / 2**30, 1)


# ---- blocks and axes --------------------------------------------------------------------------

def blocks(raw: dict, key: str, source: str) -> list[dict]:
    found = raw.get(key)
    if not found:
        raise ConfigError(f"{source}: {key}: at least one [[{key}]] table is required")
    if not isinstance(found, list) or not all(isinstance(b, dict) for b in found):
        raise ConfigError(f"{source}: {key}: must be an array of tables ([[{key}]])")
    return found


def expand(block: dict, where: str, value_keys=()) -> list[dict]:
    """A table's points: every list value is an axis, except `value_keys`, whose value is a
    list (a list of lists is then the axis)."""
    axes = []
    for key, value in block.items():
        if key in value_keys:
            values = value if value and isinstance(value, list) and isinstance(value[0], list) \
                else [value]
        else:
            values = as_list(value)
        if not values:
            raise ConfigError(f"{where}: {key} is an empty list")
        axes.append([(key, v) for v in values])
    check_size(math.prod(map(len, axes)), where)
    return [dict(point) for point in itertools.product(*axes)]


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def unknown(table: dict, allowed, source: str, what: str) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{source}: unknown {what} '{key}'; allowed: {', '.join(allowed)}")


def positive_number(value) -> bool:
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and value > 0)


# ---- runs that wait for others ------------------------------------------------------------------

def waits(plugin, spec) -> bool:
    return bool(plugin.prerequisites(spec))


def with_prerequisites(plugin, specs) -> list:
    """The specs, each preceded by the runs it waits for that are not yet listed (once each)."""
    listed = {s.run_id for s in specs}
    out = []
    for spec in specs:
        for first in plugin.prerequisites(spec):
            if first.run_id not in listed:
                listed.add(first.run_id)
                out.append(first)
        out.append(spec)
    return out


def resolved(plugin, specs, rows) -> tuple[list, int]:
    """(the specs as they run, how many wait): one that waits for others is made from their
    rows (a DataFrame or dicts by run_id), or left out while any has none."""
    if not isinstance(rows, dict):  # a runs table
        rows = {r["run_id"]: r for r in rows.to_dict("records")}
    out, waiting = [], 0
    for spec in specs:
        if not waits(plugin, spec):
            out.append(spec)
            continue
        ready = plugin.resolve(spec, rows)
        if ready is None:
            waiting += 1
        else:
            out.append(ready)
    return out, waiting


# ---- selecting by axis values -------------------------------------------------------------------

def axis_key(axes, key: str) -> str | None:
    """The column an axis name refers to: itself, or a parameter's bare name (step = hp_step)."""
    return next((c for c in (key, f"hp_{key}", f"data_{key}") if c in axes), None)


def lookup_axis(axes: dict, key: str):
    column = axis_key(axes, key)
    return axes[column] if column is not None else None


def matches(axes: dict, rule: dict) -> bool:
    for key, wanted in rule.items():
        if lookup_axis(axes, key) not in as_list(wanted):
            return False
    return True


def unmatched(rule: dict, axes: list[dict], present: dict | None = None) -> str | None:
    """Why an [[exclude]] table, or one of its values, matches no run (a typo, most likely);
    None when it matches. `present` keeps each axis's values for the next rule (the default
    study's 30 rules looked them up in its 7,000 runs 64 times: load_study 0.86 -> 0.74 s)."""
    present = {} if present is None else present
    text = "{" + ", ".join(f"{key} = {value!r}" for key, value in rule.items()) + "}"
    for key, wanted in rule.items():
        if key not in present:
            present[key] = {lookup_axis(values, key) for values in axes}
        absent = [w for w in as_list(wanted) if w not in present[key]]
        if absent:
            shown = sorted(map(repr, present[key]))
            return (f"{text}: no run has {key} = {absent[0]!r}; its values: "
                    f"{', '.join(shown[:12])}{', ...' if len(shown) > 12 else ''}")
    if not any(matches(values, rule) for values in axes):
        return f"{text} matches no run (no run has all of these values at once)"
    return None


def parse_only(items) -> dict:
    """--only key=value [...] (repeatable) -> {key: [values]}; values are compared as text."""
    out: dict[str, list[str]] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--only '{item}' is not KEY=VALUE")
        out.setdefault(key, []).append(value.lower() if value.lower() in ("true", "false")
                                       else value)
    return out


def axis_text(value) -> str:
    """An axis value as --only compares it: booleans as true/false, as TOML writes them."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def select(specs, only: dict) -> list:
    """The specs matching every --only key; matching nothing is an error (a typo, most likely)."""
    if not only:
        return list(specs)
    known = {key for spec in specs for key in spec.axes()}
    for key in only:
        if axis_key(known, key) is None:
            raise InputError(f"--only: unknown key '{key}'; keys: {', '.join(sorted(known))}")
    chosen = [s for s in specs
              if all(axis_text(lookup_axis(s.axes(), k)) in values
                     for k, values in only.items())]
    if not chosen:
        wanted = " ".join(f"{k}={v}" for k, vs in only.items() for v in vs)
        raise InputError(f"--only {wanted}: no run of the study matches")
    return chosen
