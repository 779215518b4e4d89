"""Bad input and faults: one-line errors with exit status 2, nothing written or changed, and
sweeps that survive kills, interrupts, crashes and failing writes without losing finished work."""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from datasets import InputError
from datasets.problem import Problem
from study.__main__ import main
from study.regression.schema import TIMING_COLUMNS
from study.sweep.adaptive import with_candidates
from study.sweep.grid import ConfigError, load_study, parse_study
from study.sweep.runner import run_study

FRAME = pd.DataFrame({"a": [1.0, 2.0, 4.0, 3.0, 5.0, 7.0], "b": [2.0, 1.0, 0.0, 3.0, 1.0, 2.0],
                      "y": [1.0, 2.0, 3.0, 1.0, 0.0, 2.0]})


def csv(tmp, frame=FRAME, name="data.csv"):
    path = tmp / name
    frame.to_csv(path, index=False)
    return path


def tab(path, features=("a", "b"), labels=("y",)):
    return ["regress", "--dataset", "tabular", "--path", str(path), "--features", *features,
            "--labels", *labels]


def config(tmp, text, name="c.toml"):
    path = tmp / name
    path.write_text(text)
    return ["run", str(path), "--out", str(tmp / "res")]


GOOD_CONFIG = """
[[datasets]]
name = "synthetic"
n = 200
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
"""


def with_column(**values):
    return lambda tmp: tab(csv(tmp, FRAME.assign(**values)), features=("a", "b", *values))


