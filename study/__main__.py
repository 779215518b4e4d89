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
    "bench": ("study.bench.command", "how close each implementation is to the machine: ratios "
                                     "to a read pass, a hand-written loop, the memory floor and "
                                     "the normal equations"),
}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and still exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def chosen_command(argv) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser, with the arguments of `command` only (its module is imported for them)."""
    parser = Parser(prog="convergence-study", description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's and Dask's own log messages on the terminal")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (module, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            importlib.import_module(module).add_arguments(command_parser)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP, handled like Ctrl-C: runs in flight are killed, finished ones kept."""


def _terminate(signum, frame):
    raise Terminated(signal.Signals(signum).name)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    command = chosen_command(argv)
    try:
        if "--verbose" not in argv:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported
        args = build_parser(command if command in COMMANDS else None).parse_args(argv)
        from datasets.errors import InputError
        from study.output import ResultsWriteError

        try:
            return importlib.import_module(COMMANDS[args.command][0]).main(args)
        except InputError as exc:
            print(f"convergence-study {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except ResultsWriteError as exc:
            print(f"convergence-study {args.command}: error: {exc}", file=sys.stderr)
            return 1
    except (KeyboardInterrupt, ImportError) as exc:
        interrupt = _interrupt_behind(exc)
        if interrupt is None:
            raise
        what = "terminated" if isinstance(interrupt, Terminated) else "interrupted"
        print(f"convergence-study {command or ''}: {what}; finished runs are kept, run the "
              "same command again to resume", file=sys.stderr)
        return 143 if isinstance(interrupt, Terminated) else 130


def _interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C (or SIGTERM) behind an exception: an extension module's import turns one
    into "ImportError: initialization failed"."""
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def run() -> None:
    """The entry point: signals become clean endings before anything heavy is imported."""
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    code = main()
    if code in (130, 143):
        # Interrupted and cleaned up. CPython marks a KeyboardInterrupt that passed through
        # certain C calls (an import, say) as unhandled even though it was caught here, and
        # would end the process by SIGINT: leave with the status that was said instead.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
