"""`python -m study feedmode`: the feed-mode study from a config and/or flags, run by the same
engine as `study run` (a config with `kind = "feedmode"` runs the same way)."""

from __future__ import annotations

import argparse

from convergence_study.errors import InputError
from study.feedmode.config import FLAGS, with_flags
from study.feedmode.model import DTYPES, GRAPPLER, MODES
from study.feedmode.plugin import framework
from study.frameworks.registry import FRAMEWORKS
from study.sweep import runner
from study.sweep.executors import gpu_visible
from study.sweep.grid import parse_study, read_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "conv2d(3x3x1x6) -> avg_pool(2x2) -> relu on N x 32 x 32 x 1, fed in different ways, each "
        "run in a fresh process. Flags given here replace the same key in every [[grid]] of "
        "--config. Modes: " + "; ".join(f"{k}: {m.help}" for k, m in MODES.items()))
    parser.add_argument("--config", help="study TOML (e.g. configs/feedmode.toml)")
    parser.add_argument("--n", type=int, nargs="+", help="batch size(s) N (default 60000)")
    parser.add_argument("--dtype", nargs="+", dest="dtypes",
                        help=f"one or more of: {', '.join(DTYPES)} (default float64)")
    parser.add_argument("--modes", nargs="+", help=f"default all: {', '.join(MODES)}")
    parser.add_argument("--grappler", nargs="+",
                        help=f"graph optimisation variants of the TF1 modes: {', '.join(GRAPPLER)} "
                             "(default: default)")
    parser.add_argument("--calls", type=int, help="timed calls after the first (default 10)")
    parser.add_argument("--device", help="cpu or gpu (default cpu)")
    parser.add_argument("--run-timeout", type=float, dest="run_timeout",
                        help="seconds one run may take before it is killed (default 600)")
    parser.add_argument("--memory-budget-gb", type=float, dest="memory_budget_gb",
                        help="stop a run that adds more than this resident memory (default 80%% "
                             "of the machine's memory)")
    parser.add_argument("--check-n", type=int, dest="check_n",
                        help="N of the check against the NumPy reference (default 16)")
    parser.add_argument("--seed", type=int, help="seed of the input and kernel (default 0)")
    runner.add_sweep_arguments(parser, "output folder (default results/<name>, name 'feedmode' "
                                       "unless the config sets it)", grid=False, executors=False)


def configure(args):
    """The study, validated before anything is written or any run starts."""
    raw = read_config(args.config) if args.config else {}
    if raw.get("kind", "feedmode") != "feedmode":
        raise InputError(f"{args.config}: kind = {raw['kind']!r}; `study feedmode` runs "
                         "feed-mode configs (use `study run` for this one)")
    raw = with_flags({**raw, "kind": "feedmode", "name": raw.get("name", "feedmode")},
                     {key: getattr(args, key) for key in FLAGS})
    study = parse_study(raw, args.config or "command line")
    for name in dict.fromkeys(framework(s) for s in study.specs if s.device == "gpu"):
        if not gpu_visible(name):   # asked in a subprocess: this process imports no framework
            raise InputError(f"--device gpu: {FRAMEWORKS[name].title} sees no GPU on this "
                             "machine")
    return study


def main(args) -> int:
    return runner.execute(configure(args), args)
