"""A long compiled call (a fused TensorFlow loop: tracing, compilation and the whole run) made
so that Ctrl-C and SIGTERM stay prompt.

Python runs signal handlers in the main thread only, between bytecodes: a main thread inside
one C++ call (`tf.while_loop` to convergence) hears nothing until the call returns, which with
no time budget may be never. So the call runs in a worker thread while the main thread waits
in short joins, in which its handlers run: an interrupt ends the wait within `WAKE_SECONDS`
and propagates as usual. The worker is a daemon: a command that was interrupted ends with its
process (`study.__main__.run` exits at once), and a library caller that catches the interrupt
leaves the loop to finish in the background. Nothing is added to what is timed: the clocks run
inside the call, on the worker, and the waiting thread only wakes a few times a second (the
cost, measured paired, is in README's "What is measured").
"""

from __future__ import annotations

import threading

WAKE_SECONDS = 0.1


def call_interruptibly(function, *args):
    """`function(*args)`, its result or its exception, with the caller's signals kept live."""
    if threading.current_thread() is not threading.main_thread():
        return function(*args)  # only the main thread runs handlers: nothing to keep live
    outcome: dict = {}

    def work():
        try:
            outcome["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 -- handed to the caller as it is
            outcome["error"] = exc

    worker = threading.Thread(target=work, name="compiled-loop", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(WAKE_SECONDS)
    if "error" in outcome:
        raise outcome.pop("error")
    return outcome["value"]
