"""A warm process that forks one fresh child per run (`python -m study.sweep.forkserver PID MOD..`).

Starting an interpreter and importing NumPy, SciPy and pandas (and TensorFlow: 3-6 s) for every
run cost more than most runs measure. This process imports them once (a framework is imported,
never initialised, which keeps forking safe), then forks a child per run. Nothing a run's
timing must include is done here.

Protocol, one JSON object per line: {"ready": pid}; each request line is a run
(`study.sweep.child.execute`), answered {"started": pid, "inherited_rss": bytes}, then
{"exited": pid, "status": wait status, "maxrss_kb": n}; or {"import": [MOD..], "log": path}
(a process started ahead with the NumPy stack alone: study.sweep.head_start), answered
{"imported": n} once they are imported and its stderr goes to the log. It dies with its
runner, its children with it.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import json
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
# what every warm process imports first (then its framework's and its study's modules)
NUMPY_STACK = ("numpy", "scipy.linalg", "scipy.optimize", "pandas", "pyarrow.parquet",
               "threadpoolctl", "study.sweep.child", "study.sweep.child:warm",
               "study.sweep.noise")


def die_with_parent(expected_parent: int | None = None) -> None:
    """Have Linux kill this process when its parent dies (and check it has not already)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if expected_parent is not None and os.getppid() != expected_parent:
        os._exit(1)


def resident_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def import_all(preload) -> None:
    for item in preload:  # a module, or module:function to call once imported
        module, _, call = item.partition(":")
        imported = importlib.import_module(module)
        if call:
            getattr(imported, call)()


def hold_blas() -> None:
    """Make the BLAS controller a run sets its threads with after the last import here (one
    made earlier is made again in every run's process, 5 ms: optimizers.blas_threads)."""
    blas = sys.modules.get("optimizers.blas_threads")
    if blas is not None:
        blas.controller()


def serve(preload) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the runner's to handle
    import_all(preload)
    from study.sweep.environment import collect  # heavy: after the fork
    from study.sweep.noise import calibration_buffer

    collect()  # once here; every child inherits it (the git and nvidia-smi calls included)
    calibration_buffer()
    hold_blas()
    # out of the collector's sight, a child's collections neither walk nor copy what is here
    gc.collect()
    gc.freeze()
    say({"ready": os.getpid()})
    me = os.getpid()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if "import" in request:
            if request.get("log"):
                log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND
                              | os.O_NOFOLLOW, 0o644)
                os.dup2(log, 2)
                os.close(log)  # (else every run's child inherits it too)
            import_all(request["import"])
            hold_blas()
            gc.collect()
            gc.freeze()
            say({"imported": len(request["import"])})
            continue
        inherited = resident_bytes()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, me)
        say({"started": pid, "inherited_rss": inherited})
        _, status, usage = os.wait4(pid, 0)
        say({"exited": pid, "status": status, "maxrss_kb": usage.ru_maxrss})


def _child(request: dict, server: int) -> None:
    code = 1
    # The warm process's exit handlers are its own (one could remove files it still uses); the
    # run's own are run before it leaves: TensorFlow's autograph removes its generated modules
    # there, which a Keras run left in /tmp by the dozen.
    atexit._clear()
    try:
        os.setsid()  # a process group of its own: the runner kills it (and what it started)
        die_with_parent(server)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        log = os.open(request["log"],  # never through a link planted in the results folder
                      os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        sys.stdin = open(os.devnull)  # noqa: SIM115 -- replaces the server's stdin for good
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        from study.sweep.child import execute  # heavy: after the fork

        execute(request)
        code = 0
    except BaseException:  # noqa: BLE001 -- whatever happens, the child must not return
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # (what a handler raises is printed to the log)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


if __name__ == "__main__":
    die_with_parent(int(sys.argv[1]))
    serve(sys.argv[2:])
