"""Where runs execute. `LocalExecutor`: here, one at a time, each in a child of a warm fork
server (`study.sweep.isolate`); `study.sweep.dask.DaskExecutor`: on a Dask cluster. Either way
the runner makes the rows durable in the study's results folder."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from study.sweep import environment
from study.sweep.child import base_row
from study.sweep.folder import ResultsFolder
from study.sweep.interpreter import python_command
from study.sweep.isolate import NUMPY_STACK, TENSORFLOW, ForkServer, ServerDied, run_isolated

NO_GPU = "no GPU visible to TensorFlow"


@dataclass
class Job:
    """One spec as the runner hands it to an executor."""

    spec: object
    request: dict  # what the run's process needs: kind, study, spec JSON, fingerprints, order
    preload: tuple[str, ...]  # modules of the warm process that forks it
    needs_gpu: bool = False


class GpuProbe:
    """Whether TensorFlow sees a GPU, asked in a subprocess (so that no warm process ever
    initialises a device); started early, it runs while the warm processes import."""

    CODE = "import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))"

    def __init__(self, python: str = sys.executable):
        argv, env = python_command("-c", self.CODE, python=python, TF_CPP_MIN_LOG_LEVEL="3")
        try:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True, env=env)
        except OSError:
            self.proc = None

    def result(self) -> bool:
        if self.proc is None:
            return False
        try:
            out, _ = self.proc.communicate(timeout=300)
            return self.proc.returncode == 0 and int(out.strip().splitlines()[-1]) > 0
        except (subprocess.SubprocessError, ValueError, IndexError):
            self.proc.kill()
            self.proc.wait()
            return False


_GPU_ANSWERS: dict[str, bool] = {}


def gpu_visible(python: str = sys.executable, probe: GpuProbe | None = None) -> bool:
    """Asked once per interpreter (from `probe` when one was started early)."""
    if python not in _GPU_ANSWERS:
        _GPU_ANSWERS[python] = (probe or GpuProbe(python)).result()
    return _GPU_ANSWERS[python]


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

    @staticmethod
    def server_log(preload, folder: ResultsFolder):
        kind = "tensorflow" if "tensorflow" in preload else "numpy"
        return folder.logs_dir / f"server-{kind}.log"

    def server(self, preload, folder: ResultsFolder) -> ForkServer:
        server = self.servers.get(preload)
        if server is None or not server.alive:
            if server is not None:
                server.close()
            server = ForkServer(preload, self.python, log=self.server_log(preload, folder))
            server.start()
            self.servers[preload] = server
        return server

    def warm_up(self, jobs, folder: ResultsFolder) -> None:
        """Start every warm process the jobs need, and the GPU question, at once, and wait for
        all of them before the first run: their imports overlap each other, never a run."""
        probe = (GpuProbe(self.python) if any(job.needs_gpu for job in jobs)
                 and self.python not in _GPU_ANSWERS else None)
        launched = []
        for preload in dict.fromkeys(job.preload for job in jobs):
            if preload in self.servers and self.servers[preload].alive:
                continue
            server = ForkServer(preload, self.python, log=self.server_log(preload, folder))
            server.launch()
            launched.append(server)
            self.servers[preload] = server
        if probe is not None:
            gpu_visible(self.python, probe)
        for server in launched:
            try:
                server.wait_ready()
            except ServerDied:  # its runs find it dead and are recorded as errors
                pass

    def run(self, jobs, folder: ResultsFolder, *, timeout: float,
            memory_budget_gb: float | None, on_start=None):
        """Yield (job, outcome) as each run becomes durable in `folder`."""
        jobs = list(jobs)
        self.warm_up(jobs, folder)
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


def preload_for(needs_tensorflow: bool, plugin) -> tuple[str, ...]:
    """The warm process's imports: the NumPy stack, the study's plugin and measuring module, and
    TensorFlow and the study's TensorFlow modules for runs that use it (imported, never
    initialised there: see study.sweep.forkserver)."""
    tensorflow = (*TENSORFLOW, *getattr(plugin, "TENSORFLOW_MODULES", ())) \
        if needs_tensorflow else ()
    return (*NUMPY_STACK, *tensorflow, plugin.MEASURE_MODULE, plugin.__name__)