CASES = {
    # data
    "nan": (lambda t: tab(csv(t, FRAME.assign(a=[1, np.nan, 2, 3, 4, 5]))),
            "column 'a' has 1 non-finite"),
    "inf": (lambda t: tab(csv(t, FRAME.assign(b=[1, 2, np.inf, 3, 4, 5]))),
            "column 'b' has 1 non-finite"),
    "-inf": (lambda t: tab(csv(t, FRAME.assign(y=[1, 2, -np.inf, 3, 4, 5]))),
             "column 'y' has 1 non-finite"),
    "string": (with_column(c=["x", "1", "2", "3", "4", "5"]), "column 'c' is not numeric"),
    "boolean": (with_column(c=[True, False, True, True, False, True]),
                "column 'c' is not numeric"),
    "missing column": (lambda t: tab(csv(t), features=("a", "zz")),
                       "feature column 'zz' is not in"),
    "duplicate names": (lambda t: tab(_write(t, "d.csv", "a,b,a,y\n1,2,3,4\n2,1,5,6\n")),
                        "duplicate column names ['a']"),
    "zero rows": (lambda t: tab(_write(t, "z.csv", "a,b,y\n")), "has zero rows"),
    "one row": (lambda t: tab(_write(t, "o.csv", "a,b,y\n1,2,3\n")), "1 rows but 3 coefficients"),
    "fewer rows than features": (lambda t: tab(csv(t, FRAME.head(2))),
                                 "2 rows but 3 coefficients"),
    "constant column": (with_column(c=[3.0] * 6), "column 'c' is constant"),
    "duplicated column": (with_column(c=FRAME["a"].tolist()), "'a' and 'c' are identical"),
    "collinear columns": (with_column(c=(2 * FRAME["a"] - FRAME["b"]).tolist()), "collinear"),
    "float32 limit": (lambda t: [*tab(csv(t, FRAME.assign(a=[1, 2, 3e37, 3, 4, 5]))),
                                 "--dtype", "float32"], "squares overflow float32"),
    "empty csv": (lambda t: tab(_write(t, "e.csv", "")), "is empty"),
    "truncated parquet": (lambda t: tab(_truncated_parquet(t)), "cannot read"),
    "no such path": (lambda t: tab(t / "nope.csv"), "does not exist"),
    "directory": (lambda t: tab(t), "is a directory"),
    "unknown suffix": (lambda t: tab(_write(t, "d.xlsx", "x")), "has suffix '.xlsx'"),
    # config
    "invalid toml": (lambda t: config(t, "name = [1,"), "invalid TOML"),
    "unknown key": (lambda t: config(t, "speed = 3\n" + GOOD_CONFIG), "unknown top-level key"),
    "unknown axis": (lambda t: config(t, GOOD_CONFIG + "[[exclude]]\ncolour = 1\n"),
                     "unknown axis 'colour'"),
    "unknown optimizer": (lambda t: config(t, GOOD_CONFIG.replace("lbfgs", "newton")),
                          "unknown name 'newton'; allowed"),
    "unknown backend": (lambda t: config(t, GOOD_CONFIG.replace('"numpy"', '"mxnet"')),
                        "unknown name 'mxnet'"),
    "unknown dataset": (lambda t: config(t, GOOD_CONFIG.replace("synthetic", "mnist")),
                        "unknown name 'mnist'"),
    "unknown mode": (lambda t: config(t, GOOD_CONFIG.replace(
        'name = "numpy"', 'name = "tensorflow"\nfeed = "teleport"')),
        "unknown feed mode 'teleport' for tensorflow"),
    "wrong type": (lambda t: config(t, GOOD_CONFIG.replace("n = 200", "n = \"many\"")),
                   "n must be an integer >= 1, got 'many'"),
    "zero tolerance": (lambda t: config(t, "[stopping]\ntol = 0\n" + GOOD_CONFIG),
                       "tol must be a finite number > 0"),
    "negative learning rate": (lambda t: config(t, GOOD_CONFIG.replace(
        'name = "lbfgs"', 'name = "gd"\nstep = "fixed"\nlearning_rate = -1')),
        "learning_rate must be"),
    "negative budget": (lambda t: config(t, "[stopping]\ntime_budget = -1\n" + GOOD_CONFIG),
                        "time_budget must be"),
    "zero repeats": (lambda t: config(t, "repeats = 0\n" + GOOD_CONFIG), "repeats: must be"),
    "empty grid": (lambda t: config(t, GOOD_CONFIG + "[[exclude]]\noptimizer = \"lbfgs\"\n"),
                   "the grid is empty"),
    # CLI
    "--only unknown key": (lambda t: [*config(t, GOOD_CONFIG), "--only", "colour=red"],
                           "--only: unknown key 'colour'"),
    "--out inside a file": (lambda t: ["regress", "--rows", "200", "--out",
                                       str(_write(t, "f", "x") / "r.parquet")],
                            "which is a file"),
    "--out unwritable": (lambda t: ["regress", "--rows", "200", "--out", "/proc/x/r.parquet"],
                         "cannot write in '/proc'"),
    "unknown init": (lambda t: ["regress", "--rows", "200", "--init", "ones"],
                     "unknown init 'ones'"),
    # issue 17: values typed at the edge, the key and the bad value named
    "kappa as a string": (lambda t: config(t, GOOD_CONFIG.replace("n = 200",
                                                                  'n = 200\nkappa = "1e4"')),
                          "kappa must be a finite number >= 1, got '1e4'"),
    "noise as a boolean": (lambda t: config(t, GOOD_CONFIG.replace("n = 200",
                                                                   "n = 200\nnoise = true")),
                           "noise must be a finite number >= 0, got True"),
    "exact_repeat not a boolean": (lambda t: config(t, "[stopping]\nexact_repeat = \"yes\"\n"
                                                    + GOOD_CONFIG),
                                   "exact_repeat must be true or false, got 'yes'"),
    "patience not an integer": (lambda t: config(t, "[stopping]\nrel_tol = 1e-6\npatience = 2.5\n"
                                                 + GOOD_CONFIG),
                                "patience must be an integer >= 1, got 2.5"),
    "seeds empty": (lambda t: config(t, "seeds = []\n" + GOOD_CONFIG), "seeds: is an empty list"),
    "init empty": (lambda t: config(t, "init = []\n" + GOOD_CONFIG), "init: is an empty list"),
    "tabular column missing in a config": (lambda t: config(t, _tabular_config(t, '"zz"')),
                                           "feature column 'zz' is not in"),
    "tabular standardize not a boolean": (lambda t: config(t, _tabular_config(
        t, '"a"', "standardize = 1\n")), "standardize must be true or false, got 1"),
    "mixed-type column quotes the bad value": (
        with_column(c=["8.444219", "1", "abc", "3", "4", "5"]), "e.g. 'abc'"),
    "values near 1e201 overflow, not collinear": (
        lambda t: tab(csv(t, FRAME.assign(a=[1e201, 2e201, 4e201, 3e201, 5e201, 7e201]))),
        "squares overflow float64 (keep |values| below"),
    # issue 28: squares that fit, but a gradient norm squared near 1e600 does not
    "values near 1e150 overflow the first iterations, not 'diverged'": (
        lambda t: tab(csv(t, FRAME.assign(a=[1e150, 2e150, 4e150, 3e150, 5e150, 7e150]))),
        "the curvature along the gradient at the start point is about 1e"),
    "rows beyond memory": (lambda t: ["regress", "--rows", "1000000000000"],
                           "eve with 1000000000000 rows needs about"),
    "scheduler not an address": (lambda t: [*config(t, GOOD_CONFIG), "--executor", "dask",
                                            "--scheduler", "not-an-address"],
                                 "is not a scheduler address"),
}


