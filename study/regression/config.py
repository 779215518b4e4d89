"""The regression study's config sections: [[datasets]], [[optimizers]], [[backends]], seeds,
init and [stopping]. Every list value is an axis; the grid is the Cartesian product of the
sections with seeds and repeats (the engine's `study.sweep.grid` reads the common keys and
applies [[exclude]])."""

from __future__ import annotations

import itertools

from convergence_study.errors import InputError
from datasets import DATASETS, validate_dataset, values
from optimizers import INITS, OPTIMIZERS, PREFIXES, build_rules, make_optimizer, prefix_of
from optimizers.from_file import absolute, declared_name, is_file_name
from study.frameworks.registry import BACKENDS, backend
from study.regression.spec import RunSpec
from study.sweep import tuning as protocol
from study.sweep.grid import ConfigError, as_list, blocks, check_size, expand, unknown

CONFIG_KEYS = ("seeds", "init", "stopping", "tuning", "datasets", "optimizers", "backends")
STOPPING_KEYS = ("tol", "grad_tol", "rel_tol", "patience", "exact_repeat", "max_iter",
                 "time_budget")
DEFAULT_STOPPING = {"tol": 1e-8, "max_iter": 100_000}  # as the regress command's defaults
VALUE_KEYS = ("features", "labels")  # list-valued parameters: a list is one value, not an axis


def check_backend(name: str, **options) -> None:
    """A [[backends]] block's options against the backend's declaration (its framework is
    neither imported nor required here: a config may name a backend this machine lacks, and its
    runs say so)."""
    backend(name).check(options)


SECTIONS = {"datasets": (DATASETS, validate_dataset), "optimizers": (OPTIMIZERS, make_optimizer),
            "backends": (BACKENDS, check_backend)}  # name -> (its names, its point's check)


def expand_specs(raw: dict, source: str, name: str, repeats: int) -> list[RunSpec]:
    """The config's specs, each section checked in turn (the first error is the one said)."""
    seeds = check_seeds(raw.get("seeds", [0]), source)
    inits = check_inits(raw.get("init", "zeros"), source)
    stopping = check_stopping(raw.get("stopping", {}), source, "stopping", DEFAULT_STOPPING,
                              "[stopping]")
    study_tuning = table_of(raw, "tuning", "", source)
    datasets = section_points(raw, "datasets", source)
    optimizers, apart = optimizer_points(raw, source, stopping, study_tuning, seeds)
    backends = section_points(raw, "backends", source)
    for prefix, points in apart.items():
        for error in PREFIXES[prefix].check_apart(points, raw.get("run_timeout")):
            if error:
                fail(source, "optimizers", error)
    check_size(len(datasets) * len(optimizers) * len(backends) * len(inits) * len(seeds)
               * repeats, source)
    specs = []
    for (dname, dparams), (oname, hparams, own, tuning), (bname, bparams), init, seed, repeat \
            in itertools.product(datasets, optimizers, backends, inits, seeds, range(repeats)):
        bparams = dict(bparams)
        dtype = bparams.pop("dtype", "float64")
        specs.append(RunSpec(name, dname, dict(dparams), oname, dict(hparams), bname, bparams,
                             dtype, init, seed, repeat, dict(own or stopping),
                             dict(tuning or {})))
    return specs


def fail(source: str, key: str, message: str):
    raise ConfigError(f"{source}: {key}: {message}")


def checked(source: str, key: str, value, spec):
    """A value through the one validation layer (datasets.values), as a config error."""
    try:
        return spec.check(key, value)
    except InputError as exc:
        raise ConfigError(f"{source}: {exc}") from None


def check_seeds(value, source: str) -> list:
    return _axis(value, source, "seeds", "seed, e.g. seeds = [0]", "seeds: each seed",
                 values.integer(0))


def check_inits(value, source: str) -> list:
    return _axis(value, source, "init", "one, e.g. init = \"zeros\"", "init",
                 values.choice(*INITS))


def _axis(value, source: str, key: str, example: str, each: str, spec) -> list:
    """A top-level axis (a value or a list of them), never empty, each value checked."""
    found = as_list(value)
    if not found:
        fail(source, key, f"is an empty list; give at least one {example}")
    for item in found:
        checked(source, each, item, spec)
    return found


def check_stopping(table, source: str, where: str, base: dict, label: str | None = None) -> dict:
    """A [stopping] table (the study's, an optimizer block's, a tuning budget) over `base`."""
    if not isinstance(table, dict):
        fail(source, where, "must be a table")
    unknown(table, STOPPING_KEYS, source, f"key in {label or where}")
    rules = {**base, **{k: None if v == "off" else v for k, v in table.items()}}
    _call(source, where, build_rules, **rules)
    return rules


def _call(source: str, where: str, check, *args, **kwargs):
    """A check's InputError or TypeError (a value of the wrong type) as a config error."""
    try:
        return check(*args, **kwargs)
    except InputError as exc:
        fail(source, where, str(exc))
    except TypeError as exc:
        fail(source, where, f"wrong type: {exc}")


def table_of(parent: dict, key: str, where: str, source: str) -> dict:
    value = parent.get(key, {})
    if not isinstance(value, dict):
        fail(source, f"{where}: {key}" if where else key, f"must be a table, got {value!r}")
    return value


