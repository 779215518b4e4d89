"""Runs a study's grid, one run at a time, each in a fresh Python process.

A fresh process per run keeps TensorFlow state, caches and first-call costs of one run out of the
next. Each run's row is durable the moment it finishes, so an interrupted sweep (Ctrl-C, kill -9)
loses at most the run in flight, and rerunning the same command resumes where it stopped.

Where the runs execute is an executor's business: `LocalExecutor` (the default) runs them one
at a time on this machine; `study.dask_executor.DaskExecutor` (`--executor dask`) sends them to a
Dask cluster. Either way the rows are made durable here, in the study's results folder.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from functools import lru_cache

import psutil
from tqdm import tqdm

from datasets.errors import InputError
from study.config import RunSpec, Study, axis_key, lookup_axis
from study.environment import collect
from study.output import ResultsWriteError
from study.records import ResultsFolder
from study.worker import base_row

POLL_SECONDS = 0.05


def parse_only(items) -> dict:
    """--only key=value [...] -> {key: [values]}; values are compared as text."""
    out: dict[str, list[str]] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InputError(f"--only '{item}' is not KEY=VALUE")
        out.setdefault(key, []).append(value)
    return out


def select(specs, only: dict) -> list[RunSpec]:
    """The specs whose axis values match every --only key (any of its values)."""
    known = {key for spec in specs for key in spec.axes()}
    for key in only:
        if axis_key(known, key) is None:
            raise InputError(f"--only: unknown key '{key}'; keys: {', '.join(sorted(known))}")
    return [s for s in specs
            if all(str(lookup_axis(s.axes(), k)) in values for k, values in only.items())]


@lru_cache(maxsize=1)
def gpu_visible(python: str = sys.executable) -> bool:
    """Asked once per sweep, in a subprocess, so the runner itself never imports TensorFlow."""
    code = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300,
                             env=env)
        return out.returncode == 0 and int(out.stdout.strip().splitlines()[-1]) > 0
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tree_rss(pid: int) -> int:
    try:
        proc = psutil.Process(pid)
        return proc.memory_info().rss + sum(c.memory_info().rss
                                            for c in proc.children(recursive=True))
    except psutil.Error:
        return 0


def _parent_death_signal():
    """A preexec_fn that has Linux SIGKILL the child when the thread that started it dies."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before the fork
    return lambda: prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def run_in_subprocess(spec: RunSpec, folder: ResultsFolder, *, timeout: float,
                      memory_budget_gb: float | None, python: str = sys.executable,
                      die_with_parent: bool = False) -> str:
    """Run one spec in a fresh process; record timeout, oom or a crash when it gives no row.

    die_with_parent: kill the run if the calling process dies (a Dask worker killed mid-run
    must not leave an orphan run computing beside the next one).
    """
    with open(folder.log_path(spec.run_id), "w") as log:
        proc = subprocess.Popen([python, "-m", "study.worker", str(folder.root)],
                                stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, text=True,
                                preexec_fn=_parent_death_signal() if die_with_parent else None)
        try:
            proc.stdin.write(spec.to_json())
            proc.stdin.close()
        except BrokenPipeError:
            pass
        start, killed, peak = time.monotonic(), None, 0
        try:
            while True:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.monotonic() - start > timeout:
                    killed = ("timeout", f"killed after the run time budget of {timeout:g} s")
                    _kill_group(proc.pid)
                elif memory_budget_gb is not None:
                    peak = max(peak, _tree_rss(proc.pid))
                    if peak > memory_budget_gb * 2**30:
                        killed = ("oom", f"stopped at {peak / 2**30:.2f} GB, over the memory "
                                         f"budget of {memory_budget_gb:g} GB")
                        _kill_group(proc.pid)
                time.sleep(POLL_SECONDS)
        except BaseException:  # Ctrl-C: the run in flight is abandoned, never half-written
            _kill_group(proc.pid)
            proc.wait()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
    record = folder.record_path(spec.run_id)
    if killed is None and record.exists():
        return _status_of(record)
    if killed is None:
        killed = ("error", f"the run's process ended with code {proc.returncode} and no result; "
                           f"last log line: {_last_line(folder.log_path(spec.run_id))}")
    row = {**base_row(spec), "status": killed[0], "message": killed[1], **collect(),
           "peak_memory_mb": usage.ru_maxrss / 1024.0}
    folder.write_run(row, None)
    return killed[0]


def _status_of(path) -> str:
    import pandas as pd

    return str(pd.read_parquet(path, columns=["status"])["status"].iloc[0])


def _last_line(path) -> str:
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(empty log)"


def skip(spec: RunSpec, folder: ResultsFolder, reason: str) -> str:
    folder.write_run({**base_row(spec), "status": "skipped", "message": reason, **collect()},
                     None)
    return "skipped"


class LocalExecutor:
    """One run at a time on this machine, in grid order, each in a fresh process."""

    def __init__(self, python: str = sys.executable):
        self.python = python

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, specs, folder: ResultsFolder, *, timeout: float,
            memory_budget_gb: float | None, on_start=None):
        """Yield (spec, status) as each run becomes durable in `folder`."""
        for spec in specs:
            if on_start is not None:
                on_start(spec)
            if spec.backend_options.get("device") == "gpu" and not gpu_visible(self.python):
                yield spec, skip(spec, folder, "no GPU visible to TensorFlow")
            else:
                yield spec, run_in_subprocess(spec, folder, timeout=timeout,
                                              memory_budget_gb=memory_budget_gb,
                                              python=self.python)


