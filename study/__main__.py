"""Command line: `python -m study <command>` (also installed as `convergence-study`).

Bad input ends with one line on stderr and exit status 2, before any output file is written.
"""

from __future__ import annotations

import argparse
import os
import sys

from datasets.errors import InputError
from study.output import ResultsWriteError

COMMANDS = {
    "regress": ("study.regression", "run one regression configuration"),
    "run": ("study.runner", "run a study config's grid, one fresh process per run, resumable"),
    "summarize": ("study.summary", "median time to target per configuration, with 95% CIs"),
    "figures": ("study.plots", "draw a study's comparison figures from its results tables"),
    "report": ("study.report", "write reports/report.md and report.html from results and figures"),
    "feedmode": ("study.feedmode", "the CNN feed-mode experiment (constant vs placeholder ...)"),
    "bench": ("study.bench", "how close each implementation is to the machine: ratios to a read "
              "pass, a hand-written loop, the memory floor and the normal equations"),
}


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and still exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="convergence-study", description=__doc__.splitlines()[0])
    parser.add_argument("--verbose", action="store_true",
                        help="show TensorFlow's own log messages on the terminal")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (module, help_text) in COMMANDS.items():
        try:
            __import__(module)
        except ModuleNotFoundError as exc:  # a study still being built
            if exc.name != module:
                raise
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        sys.modules[module].add_arguments(command)
    return parser


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--verbose" not in argv:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported
    args = build_parser().parse_args(argv)
    try:
        return sys.modules[COMMANDS[args.command][0]].main(args)
    except InputError as exc:
        print(f"convergence-study {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except ResultsWriteError as exc:
        print(f"convergence-study {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"convergence-study {args.command}: interrupted; finished runs are kept, "
              "run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
