"""Commands run as a person runs them, to be interrupted at a chosen moment: a real process, a
marker awaited in its output (or a file), then a signal. Shared by tests/test_interrupts.py and
the generated signals of tests/test_generated_inputs.py.

The command line is `study.__main__.run` itself, with test hooks that change nothing else: the
probe study registered (tests/probe_study.py), a marker line on stderr when a compiled loop
starts on its worker thread, and, on request, a destructor that receives a signal and swallows
what the handler raises, as TensorFlow's cleanup and tqdm's `__del__` did (issue 28), or a call
that drops it unreported."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from known_lines import without

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
COMPILED_LOOP = "test hook: compiled loop started"

HOOKS = f"""
import os, signal, sys
import study.sweep.plugin as plugin
plugin.STUDIES["probe"] = "probe_study"
import optimizers.interruptible as interruptible
_started = interruptible.call_interruptibly
def _marked(function, *args):
    def announced(*inner):
        print({COMPILED_LOOP!r}, file=sys.stderr, flush=True)
        return function(*inner)
    return _started(announced, *args)
interruptible.call_interruptibly = _marked

class Cleanup:
    def __init__(self, signum):
        self.signum = signum
    def __del__(self):  # the handler runs in here, and what it raises is swallowed
        os.kill(os.getpid(), self.signum)
        for _ in range(100_000):
            pass

# one signal, on the first call only: a later call (the interrupted sweep's own assemble of its
# tables) is not sent another
def swallowed_after(module, name, signum):
    function, sent = getattr(module, name), []
    def call(*args, **kwargs):
        result = function(*args, **kwargs)
        if not sent:
            sent.append(signum)
            Cleanup(signum)  # dropped at once: its destructor runs here
        return result
    setattr(module, name, call)

def swallowed_before(module, name, signum):
    function, sent = getattr(module, name), []
    def call(*args, **kwargs):
        if not sent:
            sent.append(signum)
            Cleanup(signum)  # dropped at once: its destructor runs here
        return function(*args, **kwargs)
    setattr(module, name, call)

def dropped_before(owner, name, signum):
    # the signal received and what its handler raises dropped, as C++ code that calls Python
    # and catches its errors may: nothing reports it
    function, sent = getattr(owner, name), []
    def call(*args, **kwargs):
        if not sent:
            sent.append(signum)
            try:
                os.kill(os.getpid(), signum)
                for _ in range(100_000):
                    pass
            except KeyboardInterrupt:
                pass
        return function(*args, **kwargs)
    setattr(owner, name, call)
"""

TINY_BENCH = """
from dataclasses import replace
from study.bench import plan
plan.FULL = replace(
    plan.FULL, name="tiny", rows=3000, dtypes=("float64",), optimizers=("gd", "lbfgs"),
    backends={backends!r}, data_iterations=3, gram_iterations=5, repeats=2, read_repeats=2,
    target_repeats=2, target_candidates={candidates!r})
"""


def env() -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def tiny_bench(tensorflow: bool) -> str:
    """Setup lines making `bench` a few seconds long (plus TensorFlow's import if asked)."""
    backends = ("numpy", "tf-fused") if tensorflow else ("numpy",)
    candidates = tuple(("lbfgs", label, "data") for label in backends) + \
        (("lbfgs", "numpy", "gram"),)
    return TINY_BENCH.format(backends=backends, candidates=candidates)


class Command:
    """A running command; its output is collected as it comes."""

    def __init__(self, *args, setup: str = "", session: bool = False, cwd=None):
        code = HOOKS + setup + "\nfrom study.__main__ import run\nrun()\n"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code, *map(str, args)], env=env(), cwd=cwd, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=session)
        self.out: list[str] = []
        self.err: list[str] = []
        self.readers = [threading.Thread(target=self._read, args=(stream, lines), daemon=True)
                        for stream, lines in ((self.proc.stdout, self.out),
                                              (self.proc.stderr, self.err))]
        for reader in self.readers:
            reader.start()
        self.signalled_at: float | None = None

    @staticmethod
    def _read(stream, lines: list[str]) -> None:
        for line in stream:
            lines.append(line)

    def wait_for(self, predicate, seconds: float = 120.0) -> bool:
        """Until `predicate()` holds (True) or the command ended or time ran out (False)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate():
                return True
            if self.proc.poll() is not None:
                return predicate()
            time.sleep(0.02)
        return False

    def printed(self, text: str, stream: str = "err") -> bool:
        return any(text in line for line in (self.err if stream == "err" else self.out))

    def send(self, signum: int, group: bool = False) -> None:
        self.signalled_at = time.monotonic()
        if group:  # as a terminal's Ctrl-C: every process of the foreground group
            os.killpg(self.proc.pid, signum)
        else:
            self.proc.send_signal(signum)

    def interrupt(self, started, delay: float, signum: int) -> tuple[int, str, str]:
        """Once `started()` holds, wait `delay` seconds, send the signal; `finish`."""
        assert self.wait_for(started), "".join(self.err)[-2000:]
        time.sleep(delay)
        self.send(signum)
        return self.finish()

    def finish(self, seconds: float = 60.0) -> tuple[int, str, str]:
        """Exit status, stdout and stderr (the test hook's marker lines left out). A command
        still running after `seconds` is killed and fails the test: it ignored the signal."""
        try:
            code = self.proc.wait(seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"still running {seconds:g} s after the signal: "
                                 f"{''.join(self.err)[-2000:]}") from None
        for reader in self.readers:
            reader.join(10)
        err = "".join(line for line in self.err if COMPILED_LOOP not in line)
        return code, "".join(self.out), err


def interrupted_cleanly(code: int, out: str, err: str, signum: int, finished_line: str,
                        progress: bool = False, warnings=()) -> bool:
    """The ending every interrupted command must have; True when it was interrupted, False
    when it had already finished its work (status 0, its last line printed) as the signal
    came. Anything else fails the test. `progress`: the command's progress lines ("[...]",
    the bench's) may come before the one line that says it was interrupted. `warnings`: the
    names of the known lines (tests/known_lines.py) the command rightly prints in some
    environments (a shell's thread settings, say), which may come before it too; any other
    line fails the test."""
    assert "Traceback" not in err and "Exception ignored" not in err, err
    if code == 0:
        assert finished_line in out, (out, err)
        return False
    expected = 130 if signum == signal.SIGINT else 143
    assert code == expected, (code, err)
    *before, last = without(err, warnings) or [""]
    assert all(progress and line.startswith("[") for line in before), err
    assert ("interrupted" if signum == signal.SIGINT else "terminated") in last, err
    return True


def sentinels(folder: Path, names) -> dict[Path, bytes]:
    """Earlier outputs of a command, to check that an interrupted one leaves them as they were."""
    folder.mkdir(parents=True, exist_ok=True)
    kept = {}
    for name in names:
        path = folder / name
        path.write_bytes(f"finished output {name}".encode())
        kept[path] = path.read_bytes()
    return kept


def unchanged(kept: dict[Path, bytes]) -> bool:
    return all(path.read_bytes() == content for path, content in kept.items()) and \
        not any(p.name.startswith(".") for folder in {p.parent for p in kept}
                for p in folder.iterdir())
