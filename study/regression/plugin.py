"""The regression study as the engine sees it (see study.sweep.plugin; what is not here is the
engine's default: measured by study.regression.measure, figures and report beside it). Logistic
regression is this study on logistic data (study.regression.labels.is_logistic): its answers,
its name in `compare` and its report title follow from its rows."""

from __future__ import annotations

import inspect
import json
from functools import cache
from pathlib import Path

from datasets import DATASETS, InputError, problem_kind
from datasets import dataset as declared
from datasets.user_file import is_file_name
from datasets.user_file import split as split_file
from optimizers import OPTIMIZERS, PREFIXES, library_of, make_optimizer, prefix_of
from optimizers.driver import for_problem
from optimizers.from_file import FILE_LIBRARIES
from optimizers.objective import check_formulation
from optimizers.stopping import STOPPING_STATUSES
from study.frameworks.registry import BACKENDS, framework_of
from study.regression.config import CONFIG_KEYS
from study.regression.config import expand_specs as expand
from study.regression.labels import data_titles, is_logistic, label_runs, original_data
from study.regression.schema import SCHEMA, SIDE_TABLES
from study.regression.spec import RunSpec
from study.regression.summary import INSTANCE_COLUMNS, format_summary, summarize, time_to_target
from study.sweep.fingerprint import ENGINE_FILES, python_files, relative
from study.sweep.plugin import ORIGINAL_QUESTIONS, StudyPlugin
from study.sweep.tuning import TUNED, measured_runs, tuning_runs
from study.sweep.tuning import resolve as resolve_tuned

KIND = "regression"
MEASURE_STATUSES = (*STOPPING_STATUSES, "uncertifiable")
# a sweep with these exits 1; "uncertifiable" (f* too coarse for the tol) is a refusal, not one
FAILED_STATUSES = ("error", "failed", "reference-error")
MEASURING_FILES = ("study/regression/measure.py", "study/regression/spec.py")

__all__ = ["CONFIG_KEYS", "SCHEMA", "SIDE_TABLES", "expand"]  # imported: the plugin's own


def check_grid(specs) -> str | None:
    """A pair of data set and configuration that would fail in every run (a logistic data set
    with the 'gram' formulation, a least-squares-only method or the exact line search; ridge
    data with a plain least-squares method), or a backend whose framework is not installed
    here: the runs' own checks, made before anything runs."""
    for name in dict.fromkeys(spec.backend for spec in specs):
        framework = framework_of(name)
        if framework is not None:
            try:
                framework.require()
            except InputError as exc:
                return f"{exc} (or leave the backend out of the config)"
    for spec in specs:
        if spec.tuning.get("role") == TUNED and spec.tuning_holdout() == "nothing":
            params = json.dumps(spec.dataset_params, sort_keys=True)
            return (f"dataset '{spec.dataset}' ({params}) with {spec.optimizer}: the tuning "
                    f"seed {spec.tuning['seed']} builds the very instance that is measured "
                    f"(seed {spec.seed}): the data set ignores the seed and init = 'zeros' "
                    "starts both at the same point, so the tuned rate would not be held apart; "
                    "drop the data set's own seed, or use init = 'normal'")
        kind = problem_kind(spec.dataset, spec.dataset_params)
        try:
            check_formulation(kind.objective, spec.backend_options.get("formulation", "data"))
            prefix = prefix_of(spec.optimizer)
            if not (prefix and PREFIXES[prefix].check_apart):  # checked apart; Keras's solve any
                rate = spec.tuning.get("grid", [None])[0]  # a tuned rate: any grid value
                for_problem(make_optimizer(spec.optimizer, **{
                    k: rate if v == TUNED else v for k, v in spec.hyperparameters.items()}),
                    kind)
        except InputError as exc:
            params = json.dumps(spec.dataset_params, sort_keys=True)
            return (f"dataset '{spec.dataset}' ({params}) with {spec.optimizer} on "
                    f"{spec.backend}: {exc} (to keep the rest of the grid, leave the pair out "
                    "with [[exclude]])")
    return None


def preload(framework: str) -> tuple[str, ...]:
    """The module of every backend on that framework (importing it initialises nothing)."""
    return tuple(dict.fromkeys(b.module for b in BACKENDS.values() if b.framework == framework))


