"""`python -m study run CONFIG`: measure what is missing, stale or asked for, in an order that
spreads repeats across the sweep, and assemble the study's tables.

A run is *done* when its row exists and was measured by the current code and environment
(fingerprints); otherwise it is measured again, saying why, unless `--keep-stale`. Runs are
shuffled with a recorded seed, blocked by repeat, so that a burst of background load lands on
different configurations, not on all repeats of one. Runs that wait for others (a tuned
learning rate waits for its grid's runs) are planned in a second round from the first round's
rows; then the answers' undecided comparisons get more instances (study.sweep.adaptive). A
sweep in which any run ended in `error` exits with status 1.
"""

from __future__ import annotations

import os
import random
import sys
import uuid
from collections import Counter
from dataclasses import dataclass
from functools import cache

import pandas as pd

from convergence_study.errors import InputError
from study import interrupts
from study.output import ResultsWriteError, check_output_folder, reading
from study.sweep import fingerprint, head_start, noise
from study.sweep.adaptive import ADAPTIVE_STATE, refine, with_candidates, with_held
from study.sweep.dry_run import dry_run, told_apart
from study.sweep.executors import (
    NOT_RUN,
    Job,
    LocalExecutor,
    gpu_visible,
    no_gpu,
    preload_for,
)
from study.sweep.folder import LOCK_NAME, ResultsFolder
from study.sweep.grid import (
    TIMEOUT_ENDS,
    Study,
    configuration,
    load_study,
    parse_only,
    resolved,
    select,
    waits,
    with_prerequisites,
)
from study.sweep.plugin import STUDIES, load_kind
from study.sweep.run_times import RunTimes, left


@dataclass
class Plan:
    """What one invocation will do: the jobs in order and why each one runs."""

    jobs: list[Job]
    done: int
    reasons: Counter  # why runs are measured (again): "new", "stale: changed x.py", ...
    order_seed: int
    sweep_id: str = ""


def plan_runs(study: Study, specs, folder: ResultsFolder, existing: pd.DataFrame,
              env_fingerprints: set[str], *, retry_failed=False, keep_stale=False,
              remeasure_noisy=False, order_seed=None, sweep_id=None, record=True) -> Plan:
    """record=False (a dry run): the same plan, with no code fingerprint stored."""
    plugin = load_kind(study.kind)
    rows = {r["run_id"]: r for r in existing.to_dict("records")}
    noisy = set()
    if remeasure_noisy and len(existing):
        flagged = noise.flag(existing)
        noisy = set(flagged.loc[flagged["noisy"].fillna(False).astype(bool), "run_id"])
    seed = random.SystemRandom().randrange(2**31) if order_seed is None else order_seed
    sweep_id = sweep_id or uuid.uuid4().hex[:12]
    manifest = cache(fingerprint.manifest)  # once per list of code files
    todo, reasons, done = [], Counter(), 0
    for spec in specs:
        files = tuple(plugin.code_files(spec))
        current = fingerprint.save(folder.fingerprints_dir, manifest(files)) if record \
            else fingerprint.fingerprint_of(manifest(files))
        row = rows.get(spec.run_id)
        reason = None
        if row is None:
            reason = "new"
        elif retry_failed and row["status"] == "error":
            reason = "retry of an error"
        elif spec.run_id in noisy:
            reason = "noisy"
        elif row["code_fingerprint"] != current and not keep_stale:
            reason = "stale: " + fingerprint.explain(folder.fingerprints_dir,
                                                     row["code_fingerprint"], manifest(files))
        elif row["env_fingerprint"] not in env_fingerprints and row["status"] != "skipped" \
                and not keep_stale:
            reason = "stale: measured in another environment"
        if reason is None:
            done += 1
            continue
        reasons[reason] += 1
        framework = plugin.framework(spec)
        todo.append(Job(spec, {"kind": study.kind, "plugin": STUDIES[study.kind],
                               "study": study.name,
                               "spec": spec.to_json(), "code_fingerprint": current,
                               "sweep_id": sweep_id, "order_seed": seed},
                        preload_for(framework, plugin),
                        needs_gpu=plugin.needs_gpu(spec), framework=framework))
    shuffle = random.Random(seed)
    # where a timeout ends a configuration, every configuration's first seed runs first
    rank = {s: i for i, s in enumerate(sorted({job.spec.seed for job in todo}))} \
        if study.timeout_ends_configuration else {}
    keys = {id(job): (job.spec.repeat, rank.get(job.spec.seed, 0), shuffle.random())
            for job in todo}
    todo.sort(key=lambda job: keys[id(job)])
    for position, job in enumerate(todo):
        job.request["order_position"] = position
    return Plan(todo, done, reasons, seed, sweep_id)


