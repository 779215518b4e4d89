import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.__main__ import main
from study.regression.summary import CONFIG_COLUMNS, summarize
from study.sweep.executors import gpu_visible
from study.sweep.grid import ConfigError, load_study, parse_study
from study.sweep.runner import run_study

BASE = """
name = "t"
seeds = [0, 1]
run_timeout = 120
[stopping]
tol = 1e-8
max_iter = 3000
[[datasets]]
name = "synthetic"
n = 500
kappa = [10, 100]
[[optimizers]]
name = "gd"
step = ["1/L", "diag"]
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
dtype = ["float64", "float32"]
"""


def write(tmp_path, text, name="study.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_grid_expands_to_the_cartesian_product(tmp_path):
    study = load_study(write(tmp_path, BASE))
    assert len(study.specs) == 2 * 3 * 2 * 2  # kappa x optimizer points x dtype x seeds
    assert len({s.run_id for s in study.specs}) == len(study.specs)
    spec = study.specs[0]
    assert spec.data_params()["seed"] == spec.seed  # the seed reaches the data generator
    assert "seed" not in spec.dataset_params  # ... but not the configuration's identity
    again = load_study(write(tmp_path, BASE))
    assert [s.run_id for s in again.specs] == [s.run_id for s in study.specs]


def test_exclusions_and_repeats(tmp_path):
    text = BASE.replace('seeds = [0, 1]', 'seeds = [0]\nrepeats = 2') + """
[[exclude]]
optimizer = "lbfgs"
dtype = "float32"
[[exclude]]
step = "diag"
kappa = 100
"""
    study = load_study(write(tmp_path, text))
    axes = [s.axes() for s in study.specs]
    assert not any(a["optimizer"] == "lbfgs" and a["dtype"] == "float32" for a in axes)
    assert not any(a.get("hp_step") == "diag" and a["data_kappa"] == 100 for a in axes)
    assert len(axes) == (2 * 3 * 2 - 2 - 2) * 2
    assert {a["repeat"] for a in axes} == {0, 1}


@pytest.mark.parametrize("change, message", [
    (("name = \"t\"", "name = \"t\"\ncolour = 3"), "unknown top-level key 'colour'; allowed:"),
    (("name = \"gd\"", "name = \"sgd\""), "optimizers: unknown name 'sgd'; allowed: gd, adadelta"),
    (("name = \"synthetic\"", "name = \"mnist\""), "datasets: unknown name 'mnist'"),
    (("name = \"numpy\"", "name = \"mxnet\""), "backends: unknown name 'mxnet'"),
    (("\"float32\"]", "\"float16\"]"), "unknown dtype 'float16' for numpy; allowed: float64"),
    (("tol = 1e-8", "tol = -1e-8"), "stopping: stopping rule: tol must be a finite number > 0"),
    (("tol = 1e-8", "tol = \"small\""), "tol must be"),
    (("max_iter = 3000", "max_iter = 0"), "max_iter must be an integer >= 1"),
    (("max_iter = 3000", "max_iterations = 3"), "unknown key in [stopping] 'max_iterations'"),
    (("kappa = [10, 100]", "kappa = [10, 0.5]"), "kappa must be a finite number >= 1"),
    (("kappa = [10, 100]", "colour = 1"), "dataset 'synthetic' has no parameter 'colour'"),
    (("step = [\"1/L\", \"diag\"]", "step = \"2/L\""), "unknown step '2/L'"),
    (("name = \"lbfgs\"", "name = \"lbfgs\"\nhistory = 0"), "history must be an integer >= 1"),
    (("seeds = [0, 1]", "seeds = [-1]"), "seeds: each seed must be an integer >= 0"),
    (("seeds = [0, 1]", "repeats = 0"), "repeats: must be an integer >= 1"),
    (("run_timeout = 120", "run_timeout = -5"), "run_timeout: must be a number of seconds > 0"),
    (("kappa = [10, 100]", "kappa = []"), "kappa is an empty list"),
])
def test_config_errors_name_file_key_and_allowed_values(tmp_path, change, message):
    path = write(tmp_path, BASE.replace(*change, 1))
    with pytest.raises(ConfigError) as info:
        load_study(path)
    assert message in str(info.value)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_invalid_toml_empty_grid_and_missing_tables(tmp_path):
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_study(write(tmp_path, "name = [unclosed"))
    with pytest.raises(ConfigError, match="at least one \\[\\[optimizers\\]\\]"):
        parse_study({"datasets": [{"name": "eve"}], "backends": [{"name": "numpy"}]}, "x.toml")
    with pytest.raises(ConfigError, match="the grid is empty"):
        load_study(write(tmp_path, BASE + '[[exclude]]\nbackend = "numpy"\n'))
    with pytest.raises(ConfigError, match="does not exist"):
        load_study(tmp_path / "missing.toml")


def test_cli_config_error_exits_2_and_runs_nothing(tmp_path, capsys):
    path = write(tmp_path, BASE.replace("tol = 1e-8", "tol = 0"))
    assert main(["run", str(path), "--out", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err
    assert "tol must be" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "res").exists()


def test_dry_run_and_only(tmp_path, capsys):
    path = write(tmp_path, BASE)
    assert main(["run", str(path), "--dry-run", "--only", "optimizer=lbfgs", "dtype=float64"]) == 0
    assert "4 runs in t" in capsys.readouterr().out


def test_a_dry_run_lists_configurations_says_what_is_done_and_writes_nothing(tmp_path, capsys):
    """One short line per configuration (not a 400-character row per run), the runs that are
    done left out of the estimate, and an honest first-run estimate (the budgets, not 'none')."""
    path = write(tmp_path, BASE.replace("kappa = [10, 100]", "kappa = 10"))
    out = tmp_path / "res"
    assert main(["run", str(path), "--dry-run", "--out", str(out), "--only", "dtype=float64"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    joined = " ".join(line.strip() for line in lines)  # long lines are wrapped
    assert not out.exists()  # written nowhere
    assert max(len(line) for line in lines if "/" not in line) <= 120, text
    assert lines[0].startswith("every run: ") and "dtype=float64" in " ".join(lines[:2]), text
    assert sum(line.endswith("float64") for line in lines) == 3, text  # 3 configurations
    assert "time estimate: none measured yet" in joined and "run_timeout = 120 s" in joined, text
    assert lines[-1] == f"6 runs in t ({path}): 0 done, 6 to run", text
    assert main(["run", str(path), "--out", str(out), "--quiet", "--only", "dtype=float64",
                 "optimizer=lbfgs"]) == 0
    capsys.readouterr()
    assert main(["run", str(path), "--dry-run", "--out", str(out), "--only", "dtype=float64"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[-1] == f"6 runs in t ({path}): 2 done, 4 to run", text
    joined = " ".join(line.strip() for line in text.splitlines())
    assert "time estimate: about" in joined and "for 4 runs" in joined, text
    assert main(["run", str(path), "--dry-run", "--out", str(out), "--only", "dtype=float64",
                 "optimizer=lbfgs"]) == 0
    text = capsys.readouterr().out
    assert f"nothing to run: all 2 runs are done in {out}" in text, text
    assert "time estimate" not in text, text
    assert main(["run", str(path), "--dry-run", "--only", "colour=red"]) == 2
    assert "--only: unknown key 'colour'" in capsys.readouterr().err


STATUS_CONFIG = """
name = "statuses"
run_timeout = 60
[stopping]
tol = 1e-8
max_iter = 2000
[[datasets]]
name = "synthetic"
n = 400
[[optimizers]]
name = "gd"
step = "fixed"
learning_rate = [0.5, 80.0]
[[optimizers]]
name = "scipy-lbfgs"
[[backends]]
name = "numpy"
[[backends]]
name = "tensorflow"
device = "gpu"
[[exclude]]
optimizer = "gd"
backend = "tensorflow"
"""


@pytest.mark.slow
def test_statuses_are_recorded_while_the_sweep_goes_on(tmp_path, capsys):
    if gpu_visible("tensorflow"):
        pytest.skip("a GPU is visible: the skip path cannot be exercised here")
    study = load_study(write(tmp_path, STATUS_CONFIG))
    statuses = run_study(study, tmp_path / "res", quiet=True)
    runs = pd.read_parquet(tmp_path / "res" / "runs.parquet").set_index("optimizer")
    # the GPU run is not made here and writes no row (a machine with a GPU makes it later)
    assert statuses["not run"] == 1 and sum(statuses.values()) == len(runs) + 1 == 4
    gd = runs.loc["gd"].set_index("hp_learning_rate")
    assert gd.loc[0.5, "status"] == "converged" and gd.loc[80.0, "status"] == "diverged"
    scipy = runs.loc[["scipy-lbfgs"]].set_index("backend")
    assert list(scipy.index) == ["numpy"] and scipy.loc["numpy", "status"] == "converged"
    said = [line for line in capsys.readouterr().out.splitlines() if "not run here" in line]
    assert said == ["statuses: 1 run not run here: no GPU visible to TensorFlow (no row is "
                    "written; a machine that has one runs it)"]
    for column in ("env_host", "env_cpu", "env_cores", "env_python", "env_numpy", "env_scipy",
                   "env_tensorflow", "env_pandas", "env_blas"):
        assert runs[column].notna().all(), column
    assert (runs.loc["gd", "peak_memory_mb"] > 10).all()
    traces = pd.read_parquet(tmp_path / "res" / "traces.parquet")
    assert set(traces["run_id"]) == set(runs.loc["gd", "run_id"]) | {
        scipy.loc["numpy", "run_id"]}


def test_runs_that_cannot_run_here_start_no_warm_process(tmp_path, monkeypatch):
    from study.frameworks.registry import FRAMEWORKS
    from study.sweep.isolate import ForkServer

    if FRAMEWORKS["tensorflow"].gpu_nodes_present():
        pytest.skip("GPU device files are here: TensorFlow is asked, and may see one")
    launched = []
    launch = ForkServer.launch
    monkeypatch.setattr(ForkServer, "launch", lambda server, *args, **kwargs: (
        launched.append(server.preload), launch(server, *args, **kwargs)))
    text = ('name = "gpu-only"\n[[datasets]]\nname = "synthetic"\nn = 100\n[[optimizers]]\n'
            'name = "gd"\n[[backends]]\nname = "tensorflow"\ndevice = "gpu"\n')
    statuses = run_study(load_study(write(tmp_path, text)), tmp_path / "res", quiet=True)
    assert statuses == {"not run": 1} and launched == []


@pytest.mark.slow
def test_error_and_timeout_are_recorded(tmp_path):
    text = STATUS_CONFIG.replace("run_timeout = 60", "run_timeout = 0.3").replace(
        'device = "gpu"', 'device = "cpu"').replace("learning_rate = [0.5, 80.0]",
                                                    "learning_rate = 1e-9").replace(
        "max_iter = 2000", "max_iter = 100000000")
    study = load_study(write(tmp_path, text))
    run_study(study, tmp_path / "res", quiet=True)
    runs = pd.read_parquet(tmp_path / "res" / "runs.parquet").set_index("optimizer")
    assert runs.loc["gd", "status"] == "timeout"  # a billion tiny steps, killed at 0.3 s
    assert "time budget of 0.3 s" in runs.loc["gd", "message"]
    data = tmp_path / "data.csv"
    pd.DataFrame({"a": [1.0, 2.0, 4.0, 3.0], "y": [0.0, 1.0, 3.0, 1.0]}).to_csv(data, index=False)
    study = load_study(write(tmp_path, f"""
[[datasets]]
name = "tabular"
path = "{data}"
features = ["a"]
labels = ["y"]
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
"""))
    data.unlink()  # the file vanishes after validation: the run raises, the sweep records it
    run_study(study, tmp_path / "err", quiet=True)
    row = pd.read_parquet(tmp_path / "err" / "runs.parquet").iloc[0]
    assert row["status"] == "error"
    assert "InputError: tabular: file" in row["message"] and "\n" not in row["message"]
    assert "Traceback" in (tmp_path / "err" / "logs" / f"{row['run_id']}.log").read_text()


@pytest.mark.slow
def test_resume_after_a_real_kill(tmp_path):
    config = write(tmp_path, BASE)
    out = tmp_path / "res"
    cmd = [sys.executable, "-m", "study", "run", str(config), "--out", str(out), "--quiet",
           "--no-adaptive"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if len([p for p in (out / "runs").glob("*.parquet") if ".trace" not in p.name]) >= 2:
            break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    first = {p.stem for p in (out / "runs").glob("*.parquet") if ".trace" not in p.name}
    assert 2 <= len(first) < 24
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = pd.read_parquet(out / "runs.parquet")
    expected = {s.run_id for s in load_study(config).specs}
    assert sorted(runs["run_id"]) == sorted(expected)  # every run exactly once
    assert first <= set(runs["run_id"])
    assert not list((out / "runs").glob(".*tmp*"))


def test_summary_ci_contains_the_median_and_failures_count_as_infinite():
    rows = []
    for seed, (status, seconds) in enumerate([("converged", 1.0), ("converged", 2.0),
                                              ("converged", 3.0), ("max_iter", 0.5),
                                              ("converged", 1.5)]):
        rows.append({"dataset": "d", "dataset_params": "{}", "optimizer": "gd",
                     "hyperparameters": "{}", "backend": "numpy", "device": "cpu",
                     "feed": None, "xla": None, "dtype": "float64", "init": "zeros",
                     "seed": seed, "status": status, "seconds": seconds,
                     "setup_seconds": 0.1, "iterations": 10, "seconds_per_iteration": 0.1})
    table = summarize(pd.DataFrame(rows))
    row = table.iloc[0]
    assert row["runs"] == 5 and row["success_rate"] == pytest.approx(0.8)
    assert row["median_seconds"] == 2.0  # of 1, 1.5, 2, 3, inf: the failure is not dropped
    # with a failure the typical value is the median, and five instances are too few for a
    # distribution-free interval of a median (it takes six)
    assert row["typical_seconds"] == 2.0 and np.isnan(row["ci_low"])
    assert "an interval of a median needs 6" in row["ci_method"]


def test_summarize_command(tmp_path, capsys):
    study = load_study(write(tmp_path, BASE.replace("seeds = [0, 1]", "seeds = [0]").replace(
        'dtype = ["float64", "float32"]', 'dtype = "float64"').replace("kappa = [10, 100]",
                                                                       "kappa = 10")))
    run_study(study, tmp_path / "res", quiet=True)
    capsys.readouterr()
    assert main(["summarize", str(tmp_path / "res")]) == 0
    out = capsys.readouterr().out
    assert "lbfgs" in out and "100%" in out
    assert main(["summarize", str(tmp_path / "nothing")]) == 2
    assert Path(tmp_path / "res" / "runs.parquet").exists()


ENDS = """
name = "ends"
seeds = [0, 1, 2]
timeout_ends_configuration = true
[stopping]
tol = 1e-8
time_budget = 0.2
[[datasets]]
name = "synthetic"
n = 500
kappa = 10
[[optimizers]]
name = "gd"
step = "fixed"
learning_rate = 1e-9
[[optimizers]]
name = "lbfgs"
[[backends]]
name = "numpy"
"""


def test_a_timeout_ends_its_configuration_and_the_report_says_so(tmp_path):
    from study.report.build import ended_sentence

    run_study(load_study(write(tmp_path, ENDS)), tmp_path / "res", quiet=True)
    runs = pd.read_parquet(tmp_path / "res" / "runs.parquet")
    gd = runs[runs["optimizer"] == "gd"].set_index("seed")
    # the configurations' first seeds run first: seed 0 times out, 1 and 2 never start
    assert gd.loc[0, "status"] == "timeout"
    assert list(gd.loc[[1, 2], "status"]) == ["skipped", "skipped"]
    assert all(m == "not run: seed 0 of this configuration timed out "
                    "(timeout_ends_configuration)" for m in gd.loc[[1, 2], "message"])
    assert set(runs.loc[runs["optimizer"] == "lbfgs", "status"]) == {"converged"}
    assert ended_sentence(runs).startswith("2 runs were not run: an earlier seed")
    assert ended_sentence(runs[runs["optimizer"] == "lbfgs"]) is None
    # a skipped row names the configuration its measured sibling names (the paired tables and
    # figures take them as one configuration; a TensorFlow row once said xla False where its
    # skipped siblings said nothing, and the figures of a whole study had no common instance)
    config = [c for c in CONFIG_COLUMNS if c in runs]
    assert len(gd[config].astype(str).drop_duplicates()) == 1
    with pytest.raises(ConfigError, match="timeout_ends_configuration: must be true or false"):
        load_study(write(tmp_path, ENDS.replace("= true", '= "yes"'), "bad.toml"))


@pytest.mark.parametrize("name", ["numpy", "tensorflow", "jax", "torch"])
def test_a_specs_feed_and_xla_are_what_its_run_records(name):
    """A row that never ran (skipped) takes its feed and xla from the spec; a measured row from
    the backend: a config that names neither gets the backend's defaults in both."""
    from study.frameworks.registry import make_backend
    from study.regression.spec import RunSpec

    pytest.importorskip(name)
    spec = RunSpec("s", "synthetic", {}, "gd", {}, name, {}, "float64", "zeros", 0, 0)
    ran = make_backend(name).options() if name != "numpy" else {}
    assert {k: v for k, v in spec.axes().items() if k in ("feed", "xla") and v is not None} \
        == ran
