"""The feed-mode study as the sweep engine sees it (see study.sweep.plugin)."""

from __future__ import annotations

from study.feedmode.config import CONFIG_KEYS, expand_specs
from study.feedmode.schema import SCHEMA, SIDE_TABLES
from study.feedmode.spec import Spec
from study.sweep.fingerprint import ENGINE_FILES

KIND = "feedmode"
MEASURE_MODULE = "study.feedmode.measure"
STATUSES = ("ok", "mismatch")
FAILED_STATUSES = ("error", "mismatch")  # a sweep with these exits 1
MEASURING_FILES = ("study/feedmode/measure.py", "study/feedmode/model.py",
                   "study/feedmode/spec.py")

__all__ = ["CONFIG_KEYS", "FAILED_STATUSES", "KIND", "MEASURE_MODULE", "SCHEMA", "SIDE_TABLES",
           "STATUSES", "code_files", "expand", "measure", "needs_gpu", "needs_tensorflow",
           "spec_from_json", "summary"]


def expand(raw: dict, source: str, name: str, repeats: int) -> list[Spec]:
    return expand_specs(raw, source, name, repeats)


def spec_from_json(text: str) -> Spec:
    return Spec.from_json(text)


def needs_tensorflow(spec: Spec) -> bool:
    return True


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
