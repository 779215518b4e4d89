"""Where runs execute. `LocalExecutor`: here, one at a time, each in a child of a warm fork
server (`study.sweep.isolate`); `study.sweep.dask.DaskExecutor`: on a Dask cluster."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

from study.frameworks.registry import FRAMEWORKS
from study.sweep import environment
from study.sweep.child import base_row
from study.sweep.folder import ResultsFolder
from study.sweep.forkserver import NUMPY_STACK
from study.sweep.interpreter import python_command
from study.sweep.isolate import ForkServer, ServerDied, run_isolated


@dataclass
class Job:
    """One spec as the runner hands it to an executor."""

    spec: object
    request: dict  # what the run's process needs: kind, study, spec JSON, fingerprints, order
    preload: tuple[str, ...]  # modules of the warm process that forks it
    needs_gpu: bool = False
    framework: str | None = None  # whose warm process forks it (None: the NumPy stack)


def no_gpu(framework: str | None) -> str:
    """The reason a GPU run is skipped where its framework sees none."""
    return FRAMEWORKS[framework].no_gpu() if framework else "no GPU visible to NumPy"


GPU_PROBE_SECONDS = 300  # for a framework to count its GPUs; said when it is met


class GpuProbe:
    """Whether a framework sees a GPU, asked in a subprocess (no warm process may initialise a
    device); started early, it runs while the warm processes import."""

    def __init__(self, framework: str, python: str = sys.executable):
        self.framework = framework
        argv, env = python_command("-c", FRAMEWORKS[framework].gpu_count, python=python,
                                   TF_CPP_MIN_LOG_LEVEL="3")
        try:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         text=True, env=env)
        except OSError:
            self.proc = None

    def result(self) -> bool:
        if self.proc is None:
            return False
        try:
            out, _ = self.proc.communicate(timeout=GPU_PROBE_SECONDS)
            return self.proc.returncode == 0 and int(out.strip().splitlines()[-1]) > 0
        except (subprocess.SubprocessError, ValueError, IndexError) as exc:
            if isinstance(exc, subprocess.TimeoutExpired):
                print(f"the {self.framework} GPU count did not come within {GPU_PROBE_SECONDS} "
                      "s; its GPU runs are taken as having no GPU", file=sys.stderr)
            self.proc.kill()
            self.proc.wait()
            return False


_GPU_ANSWERS: dict[tuple[str, str | None], bool] = {}


def gpu_visible(framework: str | None, python: str = sys.executable,
                probe: GpuProbe | None = None) -> bool:
    """Asked once per interpreter and framework (from `probe` when one was started early);
    without the device files its GPU needs, no, without importing the framework."""
    if framework is None or not FRAMEWORKS[framework].gpu_nodes_present():
        return False
    if (python, framework) not in _GPU_ANSWERS:
        _GPU_ANSWERS[python, framework] = (probe or GpuProbe(framework, python)).result()
    return _GPU_ANSWERS[python, framework]


def may_run_here(job: Job, python: str = sys.executable) -> bool:
    """Whether a job may run here, as far as is known without asking a framework: not a GPU
    run where its GPU's device files are missing or its framework already said it sees none."""
    if not job.needs_gpu:
        return True
    if job.framework is None or not FRAMEWORKS[job.framework].gpu_nodes_present():
        return False
    return _GPU_ANSWERS.get((python, job.framework), True)


def write_engine_row(job: Job, folder: ResultsFolder, status: str, message: str,
                     **columns) -> None:
    """The row of a run that measured nothing (skipped, or lost with its process)."""
    env = environment.collect()
    folder.write_run({**base_row(job.request, job.spec), **columns, "status": status,
                      "message": message, **env, "env_fingerprint": environment.fingerprint(env)})


def skip(job: Job, folder: ResultsFolder, reason: str) -> dict:
    write_engine_row(job, folder, "skipped", reason)
    return {"status": "skipped", "wall_seconds": 0.0}


NOT_RUN = "not run"


