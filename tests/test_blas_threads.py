"""The BLAS thread count of a NumPy run (optimizers/blas_threads.py): one thread below the
machine's measured crossover, the library's default from it up; the environment's and the
user's choice win; measured once and cached; recorded in every regression row; never timed."""

import json
import os

import pandas as pd
import pytest

from convergence_study.errors import InputError
from optimizers import blas_threads
from study.__main__ import main
from study.sweep import interpreter

MIB = 2**20


@pytest.fixture
def machine(tmp_path, monkeypatch):
    """A machine of 4 CPUs whose BLAS defaults to 4 threads (and runs as many as it is given)
    and whose calibration (counted, not run) finds the crossover at 1 MiB; a cache of its own;
    no thread variable set."""
    calls = []

    def calibrate():
        calls.append(1)  # one thread as fast below 1 MiB, half as fast from there up
        return blas_threads.calibration_entry([MIB // 2, MIB, 4 * MIB], [1, 2, 8], [1, 1, 4],
                                              0.25, 0.0)

    for name in blas_threads.ENVIRONMENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(blas_threads.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(blas_threads, "_MEMO", {})
    monkeypatch.setattr(blas_threads, "calibrate", calibrate)
    monkeypatch.setattr(blas_threads, "usable_cpus", lambda: 4)
    monkeypatch.setattr(blas_threads, "applied", lambda threads: threads)
    monkeypatch.setattr(blas_threads, "blas_pools", lambda: [
        {"internal_api": "openblas", "version": "0.3", "num_threads": 4,
         "architecture": "Haswell", "filepath": "/lib/libopenblas.so"}])
    return calls


def test_one_thread_below_the_crossover_and_the_default_from_it_up(machine):
    below = blas_threads.choose(MIB // 2)
    assert (below.threads, below.source, below.crossover_bytes) == (1, "auto-measured", MIB)
    assert blas_threads.choose(MIB).threads == 4
    assert blas_threads.choose(8 * MIB).threads == 4
    assert "below the 1 MiB crossover" in below.describe()
    assert machine == [1]  # measured once for the three


def test_no_crossover_means_one_thread_at_every_size(machine, monkeypatch):
    monkeypatch.setattr(blas_threads, "calibrate",
                        lambda: {"crossover_bytes": None, "calibration_seconds": 0.1})
    assert blas_threads.choose(2**40).threads == 1


def test_a_single_threaded_library_is_not_calibrated(machine, monkeypatch):
    monkeypatch.setattr(blas_threads, "usable_cpus", lambda: 4)
    monkeypatch.setattr(blas_threads, "applied", lambda threads: threads)
    monkeypatch.setattr(blas_threads, "blas_pools", lambda: [{"num_threads": 1}])
    choice = blas_threads.choose(8 * MIB)
    assert (choice.threads, choice.source) == (1, "auto-measured") and machine == []


@pytest.mark.parametrize("variable", blas_threads.ENVIRONMENT_VARIABLES)
def test_a_thread_variable_in_the_environment_is_left_alone(machine, monkeypatch, variable):
    monkeypatch.setenv(variable, "3")
    choice = blas_threads.choose(MIB // 2)
    assert (choice.threads, choice.source) == (4, "environment")  # what the library runs with
    assert machine == []  # nothing measured
    assert f"given by the environment, {variable}=3" in choice.describe()
    assert choice.columns()["blas_threads_source"] == "environment"


def test_a_given_count_wins_over_auto_and_the_environment(machine, monkeypatch):
    assert blas_threads.choose(8 * MIB, 1).threads == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    choice = blas_threads.choose(MIB // 2, "2")
    assert (choice.threads, choice.source) == (2, "given") and machine == []


@pytest.mark.parametrize("value", [0, -1, "0", "two", 1.5, True, "", None])
def test_a_bad_count_is_refused(value):
    with pytest.raises(InputError, match="must be 'auto' or an integer >= 1"):
        blas_threads.check("blas_threads", value)


@pytest.mark.parametrize("value", ["0", "two", "1.5", "-2"])
def test_regress_refuses_a_bad_count_in_one_line(tmp_path, capsys, value):
    out = tmp_path / "run.parquet"
    code = main(["regress", "--rows", "300", f"--blas-threads={value}", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--blas-threads must be 'auto' or an integer >= 1" in err
    assert not list(tmp_path.iterdir())


def test_the_crossover_is_written_once_and_read_ever_after(machine, monkeypatch, tmp_path):
    first = blas_threads.choose(MIB // 2)
    path = tmp_path / "cache" / blas_threads.CACHE_FILE
    entries = json.loads(path.read_text())
    assert len(entries) == 1 and next(iter(entries.values()))["crossover_bytes"] == MIB
    monkeypatch.setattr(blas_threads, "_MEMO", {})  # a new process: only the file is left
    again = blas_threads.choose(MIB // 2)
    assert machine == [1]  # not calibrated again
    assert (first.calibration_seconds, again.calibration_seconds) == (0.25, 0.0)
    assert again.crossover_bytes == MIB
    # another machine (here another default thread count) measures its own
    monkeypatch.setattr(blas_threads, "usable_cpus", lambda: 4)
    monkeypatch.setattr(blas_threads, "applied", lambda threads: threads)
    monkeypatch.setattr(blas_threads, "blas_pools", lambda: [{"num_threads": 8}])
    blas_threads.choose(MIB // 2)
    assert machine == [1, 1] and len(json.loads(path.read_text())) == 2


def test_a_busy_calibration_is_made_again_and_the_fastest_times_kept(machine, monkeypatch):
    """Measured while others held the CPUs (their load making the threads look slow at 4 MiB):
    measured again by the next processes until a quiet one, at most ATTEMPTS in all."""
    runs = iter([([1, 2, 8], [1, 1, 40], 1.5),  # busy: slower at 4 MiB, so no crossover
                 ([1, 2, 8], [1, 3, 4], 1.2),  # busy again: slower at 1 MiB
                 ([1, 2, 8], [1, 1, 40], 1.5)])  # would be the fourth: never made

    def calibrate():
        machine.append(1)
        one, default, others = next(runs)
        return blas_threads.calibration_entry([MIB // 2, MIB, 4 * MIB], one, default, 0.3,
                                              others)

    monkeypatch.setattr(blas_threads, "calibrate", calibrate)
    first = blas_threads.choose(8 * MIB)
    assert (first.threads, first.crossover_bytes) == (1, None)
    monkeypatch.setattr(blas_threads, "_MEMO", {})  # the next process
    second = blas_threads.choose(8 * MIB)
    # each size's fastest over the two: 1 MiB and 4 MiB both faster with the default
    assert (second.threads, second.crossover_bytes, second.calibration_seconds) == (4, MIB, 0.3)
    for attempts in (3, 3):  # a third attempt, then the limit: read from the file
        monkeypatch.setattr(blas_threads, "_MEMO", {})
        blas_threads.choose(8 * MIB)
        entry = next(iter(json.loads(blas_threads.cache_path().read_text()).values()))
        assert entry["attempts"] == attempts and not entry["quiet"]
    assert len(machine) == 3


def test_a_quiet_calibration_is_not_made_again(machine, monkeypatch):
    blas_threads.choose(MIB)
    monkeypatch.setattr(blas_threads, "_MEMO", {})
    blas_threads.choose(MIB)
    entry = next(iter(json.loads(blas_threads.cache_path().read_text()).values()))
    assert entry["quiet"] and entry["attempts"] == 1 and machine == [1]


def test_an_unwritable_cache_still_chooses(machine, monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv(blas_threads.CACHE_VARIABLE, str(blocker / "cache"))
    assert blas_threads.choose(MIB // 2).threads == 1
    assert blas_threads.choose(MIB // 2).calibration_seconds == 0.0  # kept for the process


@pytest.mark.parametrize("one, default, expected", [
    # the default no faster on small X, twice as fast from 4 MiB, as fast (not slower) at 64
    ([1, 1, 1, 2, 8, 50], [1, 1, 1, 1, 4, 48], 4 * MIB),
    ([1, 1, 1, 2, 8, 50], [10, 10, 1, 1, 4, 48], 4 * MIB),  # much slower small: same answer
    ([1, 1, 1, 2, 8, 50], [1, 1, 1, 1, 4, 80], None),  # slower on the largest: never
    ([1, 1, 1, 1, 1, 1], [2, 2, 2, 2, 2, 2], None),
    ([2, 2, 2, 2, 2, 2], [1, 1, 1, 1, 1, 1], 64 * 2**10),
    ([1, 1, 2, 2, 2, 2], [1, 1, 1, 3, 1, 1], 16 * MIB),  # slower at 4 MiB: from 16 up
])
def test_the_crossover_of_a_calibration(one, default, expected):
    sizes = [2**k for k in range(16, 27, 2)]
    assert blas_threads.crossover(sizes, one, default) == expected


def test_a_real_calibration_is_short_and_complete(monkeypatch):
    monkeypatch.setattr(blas_threads, "SIZES", (2**16, 2**18))
    entry = blas_threads.calibrate()
    assert entry["sizes"] == [2**16, 2**18]
    assert all(t > 0 for t in entry["one_thread_seconds"] + entry["default_seconds"])
    assert entry["crossover_bytes"] in (None, 2**16, 2**18)


def test_the_limit_holds_the_library_at_the_count_and_lets_go():
    from threadpoolctl import threadpool_info

    def counts():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = counts()
    with blas_threads.Choice(1, "given", default_threads=max(before)).limits():
        assert set(counts()) == {1}
    assert counts() == before


def test_matrix_bytes_follow_the_formulation():
    assert blas_threads.matrix_bytes(20000, 6, "float64") == 960_000
    assert blas_threads.matrix_bytes(20000, 6, "float32") == 480_000
    assert blas_threads.matrix_bytes(20000, 6, "float64", "gram") == 288


def test_the_columns_are_declared():
    from study.regression.schema import SCHEMA, TIMING_COLUMNS

    for name in ("blas_threads", "blas_threads_source", "blas_threads_crossover",
                 "blas_calibration_seconds"):
        assert name in SCHEMA.names
    # a calibration made again (a busy machine) can move the crossover between executions
    assert {"blas_calibration_seconds", "blas_threads_crossover"} <= set(TIMING_COLUMNS)


def test_the_calibration_measures_the_others_load(monkeypatch):
    monkeypatch.setattr(blas_threads, "SIZES", (2**16,))
    entry = blas_threads.calibrate()
    assert entry["others_cpu_cores"] is None or entry["others_cpu_cores"] >= 0
    assert entry["quiet"] == (entry["others_cpu_cores"] is None
                              or entry["others_cpu_cores"] <= blas_threads.QUIET_CORES)


def test_a_load_that_proc_stat_cannot_see_is_unknown_not_negative():
    # CI's sandbox counted none of this process in /proc/stat: others came out -3.3 cores
    assert blas_threads.others_cores(-3.3 * 2.0, 2.0) is None
    assert blas_threads.others_cores(-0.01, 2.0) == 0.0  # clock-tick rounding
    assert blas_threads.others_cores(1.0, 2.0) == 0.5
    assert blas_threads.others_cores(float("nan"), 2.0) is None
    assert blas_threads.others_cores(1.0, 0.0) is None


def test_a_regress_row_records_and_the_summary_shows_the_choice(machine, tmp_path, capsys):
    out = tmp_path / "run.parquet"
    assert main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer", "gd",
                 "--max-iter", "5000", "--out", str(out)]) == 0
    line = capsys.readouterr().out.splitlines()[1]  # after the bound's prediction (issue 44)
    assert line.startswith("gd on numpy/cpu float64: converged after")
    assert line.endswith("; BLAS 1 thread (auto-measured: X 0.0191 MiB, below the 1 MiB "
                         "crossover)")
    row = pd.read_parquet(out).iloc[0]
    assert (row["blas_threads"], row["blas_threads_source"]) == (1, "auto-measured")
    assert (row["blas_threads_crossover"], row["blas_calibration_seconds"]) == (MIB, 0.25)
    assert main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer", "gd",
                 "--max-iter", "5000", "--blas-threads", "2", "--out", str(out)]) == 0
    assert "; BLAS 2 threads (given)" in capsys.readouterr().out
    assert pd.read_parquet(out).iloc[0]["blas_threads_source"] == "given"


def test_a_sweep_run_calibrates_before_its_clocks_and_runs_under_the_limit(machine, tmp_path,
                                                                          monkeypatch):
    """The order of events in one sweep run: the calibration ends before the probe (the
    timed region) begins, and the loop runs with the chosen count in force."""
    from threadpoolctl import threadpool_info

    from study.regression import measure as measure_module
    from study.regression.spec import RunSpec
    from study.sweep.plugin import RunContext

    events = []
    calibrate = blas_threads.calibrate

    def slow_calibration():
        events.append("calibration")
        return calibrate()

    class Probe:
        def __enter__(self):
            events.append("probe")

        def __exit__(self, *exc):
            events.append("probe ends")

    def run(*args, **kwargs):
        events.append(("run", sorted({i["num_threads"] for i in threadpool_info()
                                      if i["user_api"] == "blas"})))
        return real_run(*args, **kwargs)

    real_run = measure_module.run
    monkeypatch.setattr(blas_threads, "calibrate", slow_calibration)
    monkeypatch.setattr(measure_module, "run", run)
    spec = RunSpec("s", "synthetic", {"n": 400, "d": 4}, "gd", {}, "numpy", {}, "float64",
                   "zeros", 0, 0, {"tol": 1e-6, "max_iter": 5000})
    row = measure_module.measure(spec, RunContext(tmp_path, Probe())).row
    assert events == ["calibration", "probe", ("run", [1]), "probe ends"]
    assert (row["blas_threads"], row["blas_threads_source"]) == (1, "auto-measured")
    assert row["blas_calibration_seconds"] == 0.25 and row["status"] == "converged"


def test_regress_measures_its_run_as_the_sweep_does(machine, tmp_path, monkeypatch, capsys):
    """One way to measure a run: `regress` runs through study.regression.measure (its run,
    under the thread count measure chooses, here the one --blas-threads gives)."""
    from study.regression import measure as measure_module

    ran, real_run = [], measure_module.run
    monkeypatch.setattr(measure_module, "run", lambda *a, **k: ran.append(1) or real_run(*a, **k))
    assert main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer", "gd",
                 "--max-iter", "5000", "--blas-threads", "2"]) == 0
    assert ran == [1] and "; BLAS 2 threads (given)" in capsys.readouterr().out


def test_a_framework_backend_has_no_blas_columns(machine, tmp_path):
    from study.regression.measure import threads_for
    from study.regression.spec import RunSpec

    spec = RunSpec("s", "synthetic", {"n": 400, "d": 4}, "gd", {}, "jax", {}, "float64",
                   "zeros", 0, 0)
    assert threads_for(spec, None) is None and machine == []


def test_the_report_sentence_counts_the_choices():
    runs = pd.DataFrame({
        "blas_threads": [1, 1, 2, None], "backend": ["numpy", "numpy", "numpy", "jax"],
        "blas_threads_source": ["auto-measured", "auto-measured", "auto-measured", None],
        "blas_threads_crossover": [4 * MIB, 4 * MIB, 4 * MIB, None]})
    assert blas_threads.report_sentence(runs) == (
        "BLAS threads of the NumPy runs: 1 (auto-measured) in 2 runs; 2 (auto-measured) in 1 "
        "run; the measured crossover 4 MiB of X (one thread below, the library's default from "
        "there up).")
    assert blas_threads.report_sentence(runs.iloc[3:]) is None
    assert blas_threads.report_sentence(runs.drop(columns="blas_threads")) is None
    given = runs.assign(blas_threads_source="given", blas_threads_crossover=None).iloc[:1]
    assert blas_threads.report_sentence(given) == \
        "BLAS threads of the NumPy runs: 1 (given) in 1 run."
    # the regression and logistic report sections say it once, in a paragraph of its own
    from study.regression.report import blas_blocks

    assert [b.content for b in blas_blocks(given)] == [blas_threads.report_sentence(given)]
    assert blas_blocks(runs.drop(columns="blas_threads")) == []


@pytest.mark.parametrize("value", [3, "10000"])
def test_a_count_beyond_the_cpus_is_refused(monkeypatch, value):
    monkeypatch.setattr(blas_threads, "usable_cpus", lambda: 2)
    with pytest.raises(InputError, match=f"^blas_threads {int(value)} is more than the 2 CPUs "
                                         "this process may use$"):
        blas_threads.check("blas_threads", value)


def test_a_count_the_library_would_cap_is_refused(monkeypatch):
    """OpenBLAS caps a request at its build's maximum without a word: a count it does not run
    is refused, not recorded as given."""
    monkeypatch.setattr(blas_threads, "usable_cpus", lambda: 10**6)
    monkeypatch.setattr(blas_threads, "applied", lambda threads: min(threads, 64))
    with pytest.raises(InputError, match="blas_threads 10000 is more than the BLAS library runs "
                                         "here: it caps the count at 64"):
        blas_threads.check("blas_threads", 10000)
    assert blas_threads.check("blas_threads", 64) == 64


def test_a_given_count_is_recorded_as_the_library_reports_it(machine, monkeypatch):
    monkeypatch.setattr(blas_threads, "applied", lambda threads: 1)  # the library's word
    monkeypatch.setattr(blas_threads, "check", lambda where, value: value)
    assert blas_threads.choose(MIB, 2).columns()["blas_threads"] == 1


def test_the_library_reports_a_count_it_runs_and_is_let_go():
    before = [p["num_threads"] for p in blas_threads.blas_pools()]
    assert blas_threads.applied(1) == (1 if before else None)
    assert [p["num_threads"] for p in blas_threads.blas_pools()] == before


def test_regress_refuses_more_threads_than_cpus_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(blas_threads, "usable_cpus", lambda: 2)
    out = tmp_path / "run.parquet"
    code = main(["regress", "--rows", "300", "--blas-threads", "10000", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "--blas-threads 10000 is more than the 2 CPUs this process may use" in err
    assert not list(tmp_path.iterdir())


IDLE_THREADS = """
import os, sys
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

if not any(i["internal_api"] == "openblas" and i["num_threads"] > 1 for i in threadpool_info()):
    print("no multi-threaded OpenBLAS"); sys.exit(0)
X, w = np.random.rand(20000, 6), np.ones(6)
X @ w  # the warm process's own use
pid = os.fork()
if pid == 0:  # a run, as a sweep forks it: its thread count set (OpenBLAS makes its threads)
    with threadpool_limits(limits=1, user_api="blas"):
        for _ in range(3000):
            X.T @ (X @ w)
        main = str(os.getpid())
        spun = sum(int(open(f"/proc/self/task/{t}/schedstat").read().split()[0])
                   for t in os.listdir("/proc/self/task") if t != main)
    print(f"spun {spun / 1e6:.1f} ms", flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


def test_a_forked_runs_idle_blas_threads_take_no_cpu_from_it():
    """OpenBLAS makes its threads when a forked run sets its count, and by default they spin for
    about 0.1 s: on 2 cores that is taken from the run (an L-BFGS run of 1 ms measured 8 ms in a
    sweep). Every process a sweep starts has a short spin (interpreter.SPIN_VARIABLE), set when
    the sweep's environment is loaded; the idle threads' CPU time is counted, not timed."""
    import os
    import subprocess
    import sys

    import study.sweep.environment  # noqa: F401 - sets the variable, as for every sweep

    if not os.path.isdir("/proc/self/task"):
        pytest.skip("no /proc here to count threads' CPU time")
    assert os.environ[interpreter.SPIN_VARIABLE] == interpreter.SPIN_EXPONENT
    done = subprocess.run([sys.executable, "-c", IDLE_THREADS], capture_output=True, text=True,
                          timeout=120, check=True)
    if done.stdout.startswith("no multi-threaded"):
        pytest.skip(done.stdout.strip())
    assert float(done.stdout.split()[1]) < 20, done.stdout


def test_a_spin_setting_of_the_users_own_stays(monkeypatch):
    monkeypatch.setenv(interpreter.SPIN_VARIABLE, "28")
    interpreter.short_spin()
    assert os.environ[interpreter.SPIN_VARIABLE] == "28"
