"""The train study as the sweep engine sees it (see study.sweep.plugin)."""

from __future__ import annotations

from pathlib import Path

from datasets.user_file import is_file_name, split
from study.frameworks.registry import FRAMEWORKS
from study.sweep.fingerprint import ENGINE_FILES, python_files
from study.sweep.plugin import StudyPlugin
from study.train.frameworks import adapter, of_library
from study.train.models.initial import prepare_initial as prepare
from study.train.models.model import model_file
from study.train.run.loop import LOOP_STATUSES
from study.train.run.native_optimizers import library_of
from study.train.sweep import rounds
from study.train.sweep.config import CONFIG_KEYS, check_installed
from study.train.sweep.config import expand_specs as expand
from study.train.sweep.report import problem_title, train_conclusions
from study.train.sweep.schema import SCHEMA, SIDE_TABLES
from study.train.sweep.spec import LBFGS, Spec
from study.train.sweep.summary import INSTANCE, keyed, measured, named, summary_table, with_time

LBFGS_FILES = ("optimizers/lbfgs.py", "optimizers/linesearch.py", "optimizers/base.py",
               "study/frameworks/numpy/backend.py")


def preload(framework: str) -> tuple[str, ...]:
    """Keras on that framework where Keras runs on it (the adapter's `warm`, called in the warm
    process: KERAS_BACKEND set before Keras's import, study.train.run.warm); else its adapter."""
    module = FRAMEWORKS[framework].train
    return (f"{module}:warm",) if adapter(framework).KERAS else (module,)


def code_files(spec: Spec) -> list[str]:
    """The code a run's result depends on: the train study's, Keras's, the engine's, its
    optimizer's, the data code, and the user's model, data and initial files (their content)."""
    own = [f for f in python_files("study/train") if "figures" not in f and "report" not in f
           and "command" not in f and "summary" not in f]
    files = [*own, *ENGINE_FILES, *python_files("study/frameworks/keras"), "optimizers/ranges.py",
             "study/sweep/tuning.py", *python_files("datasets")]
    if spec.optimizer == LBFGS:
        files += LBFGS_FILES
    native = of_library(library_of(spec.optimizer))
    if native is not None:
        files += native.CODE_FILES
    if is_file_name(spec.optimizer):  # a file's optimizer: its content, and what checks it
        files += [str(split(spec.optimizer)[0].resolve()), "optimizers/from_file.py"]
    return sorted({*files, *input_files(spec)})


def input_files(spec: Spec) -> list[str]:
    """The user's model, data and initial files, by absolute path: an edited file re-measures."""
    paths = [model_file(spec.model), spec.data.get("path"), spec.initial]
    return [str(Path(p).resolve()) for p in paths if p is not None and Path(p).is_file()]


def pairs(runs):
    """What `compare` pairs: each configuration, by its time to the target, else per step."""
    import pandas as pd

    rows = keyed(with_time(measured(runs)))
    per_step = pd.to_numeric(rows["seconds_per_step"], errors="coerce")
    rows = rows.assign(config=rows["model"] + " on " + rows["data"].astype(str) + ": "
                       + rows["configuration"], per_step=per_step.where(per_step > 0))
    return rows, INSTANCE, {"time to target": "to_target",
                            "time per step (target reached in neither)": "per_step"}


def subjects(runs) -> list[str]:
    """Each model and data set, by their short names (study.names)."""
    if runs.empty:
        return []
    runs = named(runs)
    return sorted({problem_title(runs, m, d)
                   for m, d in zip(runs["model"], runs["data"], strict=True)})


def named_files(runs) -> list[str]:
    """The user's model and data files."""
    return [*runs["model"].dropna(), *runs["data"].dropna()]


class Train(StudyPlugin):
    KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES = "train", CONFIG_KEYS, SCHEMA, SIDE_TABLES
    MEASURE_MODULE = "study.train.run.measure"
    FIGURES_MODULE = "study.train.sweep.figures"
    REPORT_MODULE = "study.train.sweep.report"
    MEASURE_STATUSES = LOOP_STATUSES
    FIRST_REACHED = True
    expand, spec_from_json = staticmethod(expand), staticmethod(Spec.from_json)
    preload = staticmethod(preload)
    code_files, input_files = staticmethod(code_files), staticmethod(input_files)
    check_grid, summary = staticmethod(check_installed), staticmethod(summary_table)
    prerequisites, resolve = staticmethod(rounds.prerequisites), staticmethod(rounds.resolve)
    prepare = staticmethod(prepare)
    conclusions, pairs = staticmethod(train_conclusions), staticmethod(pairs)
    subjects, named_files = staticmethod(subjects), staticmethod(named_files)

    def framework(self, spec: Spec) -> str:
        return spec.backend


PLUGIN = Train()
