"""What a study gives the engine (`StudyPlugin`), and the one registry of studies by kind.

A spec is a frozen dataclass with `run_id` (a stable hash of its content), `repeat`,
`to_json()`, `axes()` (flat values that excludes, --only and the results' columns use) and
`label()` (a short name for progress lines). A plugin is a module providing the members of
`StudyPlugin`; it states only what differs from `DEFAULTS` (measured by `MEASURE_MODULE`'s
`measure`, figures and report in its package's `figures` and `report` modules, no prerequisite
runs, no grid check, nothing to preload or prepare, a GPU run when `spec.device == "gpu"`, a
sweep failed only by `error` rows, no side tables). `load_plugin` fills in what it leaves out
and checks the rest, so a plugin that lacks a member without a default fails at once, naming
it; the engine reads a plugin only through it (`load_kind`, and the run's own process).
A new study is a new folder whose plugin module is added to `STUDIES`; its figures and its report
section are found through the plugin (`FIGURES_MODULE`, `REPORT_MODULE`), nowhere else.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

STUDIES = {"regression": "study.regression.plugin", "feedmode": "study.feedmode.plugin",
           "train": "study.train.plugin"}
ENGINE_STATUSES = ("error", "timeout", "oom", "skipped")


@runtime_checkable
class StudyPlugin(Protocol):
    """Everything the engine calls on a study."""

    KIND: str  # its name, as configs' `kind` say it
    CONFIG_KEYS: tuple[str, ...]  # the top-level config keys it reads
    MEASURE_MODULE: str  # the module that measures (a warm process imports it)
    SCHEMA: Any  # study.sweep.schema.Schema of its rows, engine columns included
    SIDE_TABLES: dict  # name -> Schema of a per-run side table (traces, calls)
    MEASURE_STATUSES: tuple[str, ...]  # what `measure` can end with (besides ENGINE_STATUSES)
    FAILED_STATUSES: tuple[str, ...]  # a sweep with any of these exits 1
    FIGURES_MODULE: str  # `draw(results, folder) -> [paths]`
    REPORT_MODULE: str  # `section(results, figures_folder) -> [Block]`

    def expand(self, raw: dict, source: str, name: str, repeats: int) -> list:
        """Its config sections, validated, as specs."""

    def spec_from_json(self, text: str): ...

    def framework(self, spec) -> str | None:
        """Which framework's warm process forks the run (a key of
        optimizers.backends.registry.FRAMEWORKS), or None for the NumPy stack alone."""

    def preload(self, framework: str) -> tuple[str, ...]:
        """The study's own modules for a warm process of that framework (import only), or
        `module:function` for a function the warm process calls once the module is imported."""

    def needs_gpu(self, spec) -> bool:
        """Only where a GPU is (else recorded skipped)."""

    def code_files(self, spec) -> list[str]:
        """The source (and input data) files whose content measured the spec."""

    def input_files(self, spec) -> list[str]:
        """The user's files the spec reads (data, model, initial values), by absolute path: no
        output of the sweep may replace one (study.output.inputs)."""

    def measure(self, spec, ctx: RunContext) -> Measurement:
        """In the run's own process."""

    def summary(self, runs) -> str:
        """Printed at the end of a sweep."""

    def check_grid(self, specs) -> str | None:
        """A combination the excludes left that cannot run (a config error's message)."""

    def prerequisites(self, spec) -> list:
        """The runs a spec waits for (a learning rate tuned on a grid); [] for none."""

    def resolve(self, spec, rows: dict):
        """The spec to run, from its prerequisites' rows (dicts by run_id); None while any of
        them has no row."""

    def prepare(self, specs, cache_dir: Path, python: str, timeout: float) -> None:
        """Inputs the runs share, made once in the sweep's process before they start (outside
        every clock); what fails is left for its run to meet and record. A process it starts
        is bound by `timeout`, the study's run_timeout."""


@dataclass
class Measurement:
    """What `measure` returns: the row's study columns and its side tables by name."""

    row: dict
    tables: dict = field(default_factory=dict)  # name -> pandas DataFrame


@dataclass
class RunContext:
    """What the engine hands a measurement: the data cache, the noise probe to wrap the timed
    part in (`with ctx.probe:`), and `save_partial`, which leaves a record of how far the run
    got (a run killed for time or memory still tells its phase)."""

    cache_dir: Path
    probe: object
    save_partial: object = lambda record: None


def load_kind(kind: str) -> StudyPlugin:
    """The plugin of a study kind, checked against `StudyPlugin`."""
    return load_plugin(STUDIES[kind])


def load_plugin(module_name: str) -> StudyPlugin:
    """The plugin module, its left-out members set to `DEFAULTS` (once, on the module itself,
    so every reader sees one plugin), checked against `StudyPlugin`."""
    plugin = importlib.import_module(module_name)
    missing = [name for name in _members() if not hasattr(plugin, name) and name not in DEFAULTS]
    if missing:
        raise TypeError(f"study plugin {module_name} lacks {', '.join(missing)}")
    for name, default in DEFAULTS.items():
        if not hasattr(plugin, name):
            setattr(plugin, name, default(plugin))
    return plugin


def _sibling(name: str):
    """The plugin package's module `name` (study.feedmode.plugin -> study.feedmode.<name>)."""
    return lambda plugin: f"{plugin.__name__.rpartition('.')[0]}.{name}".lstrip(".")


def _measure(plugin):
    def measure(spec, ctx: RunContext) -> Measurement:
        """`measure` of the plugin's MEASURE_MODULE, imported in the run's own process."""
        return importlib.import_module(plugin.MEASURE_MODULE).measure(spec, ctx)

    return measure


def _no_prerequisites(spec) -> list:
    return []


def _unchanged(spec, rows: dict):
    return spec


def _no_grid_check(specs) -> None:
    return None


def _no_preload(framework: str) -> tuple[str, ...]:
    return ()


def _nothing_to_prepare(specs, cache_dir: Path, python: str, timeout: float) -> None:
    return None


def _device_is_gpu(spec) -> bool:
    return getattr(spec, "device", None) == "gpu"


# member -> its default, made from the plugin module (in this order: measure reads MEASURE_MODULE)
DEFAULTS = {
    "MEASURE_MODULE": _sibling("measure"),
    "FIGURES_MODULE": _sibling("figures"),
    "REPORT_MODULE": _sibling("report"),
    "SIDE_TABLES": lambda plugin: {},
    "FAILED_STATUSES": lambda plugin: ("error",),
    "measure": _measure,
    "prerequisites": lambda plugin: _no_prerequisites,
    "resolve": lambda plugin: _unchanged,
    "check_grid": lambda plugin: _no_grid_check,
    "preload": lambda plugin: _no_preload,
    "prepare": lambda plugin: _nothing_to_prepare,
    "needs_gpu": lambda plugin: _device_is_gpu,
    "input_files": lambda plugin: lambda spec: [],
}


def _members() -> list[str]:
    annotations = [name for name in StudyPlugin.__annotations__ if name.isupper()]
    methods = [name for name, value in vars(StudyPlugin).items()
               if callable(value) and not name.startswith("_")]
    return annotations + methods