def run_study(study: Study, out_dir, *, only=None, retry_failed: bool = False,
              keep_stale: bool = False, remeasure_noisy: bool = False,
              order_seed: int | None = None, quiet: bool = False,
              python: str = sys.executable, executor=None, adaptive: bool = False) -> Counter:
    """Run every pending spec of the study; returns the statuses of this invocation.

    The executor is entered before anything is written, so a cluster that cannot run anything
    fails with the results folder untouched. `adaptive` (not with --only, which asks for runs,
    not answers) measures the answers' undecided comparisons further.
    """
    from tqdm import tqdm

    plugin = load_kind(study.kind)
    specs = selected(study, only)
    executor = LocalExecutor(python) if executor is None else executor
    folder = ResultsFolder(out_dir, plugin.SCHEMA, plugin.SIDE_TABLES)
    statuses: Counter = Counter()
    not_run: Counter = Counter()  # reason -> runs this machine cannot make
    timed_out: dict[str, int] = {}  # configuration -> the seed whose run timed out
    unless = None
    if study.timeout_ends_configuration:
        def unless(job):
            seed = timed_out.get(configuration(job.spec))
            return None if seed is None else (
                f"not run: seed {seed} of this configuration timed out ({TIMEOUT_ENDS})")
    with executor, folder.lock():
        try:
            folder.claim(study)
            folder.prepare()
            existing = folder.scan()
        except OSError as exc:
            raise ResultsWriteError(f"cannot use results folder '{folder.root}': {exc}") \
                from None
        if not only:
            specs = with_held(study, specs, existing)
        rounds = ([s for s in specs if not waits(plugin, s)],
                  [s for s in specs if waits(plugin, s)])
        # A bar at a terminal only; its time left is ours (study.sweep.run_times), not tqdm's
        # rate: runs of one sweep differ a hundredfold, and their order is shuffled.
        bar = tqdm(total=0, disable=quiet or not sys.stderr.isatty(), unit="run",
                   dynamic_ncols=True, file=sys.stderr,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]")
        times = RunTimes.from_rows(existing, plugin)  # this machine's earlier runs here
        pending: dict[str, object] = {}  # run id -> spec, of the runs planned and not ended
        first = None

        labels: dict[str, str] = {}  # run id -> its label, with what tells it from its twins
        known = {spec.run_id: spec for spec in specs}

        def time_left() -> str:
            return left(times, list(pending.values()), study.run_timeout)

        def run_round(todo, what):
            """Plan and run specs as one round of this sweep (with its first round's order seed
            and sweep id)."""
            nonlocal first
            plan = plan_runs(study, todo, folder, existing, executor.env_fingerprints(),
                             retry_failed=retry_failed, keep_stale=keep_stale,
                             remeasure_noisy=remeasure_noisy,
                             order_seed=first.order_seed if first else order_seed,
                             sweep_id=first.sweep_id if first else None)
            first = first or plan
            print(describe(study, todo, plan, folder, what), flush=True)
            if any(job.spec.run_id not in labels for job in plan.jobs):
                # from the sweep's runs so far, the adaptive loop's instances included
                known.update((job.spec.run_id, job.spec) for job in plan.jobs)
                labels.update(told_apart(known.values()))
            executor.launch(plan.jobs, folder)  # warm processes import while the plugin prepares
            plugin.prepare([job.spec for job in plan.jobs], folder.cache_dir, python,
                           study.run_timeout)
            bar.total += len(plan.jobs)
            pending.update((job.spec.run_id, job.spec) for job in plan.jobs)
            bar.refresh()
            runs = executor.run(plan.jobs, folder, timeout=study.run_timeout,
                                memory_budget_gb=study.memory_budget_gb,
                                on_start=lambda job: bar.set_postfix_str(
                                    f"{time_left()}, {labels[job.spec.run_id]}"),
                                unless=unless)
            for index, (job, outcome) in enumerate(runs, 1):
                interrupts.check()  # one a library swallowed: no further run starts
                statuses[outcome["status"]] += 1
                pending.pop(job.spec.run_id, None)
                if outcome.get("wall_seconds") and outcome["status"] not in ("skipped", NOT_RUN):
                    times.add(job.spec, outcome["wall_seconds"])
                bar.update()
                if outcome["status"] == "timeout":
                    timed_out.setdefault(configuration(job.spec), job.spec.seed)
                if outcome["status"] == NOT_RUN:
                    not_run[outcome["reason"]] += 1
                    continue
                if bar.disable:  # --quiet, or no terminal (a log): a line per run
                    print(f"[{index}/{len(plan.jobs)}] {job.spec.run_id} "
                          f"{labels[job.spec.run_id]}: {outcome['status']} ({time_left()})",
                          flush=True)

        def run_added(todo, what):
            """Instances the adaptive loop adds: a round, then the runs that wait for rows."""
            nonlocal existing
            existing = folder.scan()
            todo, _ = resolved(plugin, todo, existing)
            run_round(todo, what)

        try:
            for waited, todo in enumerate(rounds):
                if not todo:
                    continue
                if waited:  # made from the rows the first round left
                    existing = folder.scan()
                    todo, waiting = resolved(plugin, todo, existing)
                    if waiting:
                        print(f"{study.name}: {waiting} runs still wait for runs that have no "
                              "row (see above); they run once those have one", flush=True)
                run_round(todo, "runs made from earlier runs' rows" if waited else "runs")
            refine(study, folder, plugin, lambda: grid_rows(study, folder), run_added,
                   enabled=adaptive and not only,
                   say=lambda line: print(line, flush=True))
            for reason, count in not_run.items():
                runs, them = ("run", "it") if count == 1 else ("runs", "them")
                print(f"{study.name}: {count} {runs} not run here: {reason} (no row is written; "
                      f"a machine that has one runs {them})", flush=True)
            assemble(study, folder)
        except OSError as exc:
            raise ResultsWriteError(
                f"cannot write results in '{folder.root}': {exc}; the "
                f"{sum(statuses.values())} runs finished in this invocation (and all earlier "
                f"ones) are intact in '{folder.runs_dir}'") from None
        except BaseException:  # Ctrl-C, SIGTERM: the tables still show every finished run
            try:
                with interrupts.finishing():
                    assemble(study, folder)
            except (OSError, InputError):
                pass
            raise
        finally:
            bar.close()
    return statuses