@cache  # the registries are fixed once imported; a plan asks once per spec (1 ms each)
def _selectable() -> tuple[set[str], dict, dict]:
    # every keras:<Class> runs through study/frameworks/keras/optimizers.py, every torch:<Class>
    # study/frameworks/torch/optimizers.py, a file's optax factory jax/optax_file.py (the module
    # of each library's builder in FILE_LIBRARIES)
    harnesses = {**OPTIMIZERS, **PREFIXES,
                 **{prefix: build for prefix, (_, build) in FILE_LIBRARIES.items()}}
    optimizers = {name: relative(inspect.getsourcefile(code)) for name, code in harnesses.items()}
    datasets = {name: relative(inspect.getsourcefile(d.load)) for name, d in DATASETS.items()}
    chosen = set(optimizers.values()) | set(datasets.values())
    return chosen, optimizers, datasets


def code_files(spec: RunSpec) -> list[str]:
    """The measuring code shared by every run, plus the modules of this spec's optimizer, data
    set and backend (so that editing gd.py leaves the L-BFGS rows standing), and its input
    data file if it reads one."""
    chosen, optimizers, datasets = _selectable()
    shared = [f for f in python_files("datasets") + python_files("optimizers")
              if f not in chosen] + ["study/frameworks/base.py"]  # what every backend runs

    # a user's own optimizer: its file, by absolute path (editing it re-measures its rows),
    # and the harness of its library where it is a library's class
    name, library = spec.optimizer, library_of(spec.optimizer)
    methods = [split_file(name)[0]] if is_file_name(name) else []
    methods += [optimizers[library or name]] if library or not methods else []
    data = split_file(spec.dataset)[0] if is_file_name(spec.dataset) else datasets[spec.dataset]
    own = [*map(str, methods), str(data), *BACKENDS[spec.backend].files]
    return sorted({*shared, *own, *ENGINE_FILES, *MEASURING_FILES,
                   *data_files(spec.dataset, spec.dataset_params)})


def data_files(dataset: str, params: dict) -> list[str]:
    """The user's data files (the parameters its data set declares as files; `regress` reads
    the same), by absolute path: their content is hashed into the row's fingerprint like the
    code's, so an edited file re-measures instead of being compared with rows measured on the
    old one."""

    paths = [params.get(key) for key in declared(dataset).files]
    # a file gone missing: the run itself says so, as an error row
    return [str(Path(p).resolve()) for p in paths if isinstance(p, str) and Path(p).is_file()]


def pairs(runs):
    """What `compare` pairs: each data set's configuration, by its time to the target, else
    per iteration."""

    rows = label_runs(measured_runs(runs))
    per_iteration = rows["seconds_per_iteration"].where(rows["iterations"] > 0)
    rows = rows.assign(config=rows["data"] + " " + rows["config"], time=time_to_target(rows),
                       per_iteration=per_iteration)
    return rows, INSTANCE_COLUMNS, {"time to target": "time",
                                    "time per iteration (target reached in neither)":
                                        "per_iteration"}


def subjects(runs) -> list[str]:
    """The original questions on their data, else the data's titles (a report on your own CSV
    says so in its title)."""

    if runs.empty:
        return []
    return [ORIGINAL_QUESTIONS] if original_data(runs) else data_titles(runs)


def named_files(runs) -> list[str]:
    """The data files its rows' parameters name."""
    files = []
    for text in runs["dataset_params"].dropna().unique() if "dataset_params" in runs else ():
        path = json.loads(text).get("path") if str(text).startswith("{") else None
        files += [str(path)] if path else []
    return files


class Regression(StudyPlugin):
    KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES = KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES
    MEASURE_STATUSES, FAILED_STATUSES = MEASURE_STATUSES, FAILED_STATUSES
    FIRST_REACHED = True
    expand, spec_from_json = staticmethod(expand), staticmethod(RunSpec.from_json)
    preload, code_files = staticmethod(preload), staticmethod(code_files)
    check_grid = staticmethod(check_grid)
    # a tuned spec waits for its learning-rate grid's runs
    prerequisites, resolve = staticmethod(tuning_runs), staticmethod(resolve_tuned)
    pairs, subjects = staticmethod(pairs), staticmethod(subjects)
    named_files, summary_table = staticmethod(named_files), staticmethod(summarize)

    def framework(self, spec: RunSpec) -> str | None:
        return BACKENDS[spec.backend].framework

    def input_files(self, spec: RunSpec) -> list[str]:
        return data_files(spec.dataset, spec.dataset_params)

    def needs_gpu(self, spec: RunSpec) -> bool:
        return spec.backend_options.get("device") == "gpu"

    def summary(self, runs) -> str:
        return format_summary(summarize(runs))

    def title(self, runs) -> str:
        return "logistic regression" if is_logistic(runs) else KIND

    def conclusions(self, runs, study: str) -> list:
        from study.regression.conclusions import study_conclusions  # heavy: matplotlib

        return study_conclusions(runs, study)


PLUGIN = Regression()
