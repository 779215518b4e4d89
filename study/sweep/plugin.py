"""What a study gives the engine (`StudyPlugin`), and the one registry of studies by kind.

A spec is a frozen dataclass with `run_id` (a stable hash of its content), `repeat`,
`to_json()`, `axes()` (flat values that excludes, --only and the results' columns use) and
`label()` (a short name for progress lines). A study's plugin module defines `PLUGIN`, an
instance of a `StudyPlugin` subclass that states the required members and overrides only the
hooks whose default does not fit (benchopt's BaseSolver). The engine reaches a study only
through these hooks, never by its name.

Studies are found, not listed: every package under study/ with a `plugin` module, and every
package named in CONVERGENCE_STUDY_STUDIES (os.pathsep-separated, on PYTHONPATH); its kind is
its folder's name.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PLUGINS = "CONVERGENCE_STUDY_STUDIES"
ENGINE_STATUSES = ("error", "timeout", "oom", "skipped")
ORIGINAL_QUESTIONS = "the original questions"  # a report-title subject said first
REQUIRED = ("KIND", "CONFIG_KEYS", "SCHEMA", "MEASURE_STATUSES", "expand", "spec_from_json",
            "framework", "code_files", "summary")


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


class StudyPlugin:
    """Everything the engine calls on a study. A subclass sets the members of `REQUIRED`; every
    other hook has the default below."""

    KIND: str  # its name, as configs' `kind` say it
    CONFIG_KEYS: tuple[str, ...]  # the top-level config keys it reads
    SCHEMA: Any  # study.sweep.schema.Schema of its rows, engine columns included
    MEASURE_STATUSES: tuple[str, ...]  # what `measure` can end with (besides ENGINE_STATUSES)
    SIDE_TABLES: dict = {}  # name -> Schema of a per-run side table (traces, calls)
    FAILED_STATUSES: tuple[str, ...] = ("error",)  # a sweep with any of these exits 1
    # compare: the first quantity where either side reached it, else the others (time to the
    # target, else per step); False: every quantity
    FIRST_REACHED: bool = False

    def _sibling(self, name: str) -> str:
        return f"{type(self).__module__.rpartition('.')[0]}.{name}".lstrip(".")

    @property
    def MEASURE_MODULE(self) -> str:
        return self._sibling("measure")

    @property
    def FIGURES_MODULE(self) -> str:
        """`draw(results, folder) -> [paths]`: the package's `figures`."""
        return self._sibling("figures")

    @property
    def REPORT_MODULE(self) -> str:
        """`section(results, figures_folder) -> [Block]`: the package's `report`."""
        return self._sibling("report")

    # ---- required -------------------------------------------------------------------------
    def expand(self, raw: dict, source: str, name: str, repeats: int) -> list:
        """Its config sections, validated, as specs."""
        raise NotImplementedError

    def spec_from_json(self, text: str):
        raise NotImplementedError

    def framework(self, spec) -> str | None:
        """Which framework's warm process forks the run (a key of
        study.frameworks.registry.FRAMEWORKS), or None for the NumPy stack alone."""
        raise NotImplementedError

    def code_files(self, spec) -> list[str]:
        """The source (and input data) files whose content measured the spec."""
        raise NotImplementedError

    def summary(self, runs) -> str:
        """Printed at the end of a sweep."""
        raise NotImplementedError

    # ---- running (defaults) ---------------------------------------------------------------
    def measure(self, spec, ctx: RunContext) -> Measurement:
        """In the run's own process: `measure` of MEASURE_MODULE, imported there."""
        return importlib.import_module(self.MEASURE_MODULE).measure(spec, ctx)

    def preload(self, framework: str) -> tuple[str, ...]:
        """The study's own modules for a warm process of that framework (None: the host's
        alone; import only), or `module:function` for a function the warm process calls once
        the module is imported."""
        return ()

    def needs_gpu(self, spec) -> bool:
        return getattr(spec, "device", None) == "gpu"

    def input_files(self, spec) -> list[str]:
        """The user's files the spec reads, by absolute path: no output may replace one."""
        return []

    def check_grid(self, specs) -> str | None:
        """A combination the excludes left that cannot run (a config error's message)."""
        return None

    def prerequisites(self, spec) -> list:
        """The runs a spec waits for (a learning rate tuned on a grid); [] for none."""
        return []

    def resolve(self, spec, rows: dict):
        """The spec to run, from its prerequisites' rows (dicts by run_id); None while any of
        them has no row."""
        return spec

    def prepare(self, specs, cache_dir: Path, python: str, timeout: float) -> None:
        """Inputs the runs share, made once before they start (outside every clock); what
        fails is left for its run to meet and record. `timeout` bounds a process it starts."""
        return None

    # ---- answers (defaults: none) ---------------------------------------------------------
    def conclusions(self, runs, study: str) -> list:
        """Its conclusions (study.conclusions.Conclusion) from its rows; `study` (the results
        folder's name) prefixes the report anchors of their evidence."""
        return []

    def refined(self, runs, study: str) -> list:
        """(id, Comparison) of each comparison the adaptive loop measures until decided."""
        return [(c.id, c.comparison) for c in self.conclusions(runs, study)
                if c.answer and c.comparison is not None]

    def pairs(self, runs):
        """What `compare` pairs: (rows with a `config` label, instance columns, quantity name
        -> column); None where the study has nothing to pair."""
        return None

    def title(self, runs) -> str:
        """What the study is, as `compare` names it when two folders differ."""
        return self.KIND

    def subjects(self, runs) -> list[str]:
        """What the report's title names for these rows (ORIGINAL_QUESTIONS goes first)."""
        return []

    def named_files(self, runs) -> list[str]:
        """The user's files the rows name, said once by their short names (study.names)."""
        return []

    def summary_table(self, runs):
        """The summary as a table (`summarize --csv`), None where it has none."""
        return None


def _scan() -> dict[str, str]:
    """Every package under study/ with a plugin module, by its folder's name."""
    here = Path(__file__).resolve().parent  # the engine's own plugin.py (this one) is none
    return {p.parent.name: f"study.{p.parent.name}.plugin"
            for p in sorted(here.parent.glob("*/plugin.py")) if p.parent != here}


def _registered(value: str | None = None) -> dict[str, str]:
    """The study packages named in CONVERGENCE_STUDY_STUDIES, by their last name."""
    value = os.environ.get(PLUGINS, "") if value is None else value
    return {name.rpartition(".")[2]: f"{name}.plugin"
            for name in filter(None, value.split(os.pathsep))}


def load_kind(kind: str) -> StudyPlugin:
    plugin = load_plugin(STUDIES[kind])
    if plugin.KIND != kind:
        raise TypeError(f"study plugin {STUDIES[kind]} says KIND = {plugin.KIND!r}, not {kind!r}")
    return plugin


def load_plugin(module_name: str) -> StudyPlugin:
    """The module's `PLUGIN`, checked: a StudyPlugin stating every required member."""
    plugin = getattr(importlib.import_module(module_name), "PLUGIN", None)
    if not isinstance(plugin, StudyPlugin):
        raise TypeError(f"study plugin {module_name} defines no PLUGIN (a StudyPlugin instance)")
    stated = {name for cls in type(plugin).__mro__ if cls not in (StudyPlugin, object)
              for name in vars(cls)}
    missing = [name for name in REQUIRED if name not in stated]
    if missing:
        raise TypeError(f"study plugin {module_name} lacks {', '.join(missing)}")
    return plugin


STUDIES = _scan()
STUDIES.update(_registered())
