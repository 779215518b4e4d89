"""One run in its own process, forked from a warm server, under a watchdog.

The runner starts one fork server per framework, asks it to fork a child for each run, and
watches the child: past `run_timeout` seconds or the memory budget (resident memory it added to
what it inherited) its process group is killed and the run recorded `timeout` / `oom`. The child
writes into a pending folder made for it, and only those files are accepted, so a process left
by a dead runner can never overwrite a row. Every process dies with its parent.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from study.output import no_follow
from study.sweep import head_start
from study.sweep.child import base_row
from study.sweep.environment import collect
from study.sweep.folder import ResultsFolder
from study.sweep.forkserver import NUMPY_STACK
from study.sweep.interpreter import python_command

# How often the watchdog checks a run's time and memory (its exit is seen at once): each check
# takes CPU from the run it watches.
POLL_SECONDS = 0.25
START_TIMEOUT = 300.0


class ServerDied(RuntimeError):
    pass


class ForkServer:
    """The runner's end of `study.sweep.forkserver`."""

    def __init__(self, preload: tuple[str, ...], python: str = sys.executable,
                 log: Path | None = None):
        self.preload, self.python, self.log = tuple(preload), python, log
        self.proc: subprocess.Popen | None = None
        self.adopted: subprocess.Popen | None = None  # the head start's process, if taken
        self._buffer = b""

    def start(self) -> None:
        self.launch()
        self.wait_ready()

    def launch(self, ahead: bool = True) -> None:
        """Start the process without waiting for its imports (or, `ahead`, take the one
        `head_start` started and send it the rest of them)."""
        self._buffer = b""
        self.adopted = head_start.take(self.preload, self.python) if ahead else None
        if self.adopted is not None:
            self.proc = self.adopted
            try:
                self.send({"import": list(self.preload[len(NUMPY_STACK):]),
                           "log": str(self.log) if self.log else None})
                return
            except ServerDied:  # it died since it was taken: start one as usual
                self.close()
                self.adopted = None
        argv, env = python_command("-m", "study.sweep.forkserver", str(os.getpid()),
                                   *self.preload, python=self.python)
        stderr = open(self.log, "a", opener=no_follow) if self.log \
            else subprocess.DEVNULL  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=stderr, env=env)
        finally:
            if self.log:
                stderr.close()

    def wait_ready(self) -> None:
        for answer in ("ready", "imported") if self.adopted else ("ready",):
            try:
                message = self.receive(START_TIMEOUT)
            except ServerDied:
                message = None
            if message is None or answer not in message:
                break
        else:
            return
        code = self.proc.poll()
        self.close()
        if self.adopted and answer == "ready":  # its NumPy stack failed, and it had no log:
            self.launch(ahead=False)  # one that has says why
            return self.wait_ready()
        how = "" if code is None else f" (exit status {code})"
        raise ServerDied(f"the warm process ({' '.join(self.preload)}) did not start{how}"
                         + (f"; see {self.log}" if self.log else ""))

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def send(self, request: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise ServerDied(f"the warm process is gone ({exc})") from None

    def receive(self, timeout: float | None) -> dict | None:
        """The next message, or None when none came within `timeout` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise ServerDied("the warm process exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def close(self) -> None:
        if self.proc is None:
            return
        proc, self.proc = self.proc, None
        try:
            proc.stdin.close()
        except OSError:
            pass
        proc.kill()  # nothing of its own to save; a graceful exit took 0.5 s of every sweep
        proc.wait()


def kill_group(pid: int) -> None:
    """Kill a run's process group (and the process, should it not have made its group yet)."""
    for kill in (os.killpg, os.kill):
        try:
            kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def tree_rss(pid: int) -> int:
    """Resident memory of a run's process and its descendants, from its own /proc entries
    (psutil's `children(recursive=True)` scans every process: 2.5 ms of the run's CPU)."""
    page, total, stack = os.sysconf("SC_PAGE_SIZE"), 0, [pid]
    while stack:
        current = stack.pop()
        try:
            total += int(Path(f"/proc/{current}/statm").read_text().split()[1]) * page
            for task in os.listdir(f"/proc/{current}/task"):
                stack += map(int, Path(f"/proc/{current}/task/{task}/children").read_text()
                             .split())
        except FileNotFoundError:  # gone, or a kernel without /proc/.../children
            if current == pid and not Path(f"/proc/{pid}").exists():
                return 0
            if not Path(f"/proc/{current}/task").exists():
                continue
            return _psutil_tree_rss(pid)
        except (OSError, ValueError):
            continue
    return total


def _psutil_tree_rss(pid: int) -> int:
    try:
        proc = psutil.Process(pid)
        return proc.memory_info().rss + sum(c.memory_info().rss
                                            for c in proc.children(recursive=True))
    except psutil.Error:
        return 0


def run_isolated(server: ForkServer, job, folder: ResultsFolder, *, timeout: float,
                 memory_budget_gb: float | None) -> dict:
    """Run one job in a child of `server`; its row is in `folder` when this returns
    {"status", "wall_seconds"}."""
    spec = job.spec
    pending = folder.new_pending(spec.run_id)
    log = folder.log_path(spec.run_id)
    server.send({**job.request, "pending": str(pending), "log": str(log),
                 "cache": str(folder.cache_dir)})
    started = server.receive(START_TIMEOUT)
    if started is None:
        raise ServerDied("the warm process did not fork the run")
    pid, inherited = started["started"], started["inherited_rss"]
    t0, killed, peak, exited = time.monotonic(), None, 0, None
    try:
        while exited is None:
            exited = server.receive(POLL_SECONDS)
            if exited is not None or killed is not None:
                continue
            wall = time.monotonic() - t0
            if wall > timeout:
                killed = ("timeout", f"killed after the run time budget of {timeout:g} s")
                kill_group(pid)
            elif memory_budget_gb is not None:
                peak = max(peak, tree_rss(pid) - inherited)
                if peak > memory_budget_gb * 2**30:
                    killed = ("oom", f"stopped at {peak / 2**30:.2f} GB, over the memory "
                                     f"budget of {memory_budget_gb:g} GB")
                    kill_group(pid)
    except BaseException:  # Ctrl-C, SIGTERM: the run in flight is abandoned, never half-written
        kill_group(pid)
        raise
    wall = time.monotonic() - t0
    status = os.waitstatus_to_exitcode(exited["status"])
    if killed is None and folder.accept(pending, spec.run_id):
        return {"status": _status_of(folder, spec.run_id), "wall_seconds": wall}
    partial = _partial(pending)
    if killed is None:
        killed = ("error", f"the run's process ended with code {status} and no result"
                           + (f", during {partial['phase']}" if partial.get("phase") else "")
                           + f"; last log line: {last_line(log)}")
    elif partial.get("phase"):
        killed = (killed[0], f"{killed[1]}, during {partial['phase']}")
    row = {**{k: v for k, v in partial.items() if folder.schema.kind_of(k) is not None
              and not isinstance(v, (list, dict))},
           **base_row(job.request, spec), "pid": pid, "status": killed[0], "message": killed[1],
           **collect(), "env_fingerprint": job.request.get("env_fingerprint"),
           "wall_seconds": wall}
    folder.write_run(row)
    shutil.rmtree(pending, ignore_errors=True)
    return {"status": killed[0], "wall_seconds": wall}


def _status_of(folder: ResultsFolder, run_id: str) -> str:
    """The accepted row's status; an unreadable row is an error (the scan sets it aside)."""
    try:
        return str(folder.read_row(run_id)["status"])
    except Exception:  # noqa: BLE001 -- pyarrow raises several types for damaged files
        return "error"


def _partial(pending: Path) -> dict:
    try:
        record = json.loads((pending / "partial.json").read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def last_line(path) -> str:
    try:
        lines = [line for line in Path(path).read_text(errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1][:300] if lines else "(empty log)"