def not_run(reason: str) -> dict:
    """A run this machine cannot make (no GPU visible): no row, so another machine measures it."""
    return {"status": NOT_RUN, "reason": reason, "wall_seconds": 0.0}


class LocalExecutor:
    """One run at a time on this machine, in the order given."""

    def __init__(self, python: str = sys.executable):
        self.python = python
        self.servers: dict[tuple[str, ...], ForkServer] = {}
        self.starting: list[ForkServer] = []  # launched, not yet waited for

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
    def server_log(framework: str | None, folder: ResultsFolder):
        return folder.logs_dir / f"server-{framework or 'numpy'}.log"

    def server(self, job: Job, folder: ResultsFolder) -> ForkServer:
        server = self.servers.get(job.preload)
        if server is None or not server.alive:
            if server is not None:
                server.close()
            server = ForkServer(job.preload, self.python,
                                log=self.server_log(job.framework, folder))
            server.start()
            self.servers[job.preload] = server
        return server

    def launch(self, jobs, folder: ResultsFolder) -> list[ForkServer]:
        """Start every warm process the jobs need that is not running, without waiting for
        them: their imports overlap the sweep's preparation. None for runs that cannot run here
        (a resumed sweep whose GPU runs were all that was left imported TensorFlow, JAX and
        PyTorch for 6 s to run nothing)."""
        launched = []
        for job in {job.preload: job for job in jobs if may_run_here(job, self.python)}.values():
            if job.preload in self.servers and self.servers[job.preload].alive:
                continue
            server = ForkServer(job.preload, self.python,
                                log=self.server_log(job.framework, folder))
            server.launch()
            launched.append(server)
            self.servers[job.preload] = server
        self.starting += launched
        return launched

    def warm_up(self, jobs, folder: ResultsFolder) -> None:
        """Start the warm processes and the GPU questions at once, and wait for all before the
        first run: their imports overlap each other, never a run."""
        probes = {framework: GpuProbe(framework, self.python) for framework in
                  dict.fromkeys(job.framework for job in jobs if job.needs_gpu)
                  if framework is not None and (self.python, framework) not in _GPU_ANSWERS
                  and FRAMEWORKS[framework].gpu_nodes_present()}
        self.launch(jobs, folder)
        for framework, probe in probes.items():
            gpu_visible(framework, self.python, probe)
        starting, self.starting = self.starting, []
        for server in starting:
            try:
                server.wait_ready()
            except ServerDied:  # its runs find it dead and are recorded as errors
                pass

    def run(self, jobs, folder: ResultsFolder, *, timeout: float,
            memory_budget_gb: float | None, on_start=None, unless=None):
        """Yield (job, outcome) as each run becomes durable in `folder`; `unless(job)` may give
        a reason not to start a run, recorded as its skipped row."""
        jobs = list(jobs)
        self.warm_up(jobs, folder)
        for job in jobs:
            if on_start is not None:
                on_start(job)
            if job.needs_gpu and not gpu_visible(job.framework, self.python):
                yield job, not_run(no_gpu(job.framework))
                continue
            reason = unless(job) if unless is not None else None
            if reason:
                yield job, skip(job, folder, reason)
                continue
            try:
                outcome = run_isolated(self.server(job, folder), job, folder,
                                       timeout=timeout, memory_budget_gb=memory_budget_gb)
            except ServerDied as exc:
                broken = self.servers.pop(job.preload, None)
                if broken is not None:
                    broken.close()
                write_engine_row(job, folder, "error", f"{exc}; see {folder.logs_dir}")
                outcome = {"status": "error", "wall_seconds": None}
            yield job, outcome


def preload_for(framework: str | None, plugin) -> tuple[str, ...]:
    """The warm process's imports: the NumPy stack, the study's plugin and measuring module, and
    the framework and the study's modules for it (one framework per warm process; None, the
    host's: else a NumPy run imports its backend after every fork)."""
    extra = FRAMEWORKS[framework].preload if framework else ()
    return (*NUMPY_STACK, *extra, *plugin.preload(framework), plugin.MEASURE_MODULE,
            type(plugin).__module__)
