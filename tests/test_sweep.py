"""The sweep engine: isolation, faults, locking, damaged files, fingerprints, noise flags.

Most tests use the probe study (tests/probe_study.py), whose runs report their process and
misbehave on request, so that the engine is tested apart from any real measurement."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest

from study.__main__ import main
from study.sweep import plugin
from study.sweep.grid import load_study
from study.sweep.runner import run_study

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
CLI = ("import study.sweep.plugin as p; p.STUDIES['probe'] = 'probe_study'; "
       "from study.__main__ import run; run()")


@pytest.fixture
def probe(monkeypatch):
    monkeypatch.setitem(plugin.STUDIES, "probe", "probe_study")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.syspath_prepend(str(TESTS))


def config(tmp_path, text, name="p.toml"):
    path = tmp_path / name
    path.write_text('kind = "probe"\n' + text)
    return path


def rows(out):
    return pd.read_parquet(out / "runs.parquet")


def cli(*args):
    return [sys.executable, "-c", CLI, *map(str, args)]


def env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(TESTS), str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def wait_for(predicate, seconds=60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


# ---- isolation ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_every_run_has_its_own_process_and_no_tensorflow_state_leaks(tmp_path, probe):
    path = config(tmp_path, 'actions = ["ok"]\nseeds = [0, 1, 2]\ntf = true\n')
    run_study(load_study(path), tmp_path / "res", quiet=True)
    runs = rows(tmp_path / "res")
    assert list(runs["status"]) == ["ok"] * 3
    assert runs["pid"].nunique() == 3 and os.getpid() not in set(runs["pid"])
    assert (runs["counter"] == 1).all()  # no run saw another run's module state
    assert (runs["tf_ops_before"] == 0).all()  # ... nor the graph ops another run left
    assert runs["ppid"].nunique() == 1  # all forked by one warm process
    steps = pd.read_parquet(tmp_path / "res" / "steps.parquet")
    assert sorted(steps["run_id"].unique()) == sorted(runs["run_id"])


def test_a_run_runs_its_own_exit_handlers_and_not_the_warm_processes(tmp_path, probe,
                                                                     monkeypatch):
    # (TensorFlow's autograph removes its generated modules at exit: a Keras run left them in /tmp)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("PROBE_EXIT_DIR", str(marks))
    run_study(load_study(config(tmp_path, 'actions = ["ok"]\nseeds = [0, 1]\n')),
              tmp_path / "res", quiet=True)
    runs = rows(tmp_path / "res")
    assert sorted(p.name for p in marks.iterdir()) == sorted(f"own-{pid}" for pid in runs["pid"])


@pytest.mark.slow
def test_crash_raise_timeout_and_memory_are_recorded_and_the_sweep_goes_on(tmp_path, probe):
    path = config(tmp_path, 'actions = ["crash", "raise", "sleep", "alloc", "ok"]\n'
                            'seconds = 3\nrun_timeout = 1.5\nmemory_budget_gb = 0.5\n')
    statuses = run_study(load_study(path), tmp_path / "res", quiet=True)
    runs = rows(tmp_path / "res").set_index("action")
    assert sum(statuses.values()) == 5
    assert runs.loc["crash", "status"] == "error"
    assert "ended with code -9" in runs.loc["crash", "message"]
    assert runs.loc["raise", "status"] == "error"
    assert "the probe was asked to fail" in runs.loc["raise", "message"]
    assert runs.loc["sleep", "status"] == "timeout"
    assert runs.loc["alloc", "status"] in ("oom", "timeout")
    assert runs.loc["ok", "status"] == "ok"
    log = tmp_path / "res" / "logs" / f"{runs.loc['raise', 'run_id']}.log"
    assert "Traceback" in log.read_text()


def test_a_sweep_with_errors_exits_1_naming_the_logs(tmp_path, probe, capsys):
    path = config(tmp_path, 'actions = ["raise", "ok"]\n')
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "1 error" in err and str(tmp_path / "res" / "logs") in err


# ---- faults of the runner ----------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_runner_leaves_no_orphan_and_resumes(tmp_path, probe, sig):
    pids = tmp_path / "pids"
    pids.mkdir()
    path = config(tmp_path, f'actions = ["sleep"]\nseconds = 30\npid_dir = "{pids}"\n')
    out = tmp_path / "res"
    proc = subprocess.Popen(cli("run", path, "--out", out, "--quiet"), env=env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    assert wait_for(lambda: any(pids.iterdir()))
    child = int(next(pids.iterdir()).name)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    if sig == signal.SIGTERM:
        assert proc.returncode == 143 and "terminated" in err and "Traceback" not in err
    assert wait_for(lambda: not alive(child), 10), "the run outlived its runner"
    assert not (out / "runs.parquet").exists() or rows(out).empty
    # resume at once: the run is measured again, by the new runner's own child
    fast = path.read_text().replace("seconds = 30", "seconds = 0.1")
    path.write_text(fast)
    done = subprocess.run(cli("run", path, "--out", out, "--quiet"), env=env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    runs = rows(out)
    assert len(runs) == 1 and runs["pid"].iloc[0] != child


@pytest.mark.slow
def test_two_runners_on_one_folder_the_second_is_refused(tmp_path, probe):
    path = config(tmp_path, 'actions = ["sleep"]\nseconds = 20\n')
    out = tmp_path / "res"
    first = subprocess.Popen(cli("run", path, "--out", out, "--quiet"), env=env(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_for(lambda: (out / "runs" / ".pending").exists())
        second = subprocess.run(cli("run", path, "--out", out, "--quiet"), env=env(),
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        assert f"in use by another `study run` (pid {first.pid})" in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1
    finally:
        first.kill()
        first.wait()


@pytest.mark.slow
def test_damaged_and_empty_row_files_are_reported_and_measured_again(tmp_path, probe, capsys):
    path = config(tmp_path, 'actions = ["ok"]\nseeds = [0, 1, 2]\n')
    out = tmp_path / "res"
    run_study(load_study(path), out, quiet=True)
    ids = sorted(rows(out)["run_id"])
    (out / "runs" / f"{ids[0]}.parquet").write_bytes(b"")
    (out / "runs" / f"{ids[1]}.parquet").write_bytes(b"PAR1 not really")
    capsys.readouterr()
    statuses = run_study(load_study(path), out, quiet=True)
    err = capsys.readouterr().err
    assert statuses["ok"] == 2
    lines = err.strip().splitlines()
    assert len(lines) == 2 and all(": damaged (" in line for line in lines), err
    assert sorted(rows(out)["run_id"]) == ids
    set_aside = [p.name for p in (out / "runs" / "damaged").iterdir()]
    assert sorted(n for n in set_aside if n.count(".") == 1) == sorted(
        f"{i}.parquet" for i in ids[:2])


def test_only_matching_nothing_exits_2_and_writes_nothing(tmp_path, probe, capsys):
    path = config(tmp_path, 'actions = ["ok"]\n')
    out = tmp_path / "res"
    assert main(["run", str(path), "--out", str(out), "--only", "action=nope"]) == 2
    assert "no run of the study matches" in capsys.readouterr().err
    assert not out.exists()


def test_only_flags_combine(tmp_path, probe, capsys):
    path = config(tmp_path, 'actions = ["ok", "work"]\nseeds = [0, 1]\n')
    assert main(["run", str(path), "--dry-run", "--only", "action=ok", "--only", "seed=1"]) == 0
    assert "1 runs in" in capsys.readouterr().out


def test_two_configs_with_one_name_in_one_folder_are_refused(tmp_path, probe, capsys):
    one = config(tmp_path, 'name = "same"\nactions = ["ok"]\n', "one.toml")
    two = config(tmp_path, 'name = "same"\nactions = ["work"]\n', "two.toml")
    out = tmp_path / "res"
    assert main(["run", str(one), "--out", str(out), "--quiet"]) == 0
    assert main(["run", str(two), "--out", str(out), "--quiet"]) == 2
    assert "holds the probe study 'same'" in capsys.readouterr().err
    assert len(rows(out)) == 1


def test_a_study_name_must_be_a_plain_folder_name(tmp_path, probe, capsys):
    path = config(tmp_path, 'name = "../elsewhere"\nactions = ["ok"]\n')
    assert main(["run", str(path)]) == 2
    assert "plain folder name" in capsys.readouterr().err


def test_ctrl_c_at_start_up_is_one_line(tmp_path):
    """Each delay counts from the command's import of `study.interrupts` (`-X importtime` says
    when), just before it holds the signals: a Ctrl-C before that lands in the interpreter's
    own start (its `site` import, on a loaded machine 0.1 s in, or runpy's), which Python
    itself reports and no code of ours can catch."""
    path = tmp_path / "c.toml"
    path.write_text('[[datasets]]\nname = "synthetic"\nn = 100\n[[optimizers]]\nname = "gd"\n'
                    '[[backends]]\nname = "numpy"\n')
    for delay in (0.0, 0.02, 0.1, 0.3, 0.6, 1.0):
        proc = subprocess.Popen([sys.executable, "-X", "importtime", "-m", "study", "run",
                                 str(path), "--out", str(tmp_path / "res")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        lines, imported, seen = [], threading.Event(), []

        def read(stream=proc.stderr, lines=lines, imported=imported, seen=seen):
            for line in stream:  # read to the end: a full pipe would stop the command
                lines.append(line)
                if line.rstrip().endswith("| study.interrupts"):
                    seen.append(line)
                    imported.set()
            imported.set()

        reader = threading.Thread(target=read)
        reader.start()
        assert imported.wait(60) and seen, "".join(lines[-5:])
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        reader.join(timeout=60)
        err = "".join(line for line in lines if not line.startswith("import time:"))
        assert "Traceback" not in err, err
        if proc.returncode:
            assert proc.returncode == 130 and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("entry", ["study.__main__ as it runs as python -m study",
                                   "the installed convergence-study command"])
def test_a_signal_held_before_the_handlers_is_said_in_one_line(tmp_path, entry):
    """A Ctrl-C that comes while the signals are held (before the command's module is made)
    ends the command as one at any later moment does: one line, status 130."""
    path = tmp_path / "c.toml"
    path.write_text('[[datasets]]\nname = "synthetic"\nn = 100\n[[optimizers]]\nname = "gd"\n'
                    '[[backends]]\nname = "numpy"\n')
    start = ("import runpy; runpy.run_module('study', run_name='__main__')"
             if entry.startswith("study") else "import convergence_study; convergence_study.run()")
    interrupt_first = ("import os, signal, study.interrupts as i; i.hold = (lambda hold: lambda: "
                       "(hold(), os.kill(os.getpid(), signal.SIGINT)))(i.hold); ")
    done = subprocess.run([sys.executable, "-c", interrupt_first + start, "run", str(path),
                           "--out", str(tmp_path / "res")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "interrupted" in done.stderr


# ---- fingerprints ------------------------------------------------------------------------------

@pytest.mark.slow
def test_editing_one_optimizer_re_measures_exactly_its_rows(tmp_path):
    copy = tmp_path / "tree"
    for folder in ("datasets", "optimizers", "study"):
        shutil.copytree(ROOT / folder, copy / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "c.toml").write_text("""
[stopping]
max_iter = 50
[[datasets]]
name = "synthetic"
n = 200
[[optimizers]]
name = "gd"
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
""")
    environment = {**os.environ, "PYTHONPATH": str(copy)}

    def study(*args):
        return subprocess.run([sys.executable, "-m", "study", *args], cwd=copy,
                              env=environment, capture_output=True, text=True)

    def edit(path):
        with open(copy / path, "a") as handle:
            handle.write("# an edit\n")

    run = ("run", "c.toml", "--out", "res", "--quiet")
    assert study(*run).returncode == 0
    before = pd.read_parquet(copy / "res" / "runs.parquet").set_index("optimizer")
    edit("optimizers/gd.py")
    again = study(*run)
    assert "1 to measure again: stale: changed optimizers/gd.py" in again.stdout
    after = pd.read_parquet(copy / "res" / "runs.parquet").set_index("optimizer")
    assert after.loc["gd", "code_fingerprint"] != before.loc["gd", "code_fingerprint"]
    assert after.loc["gd", "sweep_id"] != before.loc["gd", "sweep_id"]
    assert after.loc["lbfgs", "sweep_id"] == before.loc["lbfgs", "sweep_id"]
    assert study("summarize", "res").returncode == 0  # each file in one version: comparable
    # shared code edited, one row re-measured, the other kept: the table mixes versions
    edit("optimizers/driver.py")
    assert study(*run, "--only", "optimizer=gd").returncode == 0
    refused = study("summarize", "res")
    assert refused.returncode == 2 and "optimizers/driver.py" in refused.stderr
    assert "two versions" in refused.stderr and len(refused.stderr.splitlines()) == 1
    assert study(*run).returncode == 0  # the stale L-BFGS row is measured again
    assert study("summarize", "res").returncode == 0


def test_readers_refuse_rows_of_mixed_code(tmp_path, probe, capsys):
    path = config(tmp_path, 'actions = ["ok", "work"]\nseconds = 0.05\n')
    out = tmp_path / "res"
    run_study(load_study(path), out, quiet=True)
    table = rows(out)
    (out / "fingerprints" / "0123456789abcdef.json").write_text(
        '{"tests/probe_study.py": "another version"}')
    table.loc[0, "code_fingerprint"] = "0123456789abcdef"
    table.to_parquet(out / "runs.parquet")
    assert main(["summarize", str(out)]) == 2
    err = capsys.readouterr().err
    assert "tests/probe_study.py" in err and "--keep-stale" in err


# ---- noise --------------------------------------------------------------------------------------

def others_cpu_now(seconds: float = 1.0) -> float:
    """Cores other processes keep busy right now (sampled over `seconds`)."""
    from study.sweep.noise import _machine_busy_seconds, _own_cpu_seconds

    busy, own, start = _machine_busy_seconds(), _own_cpu_seconds(), time.perf_counter()
    time.sleep(seconds)
    return ((_machine_busy_seconds() - busy) - (_own_cpu_seconds() - own)) / (
        time.perf_counter() - start)


# it needs a quiet machine, which parallel workers never leave: the slow tier runs it alone
@pytest.mark.slow
@pytest.mark.serial
def test_runs_under_injected_load_are_flagged_noisy_and_quiet_ones_are_not(tmp_path, probe):
    busy = others_cpu_now()
    if busy > 0.2:
        pytest.skip(f"this machine is busy already (other processes use {busy:.2g} cores): "
                    "no run here can be quiet")
    path = config(tmp_path, 'actions = ["work", "loaded"]\nseeds = [0, 1, 2]\nseconds = 0.6\n')
    run_study(load_study(path), tmp_path / "res", quiet=True)
    runs = rows(tmp_path / "res").set_index("action")
    loaded, quiet = runs.loc["loaded"], runs.loc["work"]
    assert loaded["noisy"].all(), loaded[["noisy_reason", "cpu_wait_fraction"]]
    assert quiet["noisy"].sum() <= 1, quiet[["noisy_reason", "cpu_wait_fraction"]]
    assert loaded["cpu_wait_fraction"].min() > quiet["cpu_wait_fraction"].max()
    assert loaded["others_cpu_cores"].min() > quiet["others_cpu_cores"].max()


def test_the_probe_after_a_run_stops_at_a_pass_no_slower_than_the_one_before(monkeypatch):
    """After the run one pass is enough when it is no slower than the calibration before (the
    run's calibration, their maximum, cannot change); a slower one gets the usual three."""
    from types import SimpleNamespace

    from study.sweep import noise

    clock, passes, used = [0.0], iter([3, 2, 4, 1, 9, 9, 5, 6, 7, 8]), []

    class Buffer:
        def sum(self):
            used.append(1)
            clock[0] += next(passes) / 1000

    monkeypatch.setattr(noise, "time", SimpleNamespace(perf_counter=lambda: clock[0]))
    values = []
    for _ in range(2):
        probe = noise.NoiseProbe()
        probe.buffer = Buffer()
        with probe:
            pass
        values.append((probe.values["calibration_before_seconds"],
                       probe.values["calibration_after_seconds"], len(used)))
    assert values == [(pytest.approx(0.002), pytest.approx(0.001), 4),
                      (pytest.approx(0.005), pytest.approx(0.006), 10)]


def fake_times(runs, action, ratio):
    """Times a run of `action` 'took': ratio x a noise fixed by its seed (the probe measures
    nothing); the adaptive loop's comparisons are made of these."""
    part = runs[runs["action"] == action]
    noise = [np.random.default_rng(int(s)).normal(0, 0.05) for s in part["seed"]]
    return part.assign(t=ratio * np.exp(noise))


@pytest.mark.slow
def test_undecided_answers_get_instances_until_decided_and_only_theirs(tmp_path, probe,
                                                                        monkeypatch, capsys):
    """The loop adds seeds to the two configurations of the one undecided comparison (never to
    the third), two at a time, until the confidence sequence decides it; the added runs are
    ordinary rows of the table; a second invocation has nothing to do; --no-adaptive adds
    none and says why."""
    from study.paired import compare
    from study.sweep import adaptive

    def questions(study, folder, runs):
        a, b = fake_times(runs, "a", 1.3), fake_times(runs, "b", 1.0)
        return [("a-over-b", compare(a, b, [], "t"))]

    monkeypatch.setattr(adaptive, "answer_comparisons", questions)
    path = config(tmp_path, 'actions = ["a", "b", "c"]\nseeds = [0, 1, 2]\nseconds = 0\n'
                            "[adaptive]\nbatch = 2\nmax_instances = 9\n")
    out = tmp_path / "res"
    statuses = run_study(load_study(path), out, quiet=True, adaptive=True)
    seeds = rows(out).groupby("action")["seed"].apply(sorted).to_dict()
    assert seeds["c"] == [0, 1, 2] and seeds["a"] == seeds["b"] == [0, 1, 2, 3, 4]
    assert sum(statuses.values()) == 13
    said = capsys.readouterr().out
    assert "refining a-over-b: 3 repeats of 1 instance: too few for a finite" in said
    assert json.loads((out / "adaptive.json").read_text())["stopped"] == {}
    assert run_study(load_study(path), out, quiet=True, adaptive=True) == Counter()  # resumed

    fixed = tmp_path / "fixed"
    run_study(load_study(path), fixed, quiet=True, adaptive=False)
    assert sorted(rows(fixed)["seed"].unique()) == [0, 1, 2]
    assert json.loads((fixed / "adaptive.json").read_text())["stopped"] == {
        "a-over-b": "the fixed design (--no-adaptive)"}


@pytest.mark.slow
def test_instances_an_earlier_loop_added_are_measured_again_when_stale(tmp_path, probe,
                                                                       monkeypatch, capsys):
    """The runs the adaptive loop added are rows of the tables like the grid's: once the code
    changes, a run without the loop measures them again with the rest, so the table holds one
    version (the figures refuse two, and their advice is this command); the dry run says so."""
    import probe_study

    from study.paired import compare
    from study.sweep import adaptive

    monkeypatch.setattr(adaptive, "answer_comparisons", lambda study, folder, runs: [
        ("a-over-b", compare(fake_times(runs, "a", 1.3), fake_times(runs, "b", 1.0), [], "t"))])
    path = config(tmp_path, 'actions = ["a", "b", "c"]\nseeds = [0, 1, 2]\nseconds = 0\n'
                            "[adaptive]\nbatch = 2\nmax_instances = 9\n")
    out = tmp_path / "res"
    assert sum(run_study(load_study(path), out, quiet=True, adaptive=True).values()) == 13
    monkeypatch.setattr(probe_study.Probe, "code_files", staticmethod(
        lambda spec: ["tests/probe_study.py", "tests/test_sweep.py"]))  # the code changed
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--dry-run"]) == 0
    assert "13 runs in p (" in capsys.readouterr().out.splitlines()[-1]
    assert sum(run_study(load_study(path), out, quiet=True).values()) == 13
    assert rows(out)["code_fingerprint"].nunique() == 1 and len(rows(out)) == 13


def test_an_undecided_answer_stops_at_the_cap_and_says_so(tmp_path, probe, monkeypatch):
    from study.paired import compare
    from study.sweep import adaptive

    def questions(study, folder, runs):  # no difference, too noisy to be equivalent
        a, b = fake_times(runs, "a", 1.0), fake_times(runs, "b", 1.0)
        return [("same", compare(a, b.assign(t=b["t"] * np.exp(b["seed"] % 2 - 0.5)), [],
                                 "t"))]

    monkeypatch.setattr(adaptive, "answer_comparisons", questions)
    path = config(tmp_path, 'actions = ["a", "b"]\nseeds = [0, 1]\nseconds = 0\n'
                            "[adaptive]\nbatch = 3\nmax_instances = 3\n")
    run_study(load_study(path), tmp_path / "res", quiet=True, adaptive=True)
    assert sorted(rows(tmp_path / "res")["seed"].unique()) == [0, 1, 2]
    assert json.loads((tmp_path / "res" / "adaptive.json").read_text())["stopped"] == {
        "same": "the cap of 3 instances per configuration"}


@pytest.mark.parametrize("table, words", [
    ("margin = 1.5", "margin: must be a number in (0, 1)"),
    ("max_instances = 1", "max_instances: must be an integer from 2 to 1000"),
    ("batch = true", "batch: must be an integer from 1 to 100"),
    ("time_budget = -3", "time_budget: must be a number of seconds > 0"),
    ("seeds = 4", "unknown key of [adaptive] 'seeds'"),
])
def test_a_bad_adaptive_key_is_one_line(tmp_path, probe, table, words):
    from study.sweep.grid import ConfigError

    with pytest.raises(ConfigError, match=re.escape(words)):
        load_study(config(tmp_path, f"[adaptive]\n{table}\n"))


def test_the_loop_says_why_it_stopped_a_busy_comparison_or_at_the_time_budget(tmp_path, probe):
    """A comparison measured on a busy machine gets no more instances (they would dilute the
    flag, not remove the load); one undecided when the time budget is spent stops there."""
    from types import SimpleNamespace

    from study.paired import compare
    from study.sweep.adaptive import refine
    from study.sweep.plugin import load_kind

    study = load_study(config(tmp_path, 'actions = ["a", "b"]\nseeds = [0, 1, 2]\n'
                                        "[adaptive]\ntime_budget = 1e-9\n"))
    runs = pd.DataFrame([{"run_id": s.run_id, "action": s.action, "seed": s.seed}
                         for s in study.specs])
    a, b = fake_times(runs, "a", 1.3), fake_times(runs, "b", 1.0)
    calm = compare(a, b, [], "t")
    busy = compare(a.assign(noisy=True), b.assign(noisy=True), [], "t")
    measured = []
    stopped = refine(study, SimpleNamespace(root=tmp_path), load_kind("probe"), lambda: runs,
                     lambda specs, why: measured.append(specs),
                     questions=lambda *_: [("calm", calm), ("busy", busy)])
    assert not measured
    assert stopped == {"busy": "measured on a busy machine (more instances would not remove the "
                               "load; `--remeasure-noisy` measures its runs again)",
                       "calm": "the time budget of the extra runs (1e-09 s)"}


def test_a_batch_that_leaves_no_row_ends_the_loop_saying_so(tmp_path, probe):
    """Added runs that cannot run on this machine (no row: a GPU's, say) are not asked for
    again and again: the loop stops, and the answer says why."""
    from types import SimpleNamespace

    from study.paired import compare
    from study.sweep.adaptive import refine
    from study.sweep.plugin import load_kind

    study = load_study(config(tmp_path, 'actions = ["a", "b"]\nseeds = [0, 1, 2]\n'))
    runs = pd.DataFrame([{"run_id": s.run_id, "action": s.action, "seed": s.seed}
                         for s in study.specs])
    c = compare(fake_times(runs, "a", 1.3), fake_times(runs, "b", 1.0), [], "t")
    asked = []
    stopped = refine(study, SimpleNamespace(root=tmp_path), load_kind("probe"), lambda: runs,
                     lambda specs, why: asked.append(sorted(s.seed for s in specs)),
                     questions=lambda *_: [("c", c)])
    assert asked == [[3, 3, 4, 4]]
    assert stopped == {"c": "its added runs could not run here (see above)"}


def test_the_command_is_adaptive_unless_told_not_to():
    """`study run` and `study feedmode` add instances by default (the function run_study only
    when asked); --no-adaptive keeps the planned design."""
    import argparse

    from study.sweep import runner

    parser = argparse.ArgumentParser()
    runner.add_arguments(parser)
    assert parser.parse_args(["c.toml"]).adaptive is True
    assert parser.parse_args(["c.toml", "--no-adaptive"]).adaptive is False


@pytest.mark.parametrize("flags, enabled", [([], True), (["--no-adaptive"], False),
                                            (["--only", "seed=0"], False)])
def test_the_command_refines_unless_told_not_to_or_given_only(tmp_path, probe, monkeypatch,
                                                              flags, enabled):
    """`study run CONFIG` is adaptive by default (make reproduce runs it so); --no-adaptive and
    --only (which asks for some runs, not the answers) keep the planned design. The command
    once handed the loop an empty --only list, which read as 'given': it never refined."""
    from study.sweep import runner

    seen = []
    monkeypatch.setattr(runner, "refine", lambda *a, enabled, **k: seen.append(enabled) or {})
    path = config(tmp_path, 'actions = ["ok"]\nseeds = [0]\n')
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--quiet", *flags]) == 0
    assert seen == [enabled]


def test_the_loop_refines_the_comparisons_that_fit_the_time_left(tmp_path, probe):
    """One costly comparison does not hold back a cheap one: the batch takes, comparison by
    comparison, what fits the budget left (it once started nothing when all of it did not fit,
    and make reproduce's answers stayed at three instances)."""
    from types import SimpleNamespace

    from study.paired import compare
    from study.sweep.adaptive import refine
    from study.sweep.plugin import load_kind

    study = load_study(config(tmp_path, 'actions = ["a", "b", "c"]\nseeds = [0, 1, 2]\n'
                                        "[adaptive]\nbatch = 1\ntime_budget = 10\n"))
    walls = {"a": 1.0, "b": 1.0, "c": 100.0}
    runs = pd.DataFrame([{"run_id": s.run_id, "action": s.action, "seed": s.seed,
                          "wall_seconds": walls[s.action]} for s in study.specs])
    cheap = compare(fake_times(runs, "a", 1.03), fake_times(runs, "b", 1.0), [], "t")
    costly = compare(fake_times(runs, "c", 1.03), fake_times(runs, "b", 1.0), [], "t")
    measured = []
    refine(study, SimpleNamespace(root=tmp_path), load_kind("probe"), lambda: runs,
           lambda specs, why: measured.append(sorted((s.action, s.seed) for s in specs)),
           questions=lambda *_: [("costly", costly), ("cheap", cheap)])
    assert measured[0] == [("a", 3), ("b", 3)]


def test_the_loop_refines_the_cheapest_comparisons_first(tmp_path, probe):
    """Where the budget buys one batch of two, the cheap comparison gets it, whatever order the
    answers list them in (the costly first one once took make reproduce's whole budget, and the
    cheap to-target answers stayed at three instances)."""
    from types import SimpleNamespace

    from study.paired import compare
    from study.sweep.adaptive import refine
    from study.sweep.plugin import load_kind

    study = load_study(config(tmp_path, 'actions = ["a", "b", "c"]\nseeds = [0, 1, 2]\n'
                                        "[adaptive]\nbatch = 1\ntime_budget = 5.5\n"))
    walls = {"a": 1.0, "b": 1.0, "c": 4.0}
    runs = pd.DataFrame([{"run_id": s.run_id, "action": s.action, "seed": s.seed,
                          "wall_seconds": walls[s.action]} for s in study.specs])
    cheap = compare(fake_times(runs, "a", 1.03), fake_times(runs, "b", 1.0), [], "t")
    costly = compare(fake_times(runs, "c", 1.03), fake_times(runs, "b", 1.0), [], "t")
    measured = []
    refine(study, SimpleNamespace(root=tmp_path), load_kind("probe"), lambda: runs,
           lambda specs, why: measured.append(sorted((s.action, s.seed) for s in specs)),
           questions=lambda *_: [("costly", costly), ("cheap", cheap)])
    assert measured[0] == [("a", 3), ("b", 3)]


def test_a_verdict_out_of_reach_gets_no_more_runs_and_says_why(tmp_path, probe):
    """From 4 instances on, a comparison whose verdict would take more than the cap (at the
    ratio and spread seen, generously projected) stops, saying so, and its budget goes to the
    one within reach (eve's SGD against Adam took make reproduce's whole train budget)."""
    from types import SimpleNamespace

    from study.paired import compare
    from study.sweep.adaptive import refine
    from study.sweep.plugin import load_kind

    study = load_study(config(tmp_path, 'actions = ["a", "b", "c"]\nseeds = [0, 1, 2, 3]\n'
                                        "[adaptive]\nbatch = 2\ntime_budget = 100\n"))
    runs = pd.DataFrame([{"run_id": s.run_id, "action": s.action, "seed": s.seed,
                          "wall_seconds": 1.0} for s in study.specs])
    wild = fake_times(runs, "c", 1.0)
    wild = wild.assign(t=wild["t"] * np.exp(np.where(wild["seed"] % 2, 0.5, -0.5)))
    hopeless = compare(wild, fake_times(runs, "b", 1.0), [], "t")
    near = fake_times(runs, "a", 1.12)
    near = near.assign(t=near["t"] * np.exp(np.where(near["seed"] % 2, 0.05, -0.05)))
    within = compare(near, fake_times(runs, "b", 1.0), [], "t")
    measured = []
    stopped = refine(study, SimpleNamespace(root=tmp_path), load_kind("probe"), lambda: runs,
                     lambda specs, why: measured.append(sorted((s.action, s.seed)
                                                               for s in specs)),
                     questions=lambda *_: [("hopeless", hopeless), ("within", within)])
    assert measured and measured[0] == [("a", 4), ("a", 5), ("b", 4), ("b", 5)], stopped
    assert stopped["hopeless"].startswith("out of reach within the cap of 12 instances")


def test_the_loop_refines_the_comparison_nearest_a_verdict_first(tmp_path, probe):
    """Of two comparisons whose runs cost the same, the one projected to need fewer instances
    gets the batch the budget buys, whatever order the answers list them in (in make reproduce
    eve's SGD against Adam, far from a verdict, took the batch the digits CNN's pair needed)."""
    from types import SimpleNamespace

    from study.paired import compare
    from study.sweep.adaptive import refine
    from study.sweep.plugin import load_kind

    study = load_study(config(tmp_path, 'actions = ["a", "b", "c"]\nseeds = [0, 1, 2, 3]\n'
                                        "[adaptive]\nbatch = 1\ntime_budget = 3\n"))
    runs = pd.DataFrame([{"run_id": s.run_id, "action": s.action, "seed": s.seed,
                          "wall_seconds": 1.0} for s in study.specs])

    def spread(action, by):
        times = fake_times(runs, action, 1.12)
        return times.assign(t=times["t"] * np.exp(np.where(times["seed"] % 2, by, -by)))

    far = compare(spread("c", 0.1), fake_times(runs, "b", 1.0), [], "t")
    near = compare(spread("a", 0.05), fake_times(runs, "b", 1.0), [], "t")
    measured = []
    stopped = refine(study, SimpleNamespace(root=tmp_path), load_kind("probe"), lambda: runs,
                     lambda specs, why: measured.append(sorted((s.action, s.seed)
                                                               for s in specs)),
                     questions=lambda *_: [("far", far), ("near", near)])
    assert measured and measured[0] == [("a", 4), ("b", 4)], stopped


def test_warm_processes_launched_before_the_preparation_are_waited_for_once(tmp_path,
                                                                            monkeypatch):
    """The runner launches a round's warm processes before the plugin prepares (their imports
    overlap the train study's initial-weights helper); the round's warm-up then waits for those
    and no other: waiting again on a server that said 'ready' would wait forever."""
    from study.regression.plugin import SCHEMA, SIDE_TABLES
    from study.sweep.executors import Job, LocalExecutor
    from study.sweep.folder import ResultsFolder
    from study.sweep.isolate import ForkServer

    waited = []
    wait_ready = ForkServer.wait_ready
    monkeypatch.setattr(ForkServer, "wait_ready",
                        lambda server: (waited.append(server), wait_ready(server))[1])
    folder = ResultsFolder(tmp_path / "res", SCHEMA, SIDE_TABLES)
    folder.prepare()
    jobs = [Job(spec=None, request={}, preload=("numpy",))]
    with LocalExecutor() as executor:
        launched = executor.launch(jobs, folder)
        assert len(launched) == 1 and executor.starting == launched
        assert executor.launch(jobs, folder) == []  # already running: not launched twice
        executor.warm_up(jobs, folder)
        assert waited == launched and executor.starting == [] and launched[0].alive
        executor.warm_up(jobs, folder)  # a later round: nothing to wait for
        assert waited == launched


# ---- the head start ----------------------------------------------------------------------------
def test_a_sweep_takes_the_warm_process_started_before_its_imports(tmp_path, probe,
                                                                   monkeypatch):
    """`run` starts the NumPy stack's warm process before importing the runner; the runner
    takes it for its runs (sending it the rest of its imports), and none is left behind."""
    from study.sweep import head_start

    taken, take = [], head_start.take
    monkeypatch.setattr(head_start, "take",
                        lambda *args: (taken.append(take(*args)), taken[-1])[1])
    out, path = tmp_path / "res", config(tmp_path, 'actions = ["ok"]\nseeds = [0, 1]\n')
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert len(taken) == 1 and taken[0] is not None and taken[0].poll() is not None
    assert set(rows(out)["status"]) == {"ok"} and head_start._started is None


def test_a_head_start_is_taken_only_into_the_environment_it_was_started_in(monkeypatch):
    """A variable set since (a library reads its own when it loads) or another interpreter:
    the process is ended, not taken; a warm process is then started as usual."""
    from study.sweep import head_start
    from study.sweep.forkserver import NUMPY_STACK

    for change in ("environment", "python"):
        head_start.start()
        process = head_start._started[0]
        with monkeypatch.context() as patch:
            if change == "environment":
                patch.setenv("KERAS_BACKEND", "torch")
            assert head_start.take((*NUMPY_STACK, "json"),
                                   sys.executable if change == "environment" else "python3") \
                is None
        assert process.poll() is not None and head_start._started is None


def test_a_taken_head_start_whose_imports_fail_says_so_in_its_log(tmp_path):
    from study.sweep import head_start
    from study.sweep.forkserver import NUMPY_STACK
    from study.sweep.isolate import ForkServer, ServerDied

    head_start.start()
    log = tmp_path / "server.log"
    server = ForkServer((*NUMPY_STACK, "no_such_module_here"), log=log)
    with pytest.raises(ServerDied, match="did not start.*see"):
        server.start()
    assert server.adopted is not None and "no_such_module_here" in log.read_text()


def test_a_scan_of_the_same_row_files_is_a_copy_of_the_last_and_a_changed_file_is_read(
        tmp_path):
    """The runner scans the folder several times a sweep; the frame is made again only when a
    row file changed (added, rewritten, set aside), and a caller's edits never reach the next."""
    from study.regression.plugin import SCHEMA, SIDE_TABLES
    from study.sweep.folder import ResultsFolder

    folder = ResultsFolder(tmp_path / "res", SCHEMA, SIDE_TABLES)
    folder.prepare()
    row = {"run_id": "a", "status": "converged", "dataset": "synthetic", "optimizer": "gd",
           "backend": "numpy", "seconds": 1.0}
    folder.write_run(row)
    first = folder.scan()
    first.loc[0, "seconds"] = 99.0
    again = folder.scan()
    assert again is not first and list(again["seconds"]) == [1.0]
    folder.write_run({**row, "run_id": "b", "seconds": 2.0})
    assert list(folder.scan()["seconds"]) == [1.0, 2.0]
    folder.write_run({**row, "seconds": 3.0, "message": "rewritten"})
    assert list(folder.scan()["seconds"]) == [3.0, 2.0]
    folder.row_path("b").write_bytes(b"not parquet")
    assert list(folder.scan(report=lambda line: None)["run_id"]) == ["a"]


@pytest.mark.parametrize("second", [
    {"step": [3], "note": ["c"]},  # the same types: joined in Arrow
    {"step": [0.5], "note": [None]},  # a float and an empty text column: pandas's rules
])
def test_runs_side_tables_are_joined_as_pandas_joins_them(tmp_path, second):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from study.sweep.folder import _joined

    paths = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(pa.table({"step": [1, 2], "note": ["a", None]}), paths[0])
    pq.write_table(pa.table(second), paths[1])
    expected = pd.concat([pd.read_parquet(path) for path in paths], ignore_index=True)
    joined = _joined(paths)
    assert joined.equals(expected) and joined.dtypes.equals(expected.dtypes)