def selected(study: Study, only) -> list:
    """The specs --only picks, with the runs they wait for."""
    return with_prerequisites(load_kind(study.kind), select(study.specs, parse_only(only)))


def assemble(study: Study, folder: ResultsFolder) -> pd.DataFrame:
    """The config's rows (its grid's and the adaptive loop's, in grid order) with noise flags,
    written as tables."""
    runs = grid_rows(study, folder)
    folder.assemble(runs)
    return runs


def grid_rows(study: Study, folder: ResultsFolder) -> pd.DataFrame:
    """The rows `assemble` writes, without writing them (what the adaptive loop looks at)."""
    existing = folder.scan()
    specs, _ = resolved(load_kind(study.kind), with_candidates(study, existing).specs, existing)
    grid_order = {s.run_id: i for i, s in enumerate(specs)}
    runs = existing[existing["run_id"].isin(grid_order)]
    runs = runs.iloc[runs["run_id"].map(grid_order).argsort()].reset_index(drop=True)
    return noise.flag(runs) if len(runs) else runs


def describe(study: Study, specs, plan: Plan, folder: ResultsFolder, what: str = "runs") -> str:
    lines = [f"{study.name}: {len(specs)} {what}, {plan.done} done, {len(plan.jobs)} to run "
             f"-> {folder.root} (order seed {plan.order_seed})"]
    for reason, count in sorted(plan.reasons.items(), key=lambda kv: -kv[1]):
        if reason != "new":
            lines.append(f"  {count} to measure again: {reason}")
    return "\n".join(lines)


# ---- the command ------------------------------------------------------------------------------

def add_arguments(parser) -> None:
    parser.add_argument("config", help="a study config, e.g. configs/regression.toml")
    parser.add_argument("--require-gpu", action="store_true",
                        help="refuse (one line, exit 2, nothing run) where no framework of the "
                             "config's GPU runs sees a GPU (its CPU runs answer nothing alone)")
    add_sweep_arguments(parser)


def check_gpu(study: Study, specs) -> None:
    """--require-gpu: an InputError naming why, unless some GPU run's framework sees a GPU."""
    plugin = load_kind(study.kind)
    frameworks = list(dict.fromkeys(plugin.framework(s) for s in specs if plugin.needs_gpu(s)))
    if not frameworks:
        raise InputError(f"--require-gpu: {study.source} has no GPU run")
    if not any(gpu_visible(name) for name in frameworks):
        reasons = "; ".join(no_gpu(name) for name in frameworks)
        raise InputError(f"{study.source} needs a GPU: {reasons}; nothing was run")