def check_tuning(table, source: str, where: str, rules: dict, seeds: list) -> dict:
    """A tuned block's protocol: the study's [tuning] under the block's own keys."""
    if not isinstance(table, dict) or not table:
        fail(source, where, f"{protocol.PARAMETER} = '{protocol.TUNED}' needs a [tuning] table "
                            f"(or the block's tuning = {{...}}) with {', '.join(protocol.KEYS)}")
    unknown(table, protocol.KEYS, source, f"key in {where}: tuning")
    for key in ("grid", "seed", "stopping"):
        if key not in table:
            fail(source, f"{where}: tuning", f"'{key}' is required")
    grid = table["grid"]
    if not isinstance(grid, list) or len(grid) < 2 or not all(
            isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0
            for r in grid) or sorted(set(grid)) != grid:
        fail(source, f"{where}: tuning: grid", f"must be at least two increasing rates > 0 "
                                               f"(log-spaced, e.g. [1e-3, 1e-2, 1e-1]), got "
                                               f"{grid!r}")
    seed = checked(source, f"{where}: tuning: seed", table["seed"], values.integer(0))
    if seed in seeds:
        fail(source, f"{where}: tuning: seed", f"{seed} is one of the measured seeds {seeds}; "
                                               "the held-apart seed must be another")
    criterion = checked(source, f"{where}: tuning: criterion",
                        table.get("criterion", "iterations"), values.choice(*protocol.CRITERIA))
    check_stopping(table["stopping"], source, f"{where}: tuning: stopping", rules,
                   f"{where}: tuning: stopping")
    return {"role": protocol.TUNED, "grid": [float(r) for r in grid], "seed": seed,
            "stopping": {k: None if v == "off" else v for k, v in table["stopping"].items()},
            "criterion": criterion}


def own_file(name: str, source: str, section: str) -> str:
    """A user's own `path.py:Name`, its file made absolute (against the working directory) for
    the runs, each in its own process."""
    return _call(source, section, absolute, name)


def check_point(source: str, section: str, block_name: str, point: dict) -> None:
    """One point of a block through its section's own check (the data set's, the optimizer's
    constructor, the backend's declaration)."""
    _call(source, section, SECTIONS[section][1], block_name, **point)


def section_points(raw: dict, section: str, source: str) -> list[tuple[str, dict]]:
    """The [[datasets]] or [[backends]] blocks' points, each checked: (name, parameters)."""
    names = SECTIONS[section][0]
    points = []
    for block in blocks(raw, section, source):
        block_name = block.get("name")
        if section == "datasets" and is_file_name(block_name):  # a user's own loader
            block_name = own_file(block_name, source, section)
        elif not isinstance(block_name, str) or block_name not in names:
            fail(source, section, f"unknown name {block_name!r}; allowed: {', '.join(names)}")
        params = {k: v for k, v in block.items() if k not in ("name", "stopping")}
        for point in expand(params, f"{source}: {section}: '{block_name}'", VALUE_KEYS):
            check_point(source, section, block_name, point)
            points.append((block_name, point))
    return points


def optimizer_points(raw: dict, source: str, stopping: dict, study_tuning: dict,
                     seeds: list) -> tuple[list, dict]:
    """The [[optimizers]] blocks' points, each checked: (name, hyperparameters, the block's own
    stopping rules or None, its tuning protocol or None), and the points left to check apart.
    A block may bring its own rules (the original program's: tol "off", exact_repeat = true)
    over the study's [stopping]. A user's own `path.py:Name` is checked as ours are; a library's
    class (keras:Adam, torch:LBFGS) by its own object: torch's here, Keras's all at once in a
    child process once the backends are checked (its class's `check_apart`), by prefix."""
    points, apart = [], {}
    for block in blocks(raw, "optimizers", source):
        block_name = block.get("name")
        library = prefix_of(block_name) if isinstance(block_name, str) else None
        if is_file_name(block_name):  # a user's own optimizer
            block_name = own_file(block_name, source, "optimizers")
        elif not isinstance(block_name, str) or (block_name not in OPTIMIZERS and not library):
            allowed = [*OPTIMIZERS, *(f"{p}<Class>" for p in PREFIXES), "path/to/file.py:Name"]
            fail(source, "optimizers", f"unknown name {block_name!r}; allowed: "
                                       f"{', '.join(allowed)}")
        where = f"optimizers: '{block_name}'"
        own = (check_stopping(block["stopping"], source, f"{where}: stopping", stopping)
               if "stopping" in block else None)
        params = {k: v for k, v in block.items() if k not in ("name", "stopping", "tuning")}
        block_points = expand(params, f"{source}: {where}", VALUE_KEYS)
        tuned = any(p.get(protocol.PARAMETER) == protocol.TUNED for p in block_points)
        if "tuning" in block and not tuned:
            fail(source, f"{where}: tuning", f"is given, but {protocol.PARAMETER} is not "
                                             f"'{protocol.TUNED}'")
        tuning = (check_tuning({**study_tuning, **table_of(block, "tuning", where, source)},
                               source, where, own or stopping, seeds) if tuned else None)
        for point in block_points:
            asks = tuning is not None and point.get(protocol.PARAMETER) == protocol.TUNED
            for candidate in ([{**point, protocol.PARAMETER: rate} for rate in tuning["grid"]]
                              if asks else [point]):
                if library and PREFIXES[library].check_apart:
                    apart.setdefault(library, []).append((block_name, candidate))
                else:
                    check_point(source, "optimizers", block_name, candidate)
            points.append((block_name, point, own, tuning if asks else None))
    check_labels([name for name, *_ in points], source)
    return points, apart


def check_labels(names: list[str], source: str) -> None:
    """Two files whose optimizers declare one name would be one optimizer in every table."""
    seen = {}
    for name in dict.fromkeys(n for n in names if is_file_name(n)):
        other = seen.setdefault(declared_name(name), name)
        if other != name:
            fail(source, "optimizers", f"'{other}' and '{name}' both declare the name "
                                       f"'{declared_name(name)}'; give each its own `name`")
