"""Runs a study's grid on a Dask cluster (`python -m study run CONFIG --executor dask`).

Timing integrity comes first, throughput second:
- each task asks for one `timing_slot`, a resource every worker declares once
  (`dask worker ADDRESS --nthreads 1 --resources "timing_slot=1"`), so a worker runs one timed
  run at a time; a GPU run also asks for `gpu` (`--resources "timing_slot=1,gpu=1"`), and where
  no worker declares one it is recorded `skipped`, never submitted;
- on the worker the run executes in a process of its own, forked by a warm server started per
  task (`study.sweep.isolate.run_isolated`, with its budgets), in a temporary folder; the row,
  side tables and log come back to the client;
- the client makes each run durable as it finishes, exactly as a local sweep does, so resume and
  `--retry-failed` mean the same; a worker that dies leaves its run to another, a task that
  raises is retried, and a run that still fails is an `error` row;
- a client that hears nothing for a while asks the scheduler how its runs stand: when it is
  gone, or finished runs the client was never told of, the pending runs become `error` rows
  instead of a sweep that waits forever.

Dask's nanny exports OMP_NUM_THREADS=1 (and MKL's and OpenBLAS's) by default; the local cluster
started here keeps this process's thread settings, and the env_* columns record what each run had.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
import traceback
from contextlib import suppress

import pandas as pd
from distributed import Client, as_completed, get_worker

from convergence_study.dask_plugins import SchedulerPath, WorkerPath
from convergence_study.errors import InputError
from study.output import write_text_atomic
from study.sweep import environment
from study.sweep.dask_cluster import NANNY_THREAD_VARIABLES, TIMING_SLOT, ClusterProcess
from study.sweep.executors import Job, gpu_visible, no_gpu, skip, write_engine_row
from study.sweep.folder import ResultsFolder
from study.sweep.isolate import ForkServer, run_isolated
from study.sweep.plugin import load_plugin

GPU = "gpu"
RETRIES = 2
WORKER_WAIT_SECONDS = 60
# how long the client waits for a run to finish before asking the scheduler how its runs stand
CHECK_SECONDS = 15.0
POLL_SECONDS = 0.05
DASK_LOG = "dask-client.log"  # in the results folder's logs/


def execute_on_worker(job: Job, timeout: float, memory_budget_gb: float | None) -> dict:
    """The Dask task: one run in a process of its own; its row, side tables and log. A timeout,
    oom or crash gives a row too: the task fails only where the worker cannot run at all."""
    plugin = load_plugin(job.request["plugin"])
    run_id = job.spec.run_id
    with tempfile.TemporaryDirectory(prefix=f"study-{run_id}-") as tmp:
        folder = ResultsFolder(tmp, plugin.SCHEMA, plugin.SIDE_TABLES)
        folder.prepare()
        server = ForkServer(job.preload, log=folder.logs_dir / "server.log")
        try:
            server.start()
            outcome = run_isolated(server, job, folder, timeout=timeout,
                                   memory_budget_gb=memory_budget_gb)
        finally:
            server.close()
        row = dict(folder.read_row(run_id))
        tables = {name: pd.read_parquet(path) for name in plugin.SIDE_TABLES
                  if (path := folder.table_path(run_id, name)).exists()}
        log = folder.log_path(run_id).read_text(errors="replace")
    row["worker_address"] = get_worker().address
    return {"row": row, "tables": tables, "log": log, "outcome": outcome}


def thread_settings() -> dict[str, str | None]:
    """Run on a worker: the BLAS thread variables its runs will inherit."""
    return {name: os.environ.get(name) for name in NANNY_THREAD_VARIABLES}


def worker_resources(dask_scheduler) -> dict[str, dict]:
    """Run on the scheduler: worker address -> the resources it declared."""
    return {address: dict(ws.resources) for address, ws in dask_scheduler.workers.items()}


def task_states(dask_scheduler, keys: list[str]) -> dict[str, str | None]:
    """Run on the scheduler: key -> the task's state there (None: it does not know the key)."""
    return {key: task.state if (task := dask_scheduler.tasks.get(key)) else None
            for key in keys}


