"""A study plugin for the sweep engine's own tests: each run reports its process and, on
request, misbehaves (sleeps, crashes, raises, allocates, works under injected load).

Registered by the tests as kind "probe" (the tests folder goes on PYTHONPATH, so the warm
processes can import it too). It takes the engine's defaults (study.sweep.plugin.StudyPlugin)
for what it leaves out: no grid check, prerequisites or preload, no GPU, failed only by errors,
no answers."""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from study.sweep.grid import as_list
from study.sweep.plugin import Measurement, StudyPlugin
from study.sweep.schema import ENGINE, Column, Schema

KIND = "probe"
CONFIG_KEYS = ("actions", "seeds", "tf", "pid_dir", "seconds")
MEASURE_MODULE = "probe_study"
FIGURES_MODULE = REPORT_MODULE = "probe_study"  # never drawn or reported
MEASURE_STATUSES = ("ok",)
SCHEMA = ENGINE + Schema("runs", (
    Column("action", "str"), Column("seed", "int"), Column("tf", "bool"),
    Column("ppid", "int"), Column("counter", "int"), Column("tf_ops_before", "int"),
))
SIDE_TABLES = {"steps": Schema("steps", (Column("run_id", "str"), Column("step", "int")))}
COUNTER = 0  # a run that shared its process with another would see it above 1


@dataclass(frozen=True)
class Spec:
    action: str
    seed: int = 0
    tf: bool = False
    pid_dir: str = ""
    seconds: float = 0.6
    repeat: int = 0

    @property
    def run_id(self) -> str:
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def axes(self) -> dict:
        return {"action": self.action, "seed": self.seed, "tf": self.tf, "repeat": self.repeat}

    def label(self) -> str:
        return f"{self.action} seed={self.seed}"


def expand(raw, source, name, repeats):
    return [Spec(action, seed, raw.get("tf", False), raw.get("pid_dir", ""),
                 raw.get("seconds", 0.6), repeat)
            for action in as_list(raw.get("actions", ["ok"]))
            for seed in as_list(raw.get("seeds", [0])) for repeat in range(repeats)]


def spec_from_json(text):
    return Spec(**json.loads(text))


def framework(spec):
    return "tensorflow" if spec.tf else None


def code_files(spec):
    return ["tests/probe_study.py"]


IMPORTED_BY = os.getpid()  # the warm process, in a run's process


def _at_exit(who: str) -> None:
    """Leave a mark in $PROBE_EXIT_DIR, if set, that an exit handler ran in this process."""
    folder = os.environ.get("PROBE_EXIT_DIR")
    if folder and os.getpid() != IMPORTED_BY:
        Path(folder, f"{who}-{os.getpid()}").touch()


atexit.register(_at_exit, "inherited")  # registered in whichever process imports this module


def _work(seconds: float) -> None:
    """A fixed amount of single-threaded work, about `seconds` long on a quiet machine."""
    end = time.perf_counter() + seconds
    x = np.ones(1000)
    while time.perf_counter() < end:
        x = np.sqrt(x + 1.0)


def measure(spec, ctx):
    global COUNTER
    COUNTER += 1
    atexit.register(_at_exit, "own")
    if spec.pid_dir:
        Path(spec.pid_dir, f"{os.getpid()}").write_text(spec.action)
    tf_ops = None
    if spec.tf:
        import tensorflow as tf

        graph = tf.compat.v1.get_default_graph()
        tf_ops = len(graph.get_operations())
        with graph.as_default():
            tf.constant(1.0, name="left_by_this_run")
    hogs = []
    if spec.action == "loaded":  # load from other processes, during this run only
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
        time.sleep(0.3)
    try:
        with ctx.probe:
            if spec.action in ("work", "loaded"):
                _work(spec.seconds)
            elif spec.action == "sleep":
                time.sleep(spec.seconds)
            elif spec.action == "crash":
                os.kill(os.getpid(), signal.SIGKILL)
            elif spec.action == "raise":
                raise RuntimeError("the probe was asked to fail")
            elif spec.action == "alloc":
                block = np.ones(int(spec.seconds * 2**27))  # seconds x 1 GiB
                time.sleep(2)
                del block
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    import pandas as pd

    return Measurement({"status": "ok", "message": "", "ppid": os.getppid(),
                        "counter": COUNTER, "tf_ops_before": tf_ops},
                       {"steps": pd.DataFrame({"step": [0, 1]})})


def summary(runs):
    return f"{len(runs)} probe runs"


class Probe(StudyPlugin):
    KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES = KIND, CONFIG_KEYS, SCHEMA, SIDE_TABLES
    MEASURE_MODULE, FIGURES_MODULE, REPORT_MODULE = MEASURE_MODULE, FIGURES_MODULE, \
        REPORT_MODULE
    MEASURE_STATUSES = MEASURE_STATUSES
    expand, spec_from_json = staticmethod(expand), staticmethod(spec_from_json)
    framework, code_files = staticmethod(framework), staticmethod(code_files)
    summary = staticmethod(summary)


PLUGIN = Probe()