def run_study(study: Study, out_dir, *, only=None, retry_failed: bool = False,
              quiet: bool = False, python: str = sys.executable, executor=None) -> Counter:
    """Run every pending spec of the study; returns the count of statuses of this invocation.

    executor: where the runs execute (default: a LocalExecutor). It is entered before anything
    is written, so a cluster that cannot run anything fails with the results folder untouched.
    """
    executor = LocalExecutor(python) if executor is None else executor
    specs = select(study.specs, parse_only(only))
    with executor:
        folder = ResultsFolder(out_dir)
        try:
            folder.prepare()
            done = folder.finished()
        except OSError as exc:
            raise ResultsWriteError(f"cannot use results folder '{folder.root}': {exc}") \
                from None
        pending = [s for s in specs if s.run_id not in done
                   or (retry_failed and done[s.run_id] == "error")]
        statuses: Counter = Counter()
        if not quiet:
            print(f"{study.name}: {len(specs)} runs, {len(specs) - len(pending)} already done, "
                  f"{len(pending)} to run -> {folder.root}")
        bar = tqdm(total=len(pending), disable=quiet, unit="run", dynamic_ncols=True,
                   file=sys.stderr)
        try:
            runs = executor.run(pending, folder, timeout=study.run_timeout,
                                memory_budget_gb=study.memory_budget_gb,
                                on_start=lambda spec: bar.set_postfix_str(spec.label()))
            for index, (spec, status) in enumerate(runs, 1):
                statuses[status] += 1
                bar.update()
                if quiet:
                    print(f"[{index}/{len(pending)}] {spec.run_id} {spec.label()}: {status}",
                          flush=True)
            folder.assemble()
        except OSError as exc:
            raise ResultsWriteError(
                f"cannot write results in '{folder.root}': {exc}; the "
                f"{sum(statuses.values())} runs finished in this invocation (and all earlier "
                f"ones) are intact in '{folder.runs_dir}'") from None
        except BaseException:  # Ctrl-C or a crash: the tables still show every finished run
            with contextlib.suppress(OSError):
                folder.assemble()
            raise
        finally:
            bar.close()
    return statuses


def add_arguments(parser) -> None:
    parser.add_argument("config", help="a study config, e.g. configs/regression.toml")
    parser.add_argument("--out", help="results folder (default results/<study name>)")
    parser.add_argument("--only", nargs="+", metavar="KEY=VALUE",
                        help="run only the grid points with these axis values")
    parser.add_argument("--dry-run", action="store_true", help="print the grid, run nothing")
    parser.add_argument("--retry-failed", action="store_true",
                        help="run again the runs that ended in error")
    parser.add_argument("--quiet", action="store_true", help="log lines instead of a progress bar")
    parser.add_argument("--executor", choices=("local", "dask"), default="local",
                        help="local: one run at a time on this machine (default); dask: each "
                             "run on a Dask cluster (needs the [dask] extra)")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="with --executor dask: the scheduler, e.g. tcp://HOST:8786 "
                             "(default: start a local cluster)")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="with --executor dask and no --scheduler: workers of the local "
                             "cluster, each running one run at a time (default 1)")


def make_executor(args):
    """The executor the command line asks for; None is the local one."""
    if args.executor == "local":
        if args.scheduler or args.workers is not None:
            raise InputError("--scheduler and --workers need --executor dask")
        return None
    try:
        from study.dask_executor import DaskExecutor
    except ModuleNotFoundError as exc:
        if exc.name not in ("dask", "distributed"):
            raise
        raise InputError("--executor dask needs Dask: pip install "
                         "'convergence-study[dask]'") from None
    return DaskExecutor(args.scheduler, workers=args.workers, quiet=args.quiet)


def main(args) -> int:
    import pandas as pd

    from study.config import load_study
    from study.summary import format_summary, summarize

    study = load_study(args.config)
    out = args.out or os.path.join("results", study.name)
    specs = select(study.specs, parse_only(args.only))
    if args.dry_run:
        table = pd.DataFrame([{"run_id": s.run_id, **s.axes()} for s in specs])
        table = table.drop(columns=["study"]).dropna(axis=1, how="all")
        with pd.option_context("display.width", 200, "display.max_rows", None,
                               "display.max_columns", None):
            print(table.to_string(index=False))
        print(f"{len(specs)} runs in {study.name} ({study.path})")
        return 0
    from study.output import check_output_path

    check_output_path(os.path.join(out, "runs.parquet"))
    executor = make_executor(args)
    statuses = run_study(study, out, only=args.only, retry_failed=args.retry_failed,
                         quiet=args.quiet, executor=executor)
    runs = pd.read_parquet(os.path.join(out, "runs.parquet"))
    runs = runs[runs["run_id"].isin({s.run_id for s in specs})]
    print(format_summary(summarize(runs)))
    done = ", ".join(f"{k}={v}" for k, v in sorted(statuses.items())) or "nothing to do"
    print(f"this invocation: {done}; results in {out}/runs.parquet and traces.parquet")
    return 0