class DaskExecutor:
    """Sends each run to a Dask cluster; `scheduler=None` starts a local cluster of `workers`,
    in a process session of its own (`study.sweep.dask_cluster`)."""

    def __init__(self, scheduler: str | None = None, *, workers: int | None = None,
                 retries: int = RETRIES, worker_wait: float = WORKER_WAIT_SECONDS,
                 check_every: float = CHECK_SECONDS, quiet: bool = False,
                 verbose: bool = False):
        if scheduler and workers:
            raise InputError("--workers sets the size of a local cluster; with --scheduler the "
                             "cluster's own workers are used")
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be >= 1, got {workers}")
        self.scheduler = scheduler
        self.workers = workers or 1
        self.retries = retries
        self.worker_wait = worker_wait
        self.check_every = check_every
        self.quiet = quiet
        self.verbose = verbose
        self.log = DaskLog(enabled=not verbose)
        self.client: Client | None = None
        self._cluster = None

    def __enter__(self):
        self.log.open()
        try:
            if self.scheduler:
                self.client = Client(self.scheduler, timeout=self.worker_wait)
            else:
                self._cluster = ClusterProcess(self.workers, self.verbose)
                self.client = Client(self._cluster.start(), timeout=self.worker_wait)
            for plugin in (SchedulerPath(), WorkerPath()):  # this toolkit's packages there
                self.client.register_plugin(plugin)
            self._check_workers()
        except BaseException as exc:
            self.__exit__(type(exc), exc, exc.__traceback__)
            if self.scheduler and isinstance(exc, OSError):  # TimeoutError included
                raise InputError(f"--scheduler {self.scheduler}: cannot reach the Dask "
                                 f"scheduler ({type(exc).__name__}: {exc})") from None
            if self.scheduler and isinstance(exc, ValueError):  # distributed parsing it
                raise InputError(f"--scheduler {self.scheduler!r} is not a scheduler address "
                                 f"({exc}); e.g. tcp://HOST:8786") from None
            raise
        return self

    def __exit__(self, *exc):
        try:
            if self.client is not None:
                self.client.close()
                self.client = None
            if self._cluster is not None:
                cluster, self._cluster = self._cluster, None
                cluster.close(graceful=exc[0] is None)
        finally:
            self.log.close()
        return False

    def _check_workers(self) -> None:
        """At least one worker must declare a timing slot, or every task would wait forever."""
        try:
            self.client.wait_for_workers(1, timeout=self.worker_wait)
        except TimeoutError:
            raise InputError(f"no Dask worker joined {self.scheduler} within "
                             f"{self.worker_wait:g} s") from None
        resources = self.client.run_on_scheduler(worker_resources)
        slots = sum(1 for r in resources.values() if r.get(TIMING_SLOT, 0) >= 1)
        if not slots:
            raise InputError(f"no Dask worker at {self.client.scheduler.address} declares the "
                             f"'{TIMING_SLOT}' resource; start workers with "
                             f"--nthreads 1 --resources \"{TIMING_SLOT}=1\"")
        pinned = sorted(address for address, env in self.client.run(thread_settings).items()
                        if "1" in env.values())
        if pinned:  # recorded in the rows' env_* columns too; said here before hours are spent
            print(f"dask: warning: {len(pinned)} workers (e.g. {pinned[0]}) give their runs one "
                  f"BLAS thread (OMP_NUM_THREADS=1 or alike, Dask's nanny default); set these "
                  f"variables in the worker's shell to time multi-threaded runs", file=sys.stderr)
        if not self.quiet:
            gpus = sum(1 for r in resources.values() if r.get(GPU, 0) >= 1)
            print(f"dask: {self.client.scheduler.address}: {len(resources)} workers, {slots} "
                  f"with a timing slot, {gpus} with a gpu", flush=True)

    def _gpu_placement(self, framework: str | None) -> tuple[dict, str | None]:
        """(resources a GPU run of that framework asks for, or the reason it is skipped)."""
        if self.scheduler is None:  # our own local cluster: one worker may use this GPU
            if self.workers == 1 and gpu_visible(framework):
                return {TIMING_SLOT: 1}, None
            if self.workers == 1:
                return {}, no_gpu(framework)
            return {}, (f"a local cluster of {self.workers} workers declares no gpu resource; "
                        f"start a GPU worker with --resources \"{TIMING_SLOT}=1,{GPU}=1\"")
        resources = self.client.run_on_scheduler(worker_resources)
        if any(r.get(GPU, 0) >= 1 for r in resources.values()):
            return {TIMING_SLOT: 1, GPU: 1}, None
        return {}, f"no Dask worker declares a '{GPU}' resource"

    def launch(self, jobs, folder: ResultsFolder) -> list:
        """Nothing to start ahead: each task starts its own warm process."""
        return []

    def env_fingerprints(self) -> set[str]:
        """Every worker's: a row measured on any of them is current."""
        return set(self.client.run(environment.fingerprint).values())

    def run(self, jobs, folder: ResultsFolder, *, timeout: float,
            memory_budget_gb: float | None, on_start=None, unless=None):
        """Submit every run, then yield (job, outcome) as each becomes durable in `folder`.
        All are submitted at once, so `unless` cannot apply: a Dask sweep runs every seed."""
        placements = {framework: self._gpu_placement(framework) for framework in
                      dict.fromkeys(job.framework for job in jobs if job.needs_gpu)}
        futures, skipped = {}, []
        for job in jobs:
            gpu_resources, gpu_reason = placements.get(job.framework, ({}, None)) \
                if job.needs_gpu else ({TIMING_SLOT: 1}, None)
            if gpu_reason:
                skipped.append((job, gpu_reason))
                continue
            future = self.client.submit(
                execute_on_worker, job, timeout, memory_budget_gb,
                key=f"study-run-{job.spec.run_id}", retries=self.retries,
                resources=gpu_resources)
            futures[future] = job
        self.log.to_file(folder.logs_dir / DASK_LOG)
        for job, reason in skipped:
            yield job, skip(job, folder, reason)
        recorded: set[str] = set()
        completed, unheard, quiet_since = as_completed(futures), set(), time.monotonic()
        try:
            while not completed.is_empty():
                batch = completed.next_batch(block=False)
                if not batch and time.monotonic() - quiet_since < self.check_every:
                    time.sleep(POLL_SECONDS)
                    continue
                quiet_since = time.monotonic()
                if not batch:  # nothing for a while: is anything still coming?
                    pending = {f: job for f, job in futures.items()
                               if job.spec.run_id not in recorded}
                    lost, unheard = self._lost(list(pending), unheard)
                    if lost:  # said in each run's row instead of waited for
                        for job in sorted(pending.values(), key=lambda j: j.spec.run_id):
                            recorded.add(job.spec.run_id)
                            yield job, record_error(job, folder, lost)
                        break
                for future in batch:
                    job = futures[future]
                    if job.spec.run_id in recorded:  # never written twice, whatever Dask says
                        continue
                    outcome = record(future, job, folder)
                    recorded.add(job.spec.run_id)
                    future.release()  # a finished result is not kept (nor recomputed) anywhere
                    yield job, outcome
        finally:
            left = [f for f, job in futures.items() if job.spec.run_id not in recorded]
            if left and self.client is not None:
                with suppress(Exception):  # the scheduler may be gone: nothing to cancel there
                    self.client.cancel(left)

    def _lost(self, pending: list, unheard: set) -> tuple[str | None, set]:
        """Why the pending runs will never be reported (None while they may be), and the keys
        the scheduler has finished or forgotten but this client has not heard of. A closing
        scheduler can end the client's stream without a word; a run is given up once it stays
        unheard for a whole check."""
        keys = [future.key for future in pending]
        try:
            states = self.client.run_on_scheduler(task_states, keys=keys)
        except Exception as exc:  # unreachable, closed, or the client itself closed
            message = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            return f"the Dask scheduler stopped answering ({message})", set()
        now = {key for key, state in states.items()
               if state in (None, "memory", "erred", "released", "forgotten")}
        if now & unheard:
            return ("the Dask client stopped hearing from the scheduler: it finished or dropped "
                    "runs this client was never told of"), set()
        return None, now


