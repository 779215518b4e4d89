"""The regression study's config sections: [[datasets]], [[optimizers]], [[backends]], seeds,
init and [stopping]. Every list value is an axis; the grid is the Cartesian product of the
sections with seeds and repeats (the engine's `study.sweep.grid` reads the common keys and
applies [[exclude]])."""

from __future__ import annotations

import itertools
import math

from datasets import DATASETS, validate_dataset, values
from datasets.errors import InputError
from optimizers import INITS, KERAS_PREFIX, OPTIMIZERS, PREFIXES, build_rules, make_optimizer
from optimizers.backends.registry import BACKENDS, backend
from optimizers.keras_optimizer import check_optimizers as check_keras_optimizers
from study.regression.spec import RunSpec
from study.sweep import tuning as protocol
from study.sweep.grid import ConfigError, as_list, blocks, check_size, expand, unknown

CONFIG_KEYS = ("seeds", "init", "stopping", "tuning", "datasets", "optimizers", "backends")
STOPPING_KEYS = ("tol", "grad_tol", "rel_tol", "patience", "exact_repeat", "max_iter",
                 "time_budget")
DEFAULT_STOPPING = {"tol": 1e-8, "max_iter": 100_000}  # as the regress command's defaults
VALUE_KEYS = ("features", "labels")  # list-valued parameters: a list is one value, not an axis


