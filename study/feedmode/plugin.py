"""The feed-mode study as the engine sees it (see study.sweep.plugin; what is not here is
the engine's default: measured by study.feedmode.measure, which imports no framework, figures and
report beside it, a GPU run when the spec's device is "gpu", no prerequisite runs)."""

from __future__ import annotations

import importlib.util

from convergence_study.errors import InputError
from study.feedmode.conclusions import feedmode_conclusions
from study.feedmode.config import CONFIG_KEYS
from study.feedmode.config import expand_specs as expand
from study.feedmode.model import FRAMEWORK_MODULES, MODES, modes_of
from study.feedmode.schema import SCHEMA, SIDE_TABLES
from study.feedmode.spec import Spec
from study.feedmode.summary import summary_table
from study.frameworks.registry import FRAMEWORKS
from study.sweep.fingerprint import ENGINE_FILES, relative
from study.sweep.grid import configurations, distinct_labels
from study.sweep.plugin import ORIGINAL_QUESTIONS, StudyPlugin

KIND = "feedmode"
MEASURE_STATUSES = ("ok", "mismatch")
FAILED_STATUSES = ("error", "mismatch")  # a sweep with these exits 1
MEASURING_FILES = ("study/feedmode/measure.py", "study/feedmode/model.py",
                   "study/feedmode/spec.py")  # and the framework's module

__all__ = ["CONFIG_KEYS", "SCHEMA", "SIDE_TABLES", "expand"]  # imported: the plugin's own


def check_grid(specs) -> str | None:
    """A mode whose framework is not installed here (one line naming the extra)."""
    for name in dict.fromkeys(framework(spec) for spec in specs):
        try:
            FRAMEWORKS[name].require()
        except InputError as exc:
            return f"{exc} (or leave its modes out: {', '.join(modes_of(name))})"
    return None


def framework(spec: Spec) -> str | None:
    return MODES[spec.mode].framework


def preload(framework: str) -> tuple[str, ...]:
    """The module that builds that framework's modes (it imports the framework, nothing more)."""
    return (FRAMEWORK_MODULES[framework],)


def code_files(spec: Spec) -> list[str]:
    """The engine, the common measuring code and the spec's framework's module only, so that a
    change to one framework's modes re-measures none of the others'."""
    module = importlib.util.find_spec(FRAMEWORK_MODULES[framework(spec)]).origin  # not imported
    return sorted({*ENGINE_FILES, *MEASURING_FILES, relative(module)})


def pairs(runs):
    """What `compare` pairs: each mode, graph options, dtype, N and device, by its first call and
    its later calls."""
    import numpy as np

    from study.feedmode.report import INSTANCE_COLUMNS  # heavy: matplotlib

    failed = runs["status"] != "ok"
    label = (runs["mode"] + " (" + runs["grappler"].fillna("default") + ") " + runs["dtype"]
             + " N=" + runs["n"].astype(str) + " " + runs["device"].fillna("cpu"))
    rows = runs.assign(
        config=distinct_labels(label, configurations(runs, PLUGIN)),
        first=runs["first_call_seconds"].where(~failed, np.inf),
        later=runs["steady_median_seconds"].where(~failed, np.inf))
    return rows, INSTANCE_COLUMNS, {"first call": "first", "later calls": "later"}


class Feedmode(StudyPlugin):
    KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES = KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES
    MEASURE_STATUSES, FAILED_STATUSES = MEASURE_STATUSES, FAILED_STATUSES
    expand, spec_from_json = staticmethod(expand), staticmethod(Spec.from_json)
    framework, preload = staticmethod(framework), staticmethod(preload)
    code_files, check_grid = staticmethod(code_files), staticmethod(check_grid)
    summary = staticmethod(summary_table)
    conclusions, pairs = staticmethod(feedmode_conclusions), staticmethod(pairs)

    def subjects(self, runs) -> list[str]:
        """The feed modes answer an original question (Q2)."""
        return [] if runs.empty else [ORIGINAL_QUESTIONS]


PLUGIN = Feedmode()