def _tabular_config(tmp, feature, extra=""):
    path = csv(tmp)
    return (f'[[datasets]]\nname = "tabular"\npath = "{path}"\nfeatures = [{feature}]\n'
            f'labels = ["y"]\n{extra}' + GOOD_CONFIG[GOOD_CONFIG.index("[[optimizers]]"):])


def _write(tmp, name, text):
    path = tmp / name
    path.write_text(text)
    return path


def _truncated_parquet(tmp):
    path = tmp / "t.parquet"
    FRAME.to_parquet(path)
    path.write_bytes(path.read_bytes()[:60])
    return path


def snapshot(folder):
    return {p: p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_contract(tmp_path, capsys, name):
    make_args, message = CASES[name]
    args = make_args(tmp_path)
    if "regress" in args and "--out" not in args:
        args = [*args, "--out", str(tmp_path / "out" / "r.parquet")]
    before = snapshot(tmp_path)
    code = main(args)
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], captured.err
    assert "Traceback" not in captured.err + captured.out
    assert snapshot(tmp_path) == before  # nothing created, nothing modified


def test_at_least_25_distinct_bad_inputs():
    assert len(CASES) >= 25


@pytest.mark.slow
def test_usage_errors_in_a_real_process(tmp_path):
    for args in (["frobnicate"], ["regress", "--bogus"], ["run"]):
        proc = subprocess.run([sys.executable, "-m", "study", *args], capture_output=True,
                              text=True, cwd=tmp_path)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


# ---- generated malformed inputs ------------------------------------------------------------

cell = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10, 10),
                 st.text(max_size=3), st.booleans(), st.none())


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(cell, cell, cell), min_size=0, max_size=6))
def test_random_frames_either_load_or_fail_cleanly(rows):
    frame = pd.DataFrame(rows, columns=["a", "b", "y"])
    from datasets.tabular import from_frame

    try:
        problem = from_frame(frame, ["a", "b"], ["y"])
    except InputError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    assert np.isfinite(problem.X).all() and problem.n >= problem.d


toml_value = st.one_of(st.integers(-3, 3), st.floats(allow_nan=False, width=32),
                       st.text(max_size=4), st.booleans(), st.lists(st.integers(-1, 2),
                                                                    max_size=2))


@settings(max_examples=80, deadline=None)
@given(section=st.sampled_from(["top", "stopping", "datasets", "optimizers", "backends"]),
       key=st.sampled_from(["name", "tol", "max_iter", "n", "kappa", "step", "history",
                            "dtype", "seeds", "repeats", "run_timeout", "learning_rate", "zz"]),
       value=toml_value)
@pytest.mark.slow
def test_random_config_edits_either_parse_or_fail_cleanly(section, key, value):
    raw = {"datasets": [{"name": "synthetic", "n": 100}], "optimizers": [{"name": "gd"}],
           "backends": [{"name": "numpy"}]}
    if section == "top":
        raw[key] = value
    elif section == "stopping":
        raw["stopping"] = {key: value}
    else:
        raw[section][0][key] = value
    try:
        study = parse_study(raw, "random.toml")
    except ConfigError as exc:
        assert str(exc).startswith("random.toml: ") and "\n" not in str(exc)
        return
    assert study.specs


# ---- faults during a sweep -------------------------------------------------------------------

