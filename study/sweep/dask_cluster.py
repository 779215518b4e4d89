"""The local Dask cluster of `study run --executor dask --workers N`, in a process of its own
session (`python -m study.sweep.dask_cluster PARENT_PID N`).

Ctrl-C at a terminal signals every process of the foreground group. Worker processes started by
the sweep's own process would each take it, and print a traceback (30 lines, several times over)
while they start or while the sweep closes them. In a session of their own they never see it:
the sweep alone stops on Ctrl-C and closes the cluster. Protocol: this process prints the
scheduler's address as one line once its workers are up, then keeps the cluster until its stdin
closes; it dies with the sweep (parent-death signal), and its workers with it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from datasets.errors import InputError
from study.sweep.interpreter import python_command

CLOSE_SECONDS = 20  # for the workers to stop; then the whole session is killed


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
        address = self.proc.stdout.readline().strip()
        if not address:
            self.close()
            raise InputError(f"the local Dask cluster of {self.workers} workers did not start "
                             "(--verbose shows why)")
        return address

    def close(self, graceful: bool = True) -> None:
        """Stop the cluster: its workers close their tasks, or (not `graceful`: the sweep was
        interrupted, its runs in flight are abandoned) the whole session is killed at once."""
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
    from study.sweep.dask import local_cluster
    from study.sweep.forkserver import die_with_parent

    die_with_parent(parent)
    with local_cluster(workers) as cluster:
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()  # until the sweep closes it, or dies


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
