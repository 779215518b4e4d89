"""A long compiled call (a fused TensorFlow loop) made so that Ctrl-C and SIGTERM stay prompt.

Python runs signal handlers in the main thread only, between bytecodes: inside one C++ call it
hears nothing until the call returns. So the call runs on a worker thread while the main thread
waits in short waits, its handlers running after each. The clocks run inside the call, so
nothing is added to what is timed. The worker is one daemon thread for the whole process:
TensorFlow keeps state per thread, and a fresh thread per run made tracing about 30% slower
(scripts/interrupt_cost.py). A caller that catches the interrupt and goes on leaves the
abandoned loop running on the worker, ahead of its next call.
"""

from __future__ import annotations

import os
import queue
import threading
from concurrent.futures import Future, wait

WAKE_SECONDS = 0.1
_worker: tuple[int, queue.SimpleQueue] | None = None  # (pid, its calls)


def call_interruptibly(function, *args):
    """`function(*args)`, its result or its exception, with the caller's signals kept live."""
    if threading.current_thread() is not threading.main_thread():
        return function(*args)  # only the main thread runs handlers: nothing to keep live
    future: Future = Future()
    _calls().put((future, function, args))
    while not future.done():
        wait([future], timeout=WAKE_SECONDS)
    return future.result()


def _calls() -> queue.SimpleQueue:
    """The worker's queue, the worker started on first use (again in a forked child, which
    inherits the queue but not the thread)."""
    global _worker
    if _worker is None or _worker[0] != os.getpid():
        calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=_serve, args=(calls,), name="compiled-loop",
                         daemon=True).start()
        _worker = (os.getpid(), calls)
    return _worker[1]


def _serve(calls: queue.SimpleQueue) -> None:
    while True:
        future, function, args = calls.get()
        try:
            future.set_result(function(*args))
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller as it is
            future.set_exception(exc)