class DaskLog:
    """Dask's own log lines (a reconnect's traceback) kept off the terminal: dropped until the
    results folder is known, then written to its logs/dask-client.log (not with `--verbose`)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._saved: dict[logging.Logger, tuple[list, bool]] = {}

    @staticmethod
    def _dask_loggers() -> list[logging.Logger]:
        """Dask's top logger, and those below it with a handler of their own."""
        below = [logger for name, logger in logging.root.manager.loggerDict.items()
                 if name.startswith("distributed.") and isinstance(logger, logging.Logger)
                 and logger.handlers]
        return [logging.getLogger("distributed"), *below]

    def open(self) -> None:
        if self.enabled and not self._saved:
            for logger in self._dask_loggers():
                self._saved[logger] = (logger.handlers[:], logger.propagate)
                logger.handlers = [logging.NullHandler()]  # not logging's last resort, stderr
                logger.propagate = False

    def to_file(self, path) -> None:
        if self._saved:
            handler = logging.FileHandler(path, delay=True)
            handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s "
                                                   "%(message)s"))
            for logger in self._saved:
                logger.handlers = [handler]

    def close(self) -> None:
        for logger, (handlers, propagate) in self._saved.items():
            for handler in logger.handlers:
                handler.close()
            logger.handlers, logger.propagate = handlers, propagate
        self._saved = {}


def record(future, job: Job, folder: ResultsFolder) -> dict:
    """Make one finished task's run durable, as a local sweep would; returns its outcome."""
    run_id = job.spec.run_id
    if future.status == "finished":
        result = future.result()
        write_text_atomic(result["log"], folder.log_path(run_id))
        folder.write_run(result["row"], result["tables"])
        return result["outcome"]
    exc = RuntimeError(f"the task ended {future.status}")
    if future.status in ("error", "cancelled"):  # a lost one would wait for its result
        try:
            future.result()  # raises the task's exception, or why it was cancelled
        except BaseException as raised:  # noqa: BLE001 -- whatever it is, it is the row's
            exc = raised
    if future.status == "cancelled":  # e.g. the client lost the scheduler: it says why
        message = (f"the Dask task was cancelled ({getattr(exc, 'reason', None) or 'no reason'}"
                   f"): {getattr(exc, 'msg', None) or ''}")
    else:
        message = f"the Dask task failed: {type(exc).__name__}: {exc}"
    return record_error(job, folder, message.strip().splitlines()[0][:500],
                        "".join(traceback.format_exception(exc)))


def record_error(job: Job, folder: ResultsFolder, message: str, log: str | None = None) -> dict:
    """An `error` row for a run the cluster did not give back (`--retry-failed` runs it again)."""
    write_text_atomic(log or message + "\n", folder.log_path(job.spec.run_id))
    write_engine_row(job, folder, "error", message, worker_host=None)
    return {"status": "error", "wall_seconds": None}
