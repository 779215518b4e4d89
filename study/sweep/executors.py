"""Where runs execute. `LocalExecutor`: here, one at a time, each in a child of a warm fork
server (`study.sweep.isolate`); `study.sweep.dask.DaskExecutor`: on a Dask cluster. Either way
the runner makes the rows durable in the study's results folder."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache

from study.sweep import environment
from study.sweep.child import base_row
from study.sweep.folder import ResultsFolder
from study.sweep.isolate import NUMPY_STACK, TENSORFLOW, ForkServer, ServerDied, run_isolated

NO_GPU = "no GPU visible to TensorFlow"


@dataclass
class Job:
    """One spec as the runner hands it to an executor."""

    spec: object
    request: dict  # what the run's process needs: kind, study, spec JSON, fingerprints, order
    preload: tuple[str, ...]  # modules of the warm process that forks it
    needs_gpu: bool = False


@lru_cache(maxsize=1)
def gpu_visible(python: str = sys.executable) -> bool:
    """Asked once, in a subprocess, so that no warm process ever initialises a device."""
    code = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=300,
                             env=env)
        return out.returncode == 0 and int(out.stdout.strip().splitlines()[-1]) > 0
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return False


def skip(job: Job, folder: ResultsFolder, reason: str) -> dict:
    env = environment.collect()
    folder.write_run({**base_row(job.request, job.spec), "status": "skipped", "message": reason,
                      **env, "env_fingerprint": environment.fingerprint(env)})
    return {"status": "skipped", "wall_seconds": 0.0}


class LocalExecutor:
    """One run at a time on this machine, in the order given."""

    def __init__(self, python: str = sys.executable):
        self.python = python
        self.servers: dict[tuple[str, ...], ForkServer] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for server in self.servers.values():
            server.close()
        self.servers.clear()
        return False

    def env_fingerprints(self) -> set[str]:
        return {environment.fingerprint()}

    def server(self, preload, folder: ResultsFolder) -> ForkServer:
        server = self.servers.get(preload)
        if server is None or not server.alive:
            if server is not None:
                server.close()
            server = ForkServer(preload, self.python,
                                log=folder.logs_dir / f"server-{'+'.join(preload[-1:])}.log")
            server.start()
            self.servers[preload] = server
        return server

    def run(self, jobs, folder: ResultsFolder, *, timeout: float,
            memory_budget_gb: float | None, on_start=None):
        """Yield (job, outcome) as each run becomes durable in `folder`."""
        for job in jobs:
            if on_start is not None:
                on_start(job)
            if job.needs_gpu and not gpu_visible(self.python):
                yield job, skip(job, folder, NO_GPU)
                continue
            try:
                outcome = run_isolated(self.server(job.preload, folder), job, folder,
                                       timeout=timeout, memory_budget_gb=memory_budget_gb)
            except ServerDied as exc:
                broken = self.servers.pop(job.preload, None)
                if broken is not None:
                    broken.close()
                env = environment.collect()
                folder.write_run({**base_row(job.request, job.spec), "status": "error",
                                  "message": f"{exc}; see {folder.logs_dir}", **env,
                                  "env_fingerprint": environment.fingerprint(env)})
                outcome = {"status": "error", "wall_seconds": None}
            yield job, outcome


def preload_for(needs_tensorflow: bool, measure_module: str) -> tuple[str, ...]:
    """The warm process's imports: the NumPy stack and the study's measuring module, plus
    TensorFlow for runs that use it (never initialised there: see study.sweep.forkserver)."""
    return (*NUMPY_STACK, *(TENSORFLOW if needs_tensorflow else ()), measure_module)
