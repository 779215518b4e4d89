"""The train study's config: [[problems]], [[optimizers]], `backends`, `device`, `seeds` and
[tuning]. Every list value of a problem or optimizer block is an axis; the grid is their product
with backends, devices, seeds and repeats."""

from __future__ import annotations

import functools
import itertools
import json
import math
import sys
from contextlib import contextmanager
from dataclasses import replace

from convergence_study.errors import InputError
from datasets import values
from datasets.user_file import absolute, is_file_name
from study.frameworks.registry import DEVICES
from study.frameworks.registry import FRAMEWORKS as REGISTRY
from study.sweep import tuning as protocol
from study.sweep.grid import ConfigError, as_list, blocks, check_size, expand, matches, unknown
from study.train.frameworks import (
    adapter,
    check_framework,
    keras_frameworks,
    model_library,
    native_adapters,
)
from study.train.models.data import check_data, load_data
from study.train.models.examples import FRAMEWORK_OF
from study.train.models.model import (
    NATIVE_LOSSES,
    SHIPPED,
    check_initial_file,
    check_model_name,
    check_native_loss,
    check_target_value,
    loss_name,
    mode_of,
    model_file,
)
from study.train.models.workload import METRICS, check_metric
from study.train.run.native_optimizers import (
    KERAS_LIBRARY,
    allowed_names,
    file_library,
    library_of,
    make_submission,
)
from study.train.sweep.spec import LBFGS, Spec

CONFIG_KEYS = ("seeds", "backends", "device", "tuning", "problems", "optimizers")
PROBLEM_KEYS = ("name", "model", "data", "loss", "metric", "batch_size", "eval_every", "target",
                "stopping", "loop", "initial")
STOPPING_KEYS = ("max_steps", "time_budget")
TARGET_KEYS = ("metric", "value", "mode", "set", "margin", "seed", "stopping")
LOOPS = ("steps", "fit")
FIT_MIN_STEPS = 3  # loop = "fit": a compiling step, an untimed warm-up fit, one timed step
DEFAULT_STOPPING = {"max_steps": 1000}


def check_stopping(table, where: str, base: dict | None = None) -> dict:
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, got {table!r}")
    unknown(table, STOPPING_KEYS, where, "key")
    out = {**(base or DEFAULT_STOPPING), **table}
    values.integer(1).check(f"{where}: max_steps", out["max_steps"])
    if out.get("time_budget") is not None:
        values.positive().check(f"{where}: time_budget", out["time_budget"])
    return out