SWEEP = """
name = "faults"
seeds = [0, 1, 2, 3]
[stopping]
max_iter = 400
[[datasets]]
name = "synthetic"
n = 300
[[optimizers]]
name = "gd"
step = ["1/L", "diag"]
[[optimizers]]
name = "adadelta"
[[backends]]
name = "numpy"
"""


def finished_ids(out):
    return {p.stem for p in (out / "runs").glob("*.parquet") if ".trace" not in p.name}


@pytest.mark.slow
def test_kills_and_interrupts_at_random_points_lose_nothing(tmp_path):
    path = tmp_path / "faults.toml"
    path.write_text(SWEEP)
    study = load_study(path)
    expected = {s.run_id for s in study.specs}
    # the runs adaptive replication may add after the planned ones (more seeds of an undecided
    # comparison: how many depends on the timings), each at most once
    allowed = {s.run_id for s in with_candidates(study, more=12).specs}  # the default cap
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "study", "run", str(path), "--out", str(out), "--quiet"]
    schedule = random.Random(20261202)
    interruptions = 0
    while interruptions < 10:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        time.sleep(schedule.uniform(0.2, 2.5))
        sig = schedule.choice([signal.SIGKILL, signal.SIGINT])
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        interruptions += 1
        if sig == signal.SIGINT and proc.returncode == 130:
            assert "interrupted" in err and "Traceback" not in err
        done = finished_ids(out) if (out / "runs").exists() else set()
        assert done <= allowed
        if (out / "runs.parquet").exists():  # whatever table exists reads back whole
            assert set(pd.read_parquet(out / "runs.parquet")["run_id"]) <= allowed
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = pd.read_parquet(out / "runs.parquet")
    assert runs["run_id"].is_unique  # none twice
    assert expected <= set(runs["run_id"]) <= allowed  # every planned run, and no stranger
    traces = pd.read_parquet(out / "traces.parquet")
    assert set(traces["run_id"]) == set(runs["run_id"])
    assert not list((out / "runs").glob(".*tmp*"))


