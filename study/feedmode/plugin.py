"""The feed-mode study as the sweep engine sees it (see study.sweep.plugin)."""

from __future__ import annotations

from study.feedmode.config import CONFIG_KEYS, expand_specs
from study.feedmode.schema import SCHEMA, SIDE_TABLES
from study.feedmode.spec import Spec
from study.sweep.fingerprint import ENGINE_FILES

KIND = "feedmode"
MEASURE_MODULE = "study.feedmode.measure"
FIGURES_MODULE = "study.feedmode.figures"
REPORT_MODULE = "study.feedmode.report"
STATUSES = ("ok", "mismatch")
FAILED_STATUSES = ("error", "mismatch")  # a sweep with these exits 1
MEASURING_FILES = ("study/feedmode/measure.py", "study/feedmode/model.py",
                   "study/feedmode/spec.py")

__all__ = ["CONFIG_KEYS", "FAILED_STATUSES", "FIGURES_MODULE", "KIND", "MEASURE_MODULE",
           "REPORT_MODULE", "SCHEMA", "SIDE_TABLES", "STATUSES", "check_grid", "code_files",
           "expand", "framework", "measure", "needs_gpu", "preload", "prerequisites", "resolve",
           "spec_from_json", "summary"]


def expand(raw: dict, source: str, name: str, repeats: int) -> list[Spec]:
    return expand_specs(raw, source, name, repeats)


def check_grid(specs) -> str | None:
    return None


def prerequisites(spec: Spec) -> list[Spec]:
    return []


def resolve(spec: Spec, rows: dict) -> Spec:
    return spec


def spec_from_json(text: str) -> Spec:
    return Spec.from_json(text)


def framework(spec: Spec) -> str | None:
    return "tensorflow"


def preload(framework: str) -> tuple[str, ...]:
    return ()


def needs_gpu(spec: Spec) -> bool:
    return spec.device == "gpu"


def code_files(spec: Spec) -> list[str]:
    return sorted({*ENGINE_FILES, *MEASURING_FILES})


def measure(spec, ctx):
    from study.feedmode.measure import measure as measure_run

    return measure_run(spec, ctx)


def summary(runs) -> str:
    from study.feedmode.summary import summary_table

    return summary_table(runs)
