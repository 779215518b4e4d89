"""Command line: `python -m study <command>` (also installed as `convergence-study`).

Bad input ends with one line on stderr and exit status 2, before any output file is written.
Only the chosen command's module is imported (`--help` imports none, NumPy-only commands never
import TensorFlow or the plotting stack). Ctrl-C, SIGTERM and SIGHUP end a command with one
line; a sweep keeps every finished run and kills the runs it started.
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

BLOCKS = __name__ == "__main__" and hasattr(signal, "pthread_sigmask")
if BLOCKS:  # a signal from here to `hold` waits, then is held (raised inside hold: a traceback);
    # interrupts.SIGNALS, named here because that module's import is what a Ctrl-C may interrupt
    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM, signal.SIGHUP))

from convergence_study.errors import InputError, LibraryFailure  # noqa: E402
from study import interrupts  # noqa: E402

if __name__ == "__main__":
    interrupts.hold()  # from here on a Ctrl-C is said in one line
    if BLOCKS:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, interrupts.SIGNALS)

COMMANDS = {
    "regress": ("study.regression.regress", "run one regression configuration"),
    "run": ("study.sweep.runner", "run a study config's grid, one fresh process per run, "
                                  "resumable"),
    "summarize": ("study.results", "summary of a results folder, with paired comparisons"),
    "figures": ("study.figures", "draw a study's comparison figures from its results tables"),
    "report": ("study.report.build", "write reports/report.md and report.html from results and "
                                     "figures"),
    "compare": ("study.compare", "what changed between two results folders of one study: "
                                 "configurations, paired, and the report's conclusions"),
    "feedmode": ("study.feedmode.command", "the CNN feed-mode experiment (constant vs "
                                           "placeholder ...)"),
    "train": ("study.train.command", "one configuration of the train study: time to a "
                                     "validation target for a Keras model on your data"),
    "bench": ("study.bench.command", "how close each implementation is to the machine: ratios "
                                     "to a read pass, a hand-written loop, the memory floor and "
                                     "the normal equations"),
    "files": ("study.files", "the files a config's results, figures or report are made from "
                             "(the Makefile's prerequisites)"),
}


def check_integers(parser: argparse.ArgumentParser, values: dict) -> None:
    """Every integer given is stored in a 64-bit column: one that does not fit is a usage error."""
    for name, value in values.items():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and not -2**63 <= item < 2**63:
                parser.error(f"argument --{name.replace('_', '-')}: {item} does not fit a "
                             "64-bit integer (at most 2**63 - 1)")


class StoreOnce(argparse.Action):
    """argparse's plain store, except that an option given twice is an error (not the last)."""

    given = False

    def __call__(self, parser, namespace, values, option_string=None):
        if self.given and option_string is not None:
            parser.error(f"argument {option_string}: given twice; give it once")
        self.given = True
        setattr(namespace, self.dest, values)


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (exit status 2), an option given twice one too."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def chosen_command(argv) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of `command` only (only its module is imported)."""
    parser = Parser(prog="convergence-study", description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's and Dask's own log messages on the terminal")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module).add_arguments(command_parser)
    return parser


# Sweeps keep every finished run and skip it when the same command runs again.
RESUMABLE = ("run", "feedmode")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = chosen_command(argv)
    written = _files_written()
    if "study.output" in sys.modules:  # a command's inputs are its own (tests run several)
        sys.modules["study.output"].inputs.clear()
    try:
        interrupts.check()  # one held before the handlers
        if "--verbose" not in argv:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported
            from study import tensorflow_logs  # start-up: after the variable

            tensorflow_logs.hold_back()  # the lines that variable cannot hold back
        if command in RESUMABLE and not {"-h", "--help", "--dry-run"} & set(argv):
            from study.sweep import head_start  # start-up: a sweep command's only

            head_start.start()  # the warm process's imports overlap this command's
        parser = build_parser(command if command in COMMANDS else None)
        args = parser.parse_args(argv)
        check_integers(parser, vars(args))
        from study.output import ResultsWriteError  # start-up: --help stays light

        try:
            code = importlib.import_module(COMMANDS[args.command][0]).main(args)
        except (InputError, ResultsWriteError, LibraryFailure) as exc:
            interrupts.check()  # an error that an interrupt caused is the interrupt
            print(f"convergence-study {args.command}: error: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, InputError) else 1  # else a failure, not the input
        interrupts.check()  # one that a library swallowed on its way up
        return code
    except BaseException as exc:  # noqa: BLE001 -- re-raised unless an interrupt is behind it
        interrupt = _interrupt_behind(exc) or interrupts.received()
        if interrupt is None:
            raise
        return _interrupted(command, interrupt, _files_written() - written)
    finally:
        if "study.sweep.head_start" in sys.modules:
            sys.modules["study.sweep.head_start"].close()  # unless the command's runs took it


def _interrupted(command: str | None, interrupt: KeyboardInterrupt, written: int) -> int:
    """Say in one line that the command was stopped and what it leaves; its exit status."""
    interrupts.ignore_from_now()  # a second Ctrl-C cuts nothing short from here on
    what = "terminated" if isinstance(interrupt, interrupts.Terminated) else "interrupted"
    if command in RESUMABLE:
        left = "finished runs are kept, run the same command again to resume"
    elif written:
        left = f"the {written} files written before it are complete, nothing was written after it"
    else:
        left = "nothing was written"
    print(f"convergence-study {command or ''}: {what}; {left}", file=sys.stderr)
    return 143 if isinstance(interrupt, interrupts.Terminated) else 130


def _files_written() -> int:
    output = sys.modules.get("study.output")  # not imported: nothing written
    return output.files_written if output is not None else 0


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) behind an exception (an import turns one into an ImportError)."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


class ReaderMayLeave:
    """stdout or stderr, except that once its reader has gone (`| head -1`) what is printed goes
    to /dev/null and the command carries on to write its files (the summary comes before the
    --out files) and exits with its own status, not 141 (SIGPIPE)."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self):
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def _to_devnull(self):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, self._stream.fileno())  # what is still buffered goes there too
        os.close(devnull)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def run() -> None:
    """The entry point: signals become clean endings before anything heavy is imported."""
    sys.stdout, sys.stderr = ReaderMayLeave(sys.stdout), ReaderMayLeave(sys.stderr)
    try:
        interrupts.install()  # (a signal held so far may be raised as it installs)
        code = main()
    except KeyboardInterrupt as exc:  # in an instant before or after the command's `main`
        code = _interrupted(chosen_command(sys.argv[1:]), exc, _files_written())
    interrupts.ignore_from_now()
    if code in (130, 143):
        # CPython would end the process by SIGINT after a KeyboardInterrupt that passed through
        # certain C calls (an import), caught or not: leave with the status that was said.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
