"""Ctrl-C, SIGTERM and SIGHUP in a command's own process: each raises where Python is, and is
remembered.

An exception raised inside a destructor (tqdm's `__del__`) or a garbage-collector callback
(JAX's) is printed as "Exception ignored" and dropped, and the command would go on as if nothing
had happened. So a swallowed interrupt is delivered again at once (`_unraisable`), as if the
signal had come a moment later; and the signal is recorded and asked for again (`check`) before
an output file is replaced, between runs, and at the end: an interrupted command never exits 0
and never replaces finished outputs.

A signal inside an extension module's initialisation is worse. jaxlib's calls Python code from
C++ (nanobind): an interrupt raised there became a C++ exception, which aborted the process
(SIGABRT) or was dropped without a trace, and the command trained on to its budget. So from the
start of an extension module's making to the end of its initialisation, signals are only
recorded, then sent again (`_HeldExtensionLoader`); `held` records them in a block of code and
raises them at its end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from importlib import machinery

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []
_in_flight = 0  # interrupts raised by the handler and not swallowed since
_finishing = 0
_installed = False
_resend: threading.Timer | None = None  # the signal sent again (`_send_again`), if it is to come


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C: runs in flight are killed, finished ones kept."""


def install() -> None:
    """Handle the signals here (the command's main thread) from now on."""
    global _installed
    _installed = True
    _held_in_extension_init()
    for sig in SIGNALS:
        signal.signal(sig, _handle)
    sys.unraisablehook = _unraisable


def hold() -> None:
    """Until `install`: a signal is only recorded, and `check` raises it once the command's
    `main` runs; so one that comes while the command's module is still being made is said in
    one line too."""
    for sig in SIGNALS:
        signal.signal(sig, _record)


@contextlib.contextmanager
def held():
    """A signal in this block is handled once the block is over, by the handler in place
    then."""
    caught: list[int] = []
    try:
        with _recorded(caught):
            yield
    finally:
        _raise(caught)


@contextlib.contextmanager
def _recorded(caught: list[int]):
    """Signals in this block are only appended to `caught`. Only in the main thread, where
    Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda sig, _frame: caught.append(sig))
                for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise(caught: list[int]) -> None:
    for sig in dict.fromkeys(caught):
        signal.raise_signal(sig)


class _HeldExtensionLoader(machinery.ExtensionFileLoader):
    """An extension module made and initialised with signals recorded; then sent again a
    moment later (`_send_again`), once the import has kept the module. Raised any earlier, the
    import dropped the module, and freeing jaxlib's crashed the process (SIGSEGV)."""

    def create_module(self, spec):
        self.caught: list[int] = []
        try:
            with _recorded(self.caught):
                return super().create_module(spec)
        except BaseException:
            _raise(self.caught)  # nothing was made: no initialisation follows
            raise

    def exec_module(self, module):
        try:
            with _recorded(self.caught):
                super().exec_module(module)
        except BaseException:
            _raise(self.caught)  # the import drops the module anyway
            raise
        if self.caught:
            _send_again(self.caught[0])


def _held_in_extension_init() -> None:
    """Modules found in directories from now on are loaded as Python loads them, but for
    extension modules' `_HeldExtensionLoader` (a path hook ahead of the default one, which
    turns down what is not a directory just as it does)."""
    if any(getattr(hook, "holds_signals", False) for hook in sys.path_hooks):
        return
    hook = machinery.FileFinder.path_hook(
        (_HeldExtensionLoader, machinery.EXTENSION_SUFFIXES),
        (machinery.SourceFileLoader, machinery.SOURCE_SUFFIXES),
        (machinery.SourcelessFileLoader, machinery.BYTECODE_SUFFIXES))
    hook.holds_signals = True
    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()  # the directories' finders are made again, by the hook


def _record(signum, frame):
    _received.append(signum)


def ignore_from_now() -> None:
    """The command is over: a later signal is ignored (Python gives its handlers back to the
    system as it exits, and a SIGTERM then would kill the process). Only after `install`: a
    test calling a command in its own process keeps its Ctrl-C."""
    if _installed:
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)


def _handle(signum, frame):
    global _in_flight
    _received.append(signum)
    _in_flight += 1
    _cancel_resend()  # raised now: a signal sent again for an earlier one would be a second
    raise exception_for(signum)


def _send_again(signum: int) -> None:
    """The signal again, from another thread a moment later: sent from the hook itself, its
    handler would run (and raise) inside the hook, where it is dropped once more."""
    global _resend
    _resend = threading.Timer(0.01, os.kill, (os.getpid(), signum))
    _resend.daemon = True
    _resend.start()


def _cancel_resend() -> None:
    if _resend is not None:
        _resend.cancel()


def exception_for(signum: int) -> KeyboardInterrupt:
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return Terminated(signal.Signals(signum).name)


def received() -> KeyboardInterrupt | None:
    """The interrupt received so far, as its exception (None if none was)."""
    return exception_for(_received[0]) if _received else None


def check() -> None:
    """Raise the interrupt again if one was received (and swallowed on its way up). A signal
    about to be sent again for it is not: arriving while the interrupted command writes what
    it finished (`finishing`), it cut that short (a sweep's tables were never written)."""
    if _received:
        _cancel_resend()
        raise exception_for(_received[0])


def check_before_writing() -> None:
    """`check`, except for the writes an interrupted command still makes (`finishing`)."""
    if not _finishing:
        check()


@contextlib.contextmanager
def finishing():
    """Writes of finished work that an interrupted command still makes: a sweep's tables of
    the runs it finished."""
    global _finishing
    _finishing += 1
    try:
        yield
    finally:
        _finishing -= 1


def _unraisable(unraisable) -> None:
    """An interrupt swallowed by a destructor or a gc callback is sent again, unless another is
    already on its way up; Python's "Exception ignored in ..." report of it is dropped."""
    global _in_flight
    if isinstance(unraisable.exc_value, KeyboardInterrupt) and _received:
        _in_flight -= 1
        if _in_flight == 0 and _installed:
            _send_again(_received[-1])
        return
    sys.__unraisablehook__(unraisable)
