"""The local Dask cluster of `study run --executor dask --workers N`, in a process of its own
session (`python -m study.sweep.dask_cluster PARENT_PID N`).

Ctrl-C at a terminal signals every process of the foreground group: workers started by the
sweep's own process would each print a traceback. In a session of their own they never see it.
This process prints the scheduler's address once its workers are up, then keeps the cluster
until its stdin closes; it dies with the sweep, and its workers with it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from contextlib import contextmanager

import dask
from distributed import LocalCluster

from convergence_study.errors import InputError
from study.sweep.forkserver import die_with_parent
from study.sweep.interpreter import python_command

CLOSE_SECONDS = 20  # for the workers to stop; then the whole session is killed
START_SECONDS = 300  # for the cluster to say its address; said when it is met
TIMING_SLOT = "timing_slot"  # the resource a worker has one of: one timed run at a time
NANNY_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
NANNY_EXPORTS = ("MALLOC_TRIM_THRESHOLD_", "PYTHONHASHSEED")


@contextmanager
def local_cluster(n_workers: int = 1, resources: dict | None = None, **kwargs):
    """A LocalCluster of single-threaded worker processes, each with one timing slot, keeping
    this process's thread settings instead of the nanny's OMP_NUM_THREADS=1."""
    saved = {name: os.environ.get(name) for name in NANNY_THREAD_VARIABLES + NANNY_EXPORTS}
    unset = {f"distributed.nanny.pre-spawn-environ.{name}": None
             for name in NANNY_THREAD_VARIABLES}
    try:
        with dask.config.set(unset):
            cluster = LocalCluster(
                n_workers=n_workers, processes=True, threads_per_worker=1,
                resources={TIMING_SLOT: 1, **(resources or {})}, dashboard_address=None,
                # no dashboard; its bare HTTP server on any free local port, not 8787
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}, **kwargs)
        with cluster:
            yield cluster
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


class ClusterProcess:
    """The sweep's end: start the cluster, its scheduler address, close it."""

    def __init__(self, workers: int, verbose: bool = False):
        self.workers, self.verbose = workers, verbose
        self.proc: subprocess.Popen | None = None

    def start(self) -> str:
        argv, env = python_command("-m", "study.sweep.dask_cluster", str(os.getpid()),
                                   str(self.workers))
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
            stderr=None if self.verbose else subprocess.DEVNULL, text=True,
            start_new_session=True)
        started = select.select([self.proc.stdout], [], [], START_SECONDS)[0]
        address = self.proc.stdout.readline().strip() if started else ""
        if not address:
            self.close(graceful=False)
            raise InputError(f"the local Dask cluster of {self.workers} workers did not start"
                             + ("" if started else f" within {START_SECONDS} s")
                             + " (--verbose shows why)")
        return address

    def close(self, graceful: bool = True) -> None:
        """Stop the cluster, or (not `graceful`: the sweep was interrupted) kill its session."""
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            proc.stdin.close()
            proc.wait(CLOSE_SECONDS if graceful else 0)
        except (OSError, subprocess.TimeoutExpired):
            try:  # not reaped yet, so the group is still this session's
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()


def serve(parent: int, workers: int) -> None:
    die_with_parent(parent)
    with local_cluster(workers) as cluster:
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()  # until the sweep closes it, or dies


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