def add_sweep_arguments(parser, out_help: str = "results folder (default results/<study name>)",
                        *, grid: bool = True, executors: bool = True) -> None:
    """The flags every sweep command shares (`study run`, `study feedmode`); with `grid`, --only
    and --dry-run; with `executors`, --executor, --scheduler and --workers."""
    parser.add_argument("--out", help=out_help)
    if grid:
        parser.add_argument("--only", nargs="+", action="append", metavar="KEY=VALUE",
                            help="run only the grid points with these axis values (repeatable; "
                                 "every key must match)")
        parser.add_argument("--dry-run", action="store_true",
                            help="print the grid, run nothing")
    parser.add_argument("--retry-failed", action="store_true",
                        help="measure again the runs that ended in error")
    parser.add_argument("--keep-stale", action="store_true",
                        help="keep rows measured by other code or in another environment")
    parser.add_argument("--remeasure-noisy", action="store_true",
                        help="measure again the runs flagged noisy")
    parser.add_argument("--order-seed", type=int, metavar="N",
                        help="seed of the shuffled run order (default: a fresh one, recorded)")
    parser.add_argument("--quiet", action="store_true", help="log lines instead of a progress bar")
    parser.add_argument("--no-adaptive", dest="adaptive", action="store_false",
                        help="run the planned design only: no instances added to decide the "
                             "answers' comparisons (see the config's [adaptive])")
    if executors:
        parser.add_argument("--executor", choices=("local", "dask"), default="local",
                            help="local: one run at a time on this machine (default); dask: "
                                 "each run on a Dask cluster (needs the [dask] extra)")
        parser.add_argument("--scheduler", metavar="ADDRESS",
                            help="with --executor dask: the scheduler, e.g. tcp://HOST:8786 "
                                 "(default: start a local cluster)")
        parser.add_argument("--workers", type=int, metavar="N",
                            help="with --executor dask and no --scheduler: workers of the local "
                                 "cluster, each running one run at a time (default 1)")
    parser.set_defaults(**({} if grid else {"only": None, "dry_run": False}),
                        **({} if executors else {"executor": "local", "scheduler": None,
                                                 "workers": None}))


def make_executor(args):
    """The executor the command line asks for; None is the local one."""
    if args.executor == "local":
        if args.scheduler or args.workers is not None:
            raise InputError("--scheduler and --workers need --executor dask")
        return None
    try:
        from study.sweep.dask import DaskExecutor  # optional: dask
    except ModuleNotFoundError as exc:
        if exc.name not in ("dask", "distributed"):
            raise
        raise InputError("--executor dask needs Dask: pip install "
                         "'convergence-study[dask]'") from None
    head_start.close()  # its workers import for themselves
    return DaskExecutor(args.scheduler, workers=args.workers, quiet=args.quiet,
                        verbose=args.verbose)


def flatten_only(only) -> list[str]:
    return [item for group in (only or []) for item in (group if isinstance(group, list)
                                                        else [group])]


# What a sweep writes in its results folder (besides its side tables): no input may be there.
OWN_NAMES = ("study.json", LOCK_NAME, "runs.parquet", ADAPTIVE_STATE, "runs", "logs", "cache",
             "fingerprints")


def execute(study: Study, args) -> int:
    """Run a validated study as the command line asks; the command's exit status."""
    only = flatten_only(args.only)
    specs = selected(study, only)
    out = args.out or os.path.join("results", study.name)
    if getattr(args, "require_gpu", False) and not args.dry_run:
        check_gpu(study, specs)
    if args.dry_run:
        dry_run(specs, study, out, plan_runs, held=not only, retry_failed=args.retry_failed,
                keep_stale=args.keep_stale, remeasure_noisy=args.remeasure_noisy)
        return 0
    plugin = load_kind(study.kind)
    reading(study.source, *{f for spec in specs for f in plugin.input_files(spec)})
    check_output_folder(out, own_results=True,  # its own results folder, inside no other
                        writes=(*OWN_NAMES, *(f"{t}.parquet" for t in plugin.SIDE_TABLES)))
    statuses = run_study(study, out, only=only, retry_failed=args.retry_failed,
                         keep_stale=args.keep_stale, remeasure_noisy=args.remeasure_noisy,
                         order_seed=args.order_seed, quiet=args.quiet,
                         executor=make_executor(args), adaptive=args.adaptive)
    runs_path = os.path.join(out, "runs.parquet")
    if os.path.exists(runs_path):
        runs = pd.read_parquet(runs_path)
        ran, _ = resolved(plugin, with_held(study, specs, runs), runs)
        print(plugin.summary(runs[runs["run_id"].isin({s.run_id for s in ran})]))
    done = ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())) or "nothing to do"
    print(f"this invocation: {done}; results in {out}/runs.parquet")
    failed = {s: statuses[s] for s in plugin.FAILED_STATUSES if statuses.get(s)}
    if failed:
        counts = ", ".join(f"{n} {s}" for s, n in failed.items())
        print(f"convergence-study: {counts} in this sweep; their logs are in "
              f"{os.path.join(out, 'logs')}/<run_id>.log", file=sys.stderr)
        return 1
    return 0


def main(args) -> int:
    return execute(load_study(args.config), args)