@pytest.mark.slow
def test_a_failing_write_is_a_clear_error_and_keeps_finished_runs(tmp_path, capsys,
                                                                    monkeypatch):
    import study.sweep.executors as executors

    path = tmp_path / "faults.toml"
    path.write_text(SWEEP)
    out = tmp_path / "res"
    original, calls = executors.run_isolated, []

    def run_then_break_the_folder(*args, **kwargs):
        status = original(*args, **kwargs)
        calls.append(status)
        if len(calls) == 2:  # halfway: results/ can no longer be written
            (out / "runs").rename(tmp_path / "kept")
            (out / "runs").write_text("not a folder")
        return status

    monkeypatch.setattr(executors, "run_isolated", run_then_break_the_folder)
    code = main(["run", str(path), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 1 and "cannot write results in" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    kept = tmp_path / "kept"
    rows = [pd.read_parquet(p) for p in kept.glob("*.parquet") if ".trace" not in p.name]
    assert len(rows) == 2 and all(r["status"].iloc[0] != "error" for r in rows)
    monkeypatch.setattr(executors, "run_isolated", original)
    (out / "runs").unlink()
    kept.rename(out / "runs")  # the folder is fixed: the sweep resumes from the two kept runs
    assert main(["run", str(path), "--out", str(out), "--quiet", "--no-adaptive"]) == 0
    assert len(pd.read_parquet(out / "runs.parquet")) == 12  # the planned grid


@pytest.mark.slow
def test_same_config_twice_gives_identical_rows(tmp_path):
    path = _write(tmp_path, "d.toml", SWEEP.replace("seeds = [0, 1, 2, 3]", "seeds = [0, 1]"))
    tables = []
    for name in ("one", "two"):
        run_study(load_study(path), tmp_path / name, quiet=True)
        runs = pd.read_parquet(tmp_path / name / "runs.parquet").sort_values("run_id")
        keep = [c for c in runs.columns if c not in TIMING_COLUMNS and not c.startswith("env_")
                and c != "message"]
        tables.append(runs[keep].reset_index(drop=True))
    pd.testing.assert_frame_equal(tables[0], tables[1])
    traces = [pd.read_parquet(tmp_path / n / "traces.parquet").sort_values(["run_id", "iteration"])
              .drop(columns="seconds").reset_index(drop=True) for n in ("one", "two")]
    pd.testing.assert_frame_equal(*traces)


def test_problem_arrays_are_validated_directly():
    with pytest.raises(InputError, match="features have 3 rows but labels have 2"):
        Problem.from_arrays(np.ones((3, 1)), np.ones(2), name="t")


def test_a_warm_process_that_cannot_start_is_an_error_row(tmp_path, monkeypatch):
    """The fork server's interpreter dies at once (killed by a signal): the run is an error row
    naming it, and the sweep ends."""
    study = load_study(_write(tmp_path, "k.toml", GOOD_CONFIG))
    wrapper = _write(tmp_path, "python", f"#!/bin/sh\nkill -9 $$\nexec {sys.executable} \"$@\"\n")
    os.chmod(wrapper, 0o755)
    run_study(study, tmp_path / "res", quiet=True, python=str(wrapper))
    row = pd.read_parquet(tmp_path / "res" / "runs.parquet").iloc[0]
    assert row["status"] == "error" and "did not start" in row["message"]


# ---- issue 17: diagnoses and options -------------------------------------------------------

def test_columns_rate_and_rate_1_are_two_columns(tmp_path, capsys):
    frame = FRAME.assign(rate=[1.0, 3.0, 2.0, 5.0, 4.0, 0.0], **{"rate.1": [2.0, 2.5, 1.0, 0.0,
                                                                           3.0, 1.0]})
    assert main(tab(csv(tmp_path, frame), features=("rate", "rate.1"))) == 0
    assert "duplicate" not in capsys.readouterr().err


def test_huge_values_give_no_runtime_warning(tmp_path, capsys):
    import warnings

    frame = FRAME.assign(a=[1e201, 2e201, 4e201, 3e201, 5e201, 7e201])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert main(tab(csv(tmp_path, frame))) == 2
    assert "collinear" not in capsys.readouterr().err


def test_repeated_only_filters_combine(tmp_path, capsys):
    two = GOOD_CONFIG.replace('name = "lbfgs"', 'name = "lbfgs"\n[[optimizers]]\nname = "gd"')
    args = config(tmp_path, "seeds = [0, 1]\n" + two)
    assert main([*args, "--dry-run", "--only", "optimizer=gd", "--only", "seed=1"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("1 runs in")


@pytest.mark.parametrize("flags, message", [
    (["--device", "gpu"], "no GPU visible to TensorFlow"),
    (["--feed", "bogus"], "unknown feed mode 'bogus' for tensorflow"),
    (["--optimizer", "closed-form"], "closed-form runs on the numpy backend only"),
])
@pytest.mark.slow
def test_tensorflow_free_checks_run_before_tensorflow_is_imported(flags, message):
    code = ("import sys; from study.__main__ import main; "
            f"code = main(['regress', '--rows', '200', '--backend', 'tensorflow', *{flags!r}]); "
            "print('tensorflow' in sys.modules); sys.exit(code)")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "-1"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and proc.stdout.strip() == "False"
    assert proc.stderr.strip().splitlines() == [f"convergence-study regress: error: "
                                                f"{proc.stderr.split('error: ', 1)[1].strip()}"]
    assert message in proc.stderr


def test_memory_check_sees_an_address_space_limit():
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))

    proc = subprocess.run([sys.executable, "-m", "study", "regress", "--rows", "50000000"],
                          capture_output=True, text=True, preexec_fn=limit)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "eve with 50000000 rows needs about 6.0 GiB" in proc.stderr


def test_a_failure_is_one_line_with_keras_wrapped_cause():
    """An error row's message: the type and first line; Keras's wrapper line alone names no
    cause, so the wrapped message follows it; an empty message gives the type."""
    from convergence_study.errors import failure_line

    wrapped = ValueError("Exception encountered when calling Dense.call().\n\n"
                         "Input 0 is incompatible: expected axis -1 = 4, got 3\n\nArguments: ...")
    assert failure_line(wrapped) == ("ValueError: Exception encountered when calling "
                                     "Dense.call(). Input 0 is incompatible: expected axis -1 "
                                     "= 4, got 3")
    assert failure_line(RuntimeError("\nfirst\nsecond")) == "RuntimeError: first"
    assert failure_line(KeyError()) == "KeyError"
    assert len(failure_line(OSError("x" * 2000))) == 500
