"""A warm process started before the command's own imports.

A sweep command spends a second or more importing the runner before it knows which warm
processes its runs need, and each of those then imports the NumPy stack for about as long. Every
warm process begins with that stack (`forkserver.NUMPY_STACK`), so `start` launches one at once,
and its imports overlap the command's. The local executor `take`s it for its first warm process
and sends it the rest of that process's imports; one it cannot use (another interpreter, a
changed environment, a Dask cluster) is ended by `close`. Only a process started with exactly
the environment a warm process would get now is taken: what a library reads when it loads
(OpenBLAS's spin, TensorFlow's log level, KERAS_BACKEND) is never a different one.
"""

from __future__ import annotations

import os
import subprocess
import sys

from study.sweep.forkserver import NUMPY_STACK
from study.sweep.interpreter import python_command, short_spin

_started: tuple[subprocess.Popen, dict] | None = None  # the process and its environment


def _command(python: str = sys.executable) -> tuple[list[str], dict[str, str]]:
    """The warm process's command line and environment, with what the runner's own imports set
    before it starts one: OpenBLAS's spin (study.sweep.environment) and threadpoolctl's
    KMP_DUPLICATE_LIB_OK."""
    import threadpoolctl  # noqa: F401 -- for what it sets; only a sweep command loads it

    short_spin()
    return python_command("-m", "study.sweep.forkserver", str(os.getpid()), *NUMPY_STACK,
                          python=python)


def start() -> None:
    """Launch the NumPy stack's warm process (once a command); a failure is only a slower
    start, so it is not reported."""
    global _started
    if _started is not None:
        return
    argv, env = _command()
    try:
        _started = (subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env), env)
    except OSError:
        _started = None


def take(preload: tuple[str, ...], python: str) -> subprocess.Popen | None:
    """The started process, now the caller's, if it can become the warm process of `preload`
    run by `python`; else None (and it is ended)."""
    global _started
    started, _started = _started, None
    if started is None:
        return None
    process, env = started
    if (preload[:len(NUMPY_STACK)] == NUMPY_STACK and python == sys.executable
            and env == _command(python)[1] and process.poll() is None):
        return process
    _end(process)
    return None


def close() -> None:
    """End the started process unless it was taken."""
    global _started
    started, _started = _started, None
    if started is not None:
        _end(started[0])


def _end(process: subprocess.Popen) -> None:
    process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout):
        pipe.close()