def expand_specs(raw: dict, source: str, name: str, repeats: int) -> list[RunSpec]:
    def fail(key, message):
        raise ConfigError(f"{source}: {key}: {message}")

    def checked(key, value, spec):
        """A value through the one validation layer (datasets.values), as a config error."""
        try:
            return spec.check(key, value)
        except InputError as exc:
            raise ConfigError(f"{source}: {exc}") from None

    seeds = as_list(raw.get("seeds", [0]))
    if not seeds:
        fail("seeds", "is an empty list; give at least one seed, e.g. seeds = [0]")
    for seed in seeds:
        checked("seeds: each seed", seed, values.integer(0))
    inits = as_list(raw.get("init", "zeros"))
    if not inits:
        fail("init", "is an empty list; give at least one, e.g. init = \"zeros\"")
    for init in inits:
        checked("init", init, values.choice(*INITS))

    def check_stopping(table, where: str, base: dict, label: str | None = None) -> dict:
        if not isinstance(table, dict):
            fail(where, "must be a table")
        unknown(table, STOPPING_KEYS, source, f"key in {label or where}")
        rules = {**base, **{k: None if v == "off" else v for k, v in table.items()}}
        try:
            build_rules(**rules)
        except InputError as exc:
            fail(where, str(exc))
        except TypeError as exc:
            fail(where, f"wrong type: {exc}")
        return rules

    stopping = check_stopping(raw.get("stopping", {}), "stopping", DEFAULT_STOPPING,
                              "[stopping]")

    def table_of(parent: dict, key: str, where: str) -> dict:
        value = parent.get(key, {})
        if not isinstance(value, dict):
            fail(f"{where}: {key}" if where else key, f"must be a table, got {value!r}")
        return value

    study_tuning = table_of(raw, "tuning", "")

    def check_tuning(table, where: str, rules: dict) -> dict:
        """A tuned block's protocol: the study's [tuning] under the block's own keys."""
        if not isinstance(table, dict) or not table:
            fail(where, f"{protocol.PARAMETER} = '{protocol.TUNED}' needs a [tuning] table "
                        f"(or the block's tuning = {{...}}) with {', '.join(protocol.KEYS)}")
        unknown(table, protocol.KEYS, source, f"key in {where}: tuning")
        for key in ("grid", "seed", "stopping"):
            if key not in table:
                fail(f"{where}: tuning", f"'{key}' is required")
        grid = table["grid"]
        if not isinstance(grid, list) or len(grid) < 2 or not all(
                isinstance(r, (int, float)) and not isinstance(r, bool) and r > 0
                for r in grid) or sorted(set(grid)) != grid:
            fail(f"{where}: tuning: grid", f"must be at least two increasing rates > 0 "
                                           f"(log-spaced, e.g. [1e-3, 1e-2, 1e-1]), got {grid!r}")
        seed = checked(f"{where}: tuning: seed", table["seed"], values.integer(0))
        if seed in seeds:
            fail(f"{where}: tuning: seed", f"{seed} is one of the measured seeds {seeds}; the "
                                           "held-apart seed must be another")
        criterion = checked(f"{where}: tuning: criterion", table.get("criterion", "iterations"),
                            values.choice(*protocol.CRITERIA))
        check_stopping(table["stopping"], f"{where}: tuning: stopping", rules,
                       f"{where}: tuning: stopping")
        return {"role": protocol.TUNED, "grid": [float(r) for r in grid], "seed": seed,
                "stopping": {k: None if v == "off" else v for k, v in table["stopping"].items()},
                "criterion": criterion}

    checks = {"datasets": (DATASETS, validate_dataset), "optimizers": (OPTIMIZERS, make_optimizer),
              "backends": (BACKENDS, check_backend)}
    points, keras_points = {}, []
    for section, (names, check) in checks.items():
        points[section] = []
        for block in blocks(raw, section, source):
            block_name = block.get("name")
            # a library's class by name (keras:Adam, torch:LBFGS): its own object checks it,
            # Keras's in a child process (see check_keras_optimizers), torch's here
            library = section == "optimizers" and isinstance(block_name, str) \
                and block_name.startswith(tuple(PREFIXES))
            keras = library and block_name.startswith(KERAS_PREFIX)
            if not isinstance(block_name, str) or (block_name not in names and not library):
                allowed = [*names, *(f"{p}<Class>" for p in PREFIXES)] \
                    if section == "optimizers" else names
                fail(section, f"unknown name {block_name!r}; allowed: {', '.join(allowed)}")
            own_keys = ("name", "stopping", *(("tuning",) if section == "optimizers" else ()))
            params = {k: v for k, v in block.items() if k not in own_keys}
            # An optimizer block may bring its own rules (e.g. the original program's: tol
            # "off", exact_repeat = true), over the study's [stopping].
            own = (check_stopping(block["stopping"], f"{section}: '{block_name}': stopping",
                                  stopping) if section == "optimizers" and "stopping" in block
                   else None)
            where = f"{section}: '{block_name}'"
            block_points = expand(params, f"{source}: {where}", VALUE_KEYS)
            tuned = section == "optimizers" and any(
                p.get(protocol.PARAMETER) == protocol.TUNED for p in block_points)
            if section == "optimizers" and "tuning" in block and not tuned:
                fail(f"{where}: tuning", f"is given, but {protocol.PARAMETER} is not "
                                         f"'{protocol.TUNED}'")
            tuning = (check_tuning({**study_tuning, **table_of(block, "tuning", where)}, where,
                                   own or stopping) if tuned else None)
            for point in block_points:
                asks = tuning is not None and point.get(protocol.PARAMETER) == protocol.TUNED
                for candidate in ([{**point, protocol.PARAMETER: rate} for rate in
                                   tuning["grid"]] if asks else [point]):
                    if keras:  # all at once, in a child process (see check_keras_optimizers)
                        keras_points.append((block_name, candidate))
                        continue
                    try:
                        check(block_name, **candidate)
                    except InputError as exc:
                        fail(section, str(exc))
                    except TypeError as exc:
                        fail(section, f"wrong type: {exc}")
                points[section].append((block_name, point, (own, tuning if asks else None)))

    for error in check_keras_optimizers(keras_points):
        if error:
            fail("optimizers", error)

    check_size(math.prod(map(len, points.values())) * len(inits) * len(seeds) * repeats, source)
    specs = []
    for (dname, dparams, _), (oname, hparams, (own, tuning)), (bname, bparams, _), init, seed, \
            repeat in itertools.product(points["datasets"], points["optimizers"],
                                        points["backends"], inits, seeds, range(repeats)):
        bparams = dict(bparams)
        dtype = bparams.pop("dtype", "float64")
        specs.append(RunSpec(name, dname, dict(dparams), oname, dict(hparams), bname, bparams,
                             dtype, init, seed, repeat, dict(own or stopping),
                             dict(tuning or {})))
    return specs


def check_backend(name: str, **options) -> None:
    """A [[backends]] block's options against the backend's declaration (its framework is
    neither imported nor required here: a config may name a backend this machine lacks, and its
    runs say so)."""
    backend(name).check(options)