def check_target(table, where: str, metric: str, seeds, configurations, backend,
                 loss: str | None = None) -> dict:
    """{metric, value, mode, how}: given, or set by a round (study.train.sweep.rounds). A given
    value the metric cannot take, or a mode against the way it improves, is refused."""
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table, e.g. {{ metric = \"val_loss\", "
                          "value = 0.35 }")
    unknown(table, TARGET_KEYS, where, "key")
    name = table.get("metric", "val_loss")
    if name not in ("val_loss", f"val_{metric}"):
        raise ConfigError(f"{where}: metric must be val_loss or val_{metric}, got {name!r}")
    mode = values.choice("min", "max").check(f"{where}: mode", table.get("mode", mode_of(name)))
    if "set" not in table:
        if "value" not in table:
            raise ConfigError(f"{where} needs value (a given target) or set = \"round\"")
        for key in ("margin", "seed", "stopping"):
            if key in table:
                raise ConfigError(f"{where}: {key} belongs to set = \"round\"")
        value = values.number().check(f"{where}: value", table["value"])
        with config_error(f"{where}: "):
            check_target_value(name, value, mode, loss)
        return {"metric": name, "value": value, "mode": mode, "how": "given"}
    values.choice("round").check(f"{where}: set", table["set"])
    if "value" in table:
        raise ConfigError(f"{where}: give value or set = \"round\", not both")
    for key in ("margin", "seed", "stopping"):
        if key not in table:
            raise ConfigError(f"{where}: set = \"round\" needs {key}")
    seed = values.integer(0).check(f"{where}: seed", table["seed"])
    if seed in seeds:
        raise ConfigError(f"{where}: seed {seed} is one of the measured seeds {seeds}; the "
                          "held-apart seed must be another")
    return {"metric": name, "mode": mode, "how": "round", "value": None,
            "margin": values.number(0, 1, high_open=True).check(f"{where}: margin",
                                                                table["margin"]),
            "seed": seed, "stopping": check_stopping(table["stopping"], f"{where}: stopping"),
            "backend": backend, "configurations": configurations}


def expand_specs(raw: dict, source: str, name: str, repeats: int) -> list[Spec]:
    """The config's sections, each checked by its own validator, as the grid's specs."""
    seeds, backends, devices = check_axes(raw, source)
    excludes = raw.get("exclude", [])
    excludes = [rule for rule in excludes if isinstance(rule, dict)] \
        if isinstance(excludes, list) else []
    points = optimizer_points(raw, source, seeds)
    configurations = round_configurations(points)
    axes = (points, backends, devices, seeds, range(repeats))
    specs, unplanned = {}, {}
    for number, block in enumerate(blocks(raw, "problems", source), 1):
        problem, left = problem_specs(block, f"{source}: problems: "
                                      f"'{block.get('name', number)}'", name, axes,
                                      configurations, source)
        if left:
            unplanned[block.get("name", str(number))] = left
        if problem and problem[0].target["how"] == "round":
            problem = round_on_first(problem, backends, excludes)
        for spec in problem:
            specs.setdefault(spec.run_id, spec)
    if unplanned:  # said once, as a sweep's GPU runs without a GPU are
        print(f"{source}: not run: {sum(unplanned.values())} combinations of a model with "
              "another framework or another library's optimizer (a native model runs on its "
              "own framework with its library's optimizers and lbfgs, a Keras model with Keras "
              f"optimizers and lbfgs), in problems {', '.join(unplanned)}", file=sys.stderr)
    return list(specs.values())


def checked(source: str, where: str, value, kind):
    """A value through datasets.values, its one-line error as the config's."""
    with config_error(f"{source}: "):
        return kind.check(where, value)


@contextmanager
def config_error(head: str = ""):
    """An InputError of a check shared with the command line, as the config's one line."""
    try:
        yield
    except InputError as exc:
        raise ConfigError(f"{head}{exc}") from None


def check_axes(raw: dict, source: str) -> tuple[list, list, list]:
    """seeds, backends and device: each a non-empty list of allowed values."""
    seeds = [checked(source, "seeds", s, values.integer(0))
             for s in as_list(raw.get("seeds", [0]))]
    if not seeds:
        raise ConfigError(f"{source}: seeds is empty")
    backends = []
    for framework in as_list(raw.get("backends", list(keras_frameworks()))):
        with config_error(f"{source}: "):
            backends.append(check_framework(framework, "backends"))
    if not backends:
        raise ConfigError(f"{source}: backends is empty")
    devices = [checked(source, "device", d, values.choice(*DEVICES))
               for d in as_list(raw.get("device", ["cpu"]))]
    if not devices:
        raise ConfigError(f"{source}: device is empty")
    return seeds, backends, devices


def optimizer_points(raw: dict, source: str, seeds) -> list[tuple]:
    """[[optimizers]]: (name, point, tuning) per point of each block, every value checked (the
    Keras ones together, by Keras, in one process)."""
    points, keras_points = [], []
    study_tuning = raw.get("tuning", {})
    for block in blocks(raw, "optimizers", source):
        block_name = block.get("name")
        where = f"{source}: optimizers: '{block_name}'"
        if is_file_name(block_name):  # a file's optimizer: by its absolute path, its library
            with config_error(f"{where}: "):
                block_name = absolute(block_name)
                file_library(block_name)
        native = native_framework(block_name)
        if not isinstance(block_name, str) or not (
                block_name == LBFGS or native or block_name.startswith(f"{KERAS_LIBRARY}:")
                or is_file_name(block_name)):
            raise ConfigError(f"{source}: optimizers: unknown name {block_name!r}; allowed: "
                              f"{allowed_names()}")
        params = {k: v for k, v in block.items() if k not in ("name", "tuning")}
        rate = adapter(native).RATE if native else protocol.PARAMETER
        if rate != protocol.PARAMETER and protocol.TUNED in (params.get(protocol.PARAMETER),
                                                             params.get(rate)):
            raise ConfigError(f"{where}: {protocol.PARAMETER} = '{protocol.TUNED}' is not mapped "
                              f"to {adapter(native).LIBRARY}'s {rate} yet; give {rate}")
        for point in expand(params, where):
            tuned = point.get(protocol.PARAMETER) == protocol.TUNED
            tuning = check_tuning({**study_tuning, **block.get("tuning", {})}, where, seeds) \
                if tuned else {}
            rates = tuning["grid"] if tuned else [point.get(protocol.PARAMETER)]
            for rate in rates:
                candidate = {**point, **({protocol.PARAMETER: rate} if tuned else {})}
                if block_name == LBFGS:
                    unknown(candidate, ("history",), where, "lbfgs parameter")
                    checked(source, f"{where}: history", candidate.get("history", 10),
                            values.integer(1, 1000))
                elif native:
                    check_native_optimizer(block_name, candidate, native, where)
                else:
                    keras_points.append((block_name, candidate))
            points.append((block_name, point, tuning))
    check_distinct(points, source)
    for error in model_library().check_optimizers(keras_points, raw.get("run_timeout")):
        if error:
            raise ConfigError(f"{source}: optimizers: {error}")
    return points


def round_configurations(points) -> list[list]:
    """The configurations a target-setting round runs: every Keras optimizer point, a tuned one
    at each rate of its grid (a native model's target is given, never set by a round)."""
    configurations = []
    for optimizer, point, tuning in points:
        if native_framework(optimizer):
            continue
        for rate in (tuning["grid"] if tuning else [None]):
            configurations.append([optimizer, {**point, **({protocol.PARAMETER: rate}
                                                           if tuning else {})}])
    return configurations


def problem_specs(block: dict, where: str, name: str, axes, configurations,
                  source: str) -> tuple[list[Spec], int]:
    """One [[problems]] block crossed with the other axes: its specs, and how many left out."""
    points, backends, devices, seeds, repeats = axes
    unknown(block, PROBLEM_KEYS, where, "key")
    for key in ("model", "data", "metric", "target"):
        if key not in block:
            raise ConfigError(f"{where}: '{key}' is required")
    if "loss" not in block and getattr(model_file(block["model"]), "suffix", None) != ".py":
        # a file.py:function may return its loss with the model: its run says if it does not
        raise ConfigError(f"{where}: 'loss' is required")
    with config_error():
        check_model_name(block["model"], f"{where}: model")
        check_data(block["data"], f"{where}: data")
        check_initial_file(block.get("initial"), block["model"], f"{where}: initial")
    own = FRAMEWORK_OF.get(block["model"])  # a shipped native example's framework
    for key in ("loss", "metric"):
        if not isinstance(block.get(key, ""), str):
            raise ConfigError(f"{where}: {key} must be a Keras name, got {block[key]!r}")
    sizes = [checked(source, f"{where}: batch_size", b, values.integer(0))
             for b in as_list(block.get("batch_size", 0))]
    check_names(block, own, where)
    stepped = any(optimizer != LBFGS for optimizer, _, _ in points)  # lbfgs: full batch
    check_rows(block["data"], sizes if stepped else [], f"{where}: data")
    stopping = check_stopping(block.get("stopping", {}), f"{where}: stopping")
    target = check_target(block["target"], f"{where}: target", block["metric"], seeds,
                          configurations, backends[0], block.get("loss"))
    loop = checked(source, f"{where}: loop", block.get("loop", "steps"), values.choice(*LOOPS))
    if own and (loop != "steps" or target["how"] != "given"):
        raise ConfigError(f"{where}: a native model runs loop = 'steps' to a given target "
                          "(model.fit and the target-setting round are Keras's)")
    if loop == "fit" and stopping["max_steps"] < FIT_MIN_STEPS:
        raise ConfigError(f"{where}: stopping.max_steps must be at least 3 with loop = "
                          f"'fit', got {stopping['max_steps']}")
    eval_every = checked(source, f"{where}: eval_every", block.get("eval_every", 0),
                         values.integer(0))
    check_size(len(sizes) * len(points) * len(backends) * len(devices) * len(seeds)
               * len(repeats), where)
    problem, left = [], 0
    for size, (optimizer, point, tuning), backend, device, seed, repeat in itertools.product(
            sizes, points, backends, devices, seeds, repeats):
        if not_planned(block["model"], own, optimizer, backend):
            left += 1
            continue
        if loop == "fit":
            # Keras's fit runs Keras optimizers only, and the time per step it is compared
            # on does not depend on the rate: a tuned rate is Keras's default here
            if optimizer == LBFGS:
                continue
            if tuning:
                point = {k: v for k, v in point.items() if k != protocol.PARAMETER}
                tuning = {}
        problem.append(Spec(name, block["model"], dict(block["data"]), block.get("loss"),
                            block["metric"], optimizer, dict(point), backend,
                            0 if optimizer == LBFGS else size, eval_every,
                            {**target, "batch_size": size} if target["how"] == "round" else
                            dict(target), seed,
                            repeat, dict(stopping), dict(tuning), loop, device,
                            block.get("initial"),
                            None if block.get("name") is None else str(block["name"])))
    return problem, left


def check_rows(data: dict, sizes: list, where: str) -> None:
    """The data read once per table before any run, and every batch size against its training
    rows: a mistake is one line now, not an error row per run."""
    with config_error():
        rows = training_rows(json.dumps(data, sort_keys=True, default=str), where)
    for size in sizes:
        if size > rows:
            raise ConfigError(f"{where.removesuffix(': data')}: batch_size {size} is more than "
                              f"the {rows} training rows; give at most that, or 0 for full batch")


@functools.cache
def training_rows(data: str, where: str) -> int:
    return len(load_data(json.loads(data), where)["x_train"])


def check_names(block: dict, own: str | None, where: str) -> None:
    """The loss and metric names before any run: a native example's against the native tables,
    else by Keras itself in a child process (the sweep's process must not import Keras)."""
    loss, metric = block.get("loss"), block["metric"]
    loss = None if loss in (None, "none") else loss
    with config_error(f"{where}: "):
        if own:
            check_metric(metric)
            if loss is not None:
                check_native_loss(loss, f"model '{block['model']}'")
            return
        error = None if familiar(loss, metric) else model_library().check_names(loss, metric)
    if error:
        raise ConfigError(f"{where}: {error}")


def familiar(loss: str | None, metric: str) -> bool:
    """Names the study's own tables know Keras has (no child process for them)."""
    name, logits = loss_name(loss) if loss is not None else (None, False)
    known = loss is None or (name in NATIVE_LOSSES and (not logits or "entropy" in name))
    return known and metric in METRICS


def native_framework(optimizer) -> str | None:
    """The framework of a native optimizer's name (torch:<Class> on torch), else None."""
    library = library_of(optimizer) if is_file_name(optimizer) else None
    return next((a.NAME for a in native_adapters()
                 if isinstance(optimizer, str) and (optimizer.startswith(f"{a.LIBRARY}:")
                                                    or library == a.LIBRARY)), None)


def check_native_optimizer(name: str, point: dict, framework: str, where: str) -> None:
    """A torch:/optax: optimizer's hyperparameters, checked by building its submission."""
    with config_error(f"{where}: "):
        REGISTRY[framework].require()
        make_submission(name, point, framework)


def not_planned(model: str, own: str | None, optimizer: str, backend: str) -> bool:
    """A combination known not to go together, left out of the plan (a user's file.py:function
    is known only when it runs: there such a run is a skipped row, with the reason)."""
    native = native_framework(optimizer)
    if own is not None:
        return backend != own or native != own and optimizer != LBFGS
    keras_model = model in SHIPPED or model.endswith(".keras")
    return keras_model and (bool(native) or not adapter(backend).KERAS)


def check_distinct(optimizer_points, source: str) -> None:
    """Two [[optimizers]] blocks (or list values) giving the same optimizer and arguments would
    be one run measured once under two blocks: refused, naming it."""
    seen = set()
    for name, point, _ in optimizer_points:
        key = (name, json.dumps(point, sort_keys=True, default=str))
        if key in seen:
            raise ConfigError(f"{source}: optimizers: {name} with {point or 'no arguments'} is "
                              "given twice; give each optimizer configuration once")
        seen.add(key)


def round_on_first(problem: list[Spec], backends: list, excludes: list) -> list[Spec]:
    """The problem's specs with their target round placed on the first of `backends` that one of
    its runs keeps after the [[exclude]] tables (a framework left out may not be installed), on
    its CPU where it has kept CPU runs (a CPU is always there)."""
    kept = [s for s in problem if not any(matches(s.axes(), rule) for rule in excludes)]
    if not kept:
        return problem
    first = min(kept, key=lambda s: (backends.index(s.backend), s.device != "cpu"))
    return [replace(s, target={**s.target, "backend": first.backend, "device": first.device})
            for s in problem]


def check_tuning(table, where: str, seeds) -> dict:
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{where}: {protocol.PARAMETER} = '{protocol.TUNED}' needs a [tuning] "
                          "table with grid, seed and stopping")
    unknown(table, ("grid", "seed", "stopping"), where, "key in tuning")
    for key in ("grid", "seed", "stopping"):
        if key not in table:
            raise ConfigError(f"{where}: tuning: '{key}' is required")
    grid = table["grid"]
    if not isinstance(grid, list) or len(grid) < 2 or not all(
            isinstance(r, int | float) and not isinstance(r, bool) and r > 0 and math.isfinite(r)
            for r in grid) or sorted(set(grid)) != grid:
        raise ConfigError(f"{where}: tuning: grid must be at least two increasing rates > 0, "
                          f"got {grid!r}")
    seed = values.integer(0).check(f"{where}: tuning: seed", table["seed"])
    if seed in seeds:
        raise ConfigError(f"{where}: tuning: seed {seed} is one of the measured seeds {seeds}")
    return {"role": protocol.TUNED, "grid": [float(r) for r in grid], "seed": seed,
            "stopping": check_stopping(table["stopping"], f"{where}: tuning: stopping"),
            "criterion": "best validation value"}


def check_installed(specs) -> str | None:
    """A framework the grid names that is not installed here: one line naming the extra."""
    for name in dict.fromkeys(spec.backend for spec in specs):
        try:
            REGISTRY[name].require()
        except InputError as exc:
            return f"{exc} (or leave it out of backends)"
    return None
