"""Ordinary input a hostile user tries (issue 28, items 10-11): names given twice, integers out
of range, grids too large to list, exclusions that match nothing, a missing column list, and
TensorFlow's start-up lines. Each ends with one line naming what is wrong, exit status 2, and
nothing written."""

import subprocess
import sys

import pytest
from interrupting import env

from study.__main__ import main
from study.sweep.grid import MAX_RUNS

GRID = """
{top}
[stopping]
max_iter = 50
{stopping}
[[datasets]]
name = "synthetic"
n = 200
{dataset}
[[optimizers]]
name = "gd"
step = ["1/L", "diag"]
{optimizer}
[[backends]]
name = "numpy"
"""


def config(tmp_path, top="", stopping="", dataset="", optimizer="", tail=""):
    path = tmp_path / "c.toml"
    path.write_text(GRID.format(top=top, stopping=stopping, dataset=dataset,
                                optimizer=optimizer) + tail)
    return path


def refused(capsys, args, *fragments, tmp_path=None) -> str:
    """Exit status 2, one line on stderr holding every fragment, nothing written."""
    code = main([str(a) for a in args])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    if tmp_path is not None:
        assert not (tmp_path / "out").exists()
    return err


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "data.csv"
    path.write_text("a,b,y\n1,2,3\n2,1,4\n3,5,1\n4,4,4\n5,0,2\n6,1,0\n")
    return path


@pytest.mark.parametrize("features, labels, named", [
    (["a", "a", "b"], ["y"], "feature column 'a' is named twice"),
    (["a", "b"], ["y", "y"], "label column 'y' is named twice"),
    (["a", "y"], ["y"], "tabular: column 'y' is both a feature and a label"),  # issue 43 case 4
])
def test_a_column_named_twice_is_one_line(tmp_path, capsys, table, features, labels, named):
    refused(capsys, ["regress", "--dataset", "tabular", "--path", table, "--features",
                     *features, "--labels", *labels, "--out", tmp_path / "out" / "r.parquet"],
            named, tmp_path=tmp_path)
    path = config(tmp_path).with_name("t.toml")
    path.write_text(f'[[datasets]]\nname = "tabular"\npath = "{table}"\nfeatures = {features}\n'
                    f'labels = {labels}\n[[optimizers]]\nname = "gd"\n[[backends]]\n'
                    'name = "numpy"\n')
    refused(capsys, ["run", path, "--dry-run"], named)


def test_a_missing_column_list_is_named(capsys, table):
    refused(capsys, ["regress", "--dataset", "tabular", "--path", table, "--labels", "y"],
            "dataset 'tabular' needs features (--features")


@pytest.mark.parametrize("flag", ["--seed", "--max-iter", "--history", "--rows", "--patience"])
def test_an_integer_beyond_64_bits_is_a_usage_error(tmp_path, capsys, flag):
    """The seed's case ran, then failed writing its record with a traceback."""
    with pytest.raises(SystemExit) as exit_:
        main(["regress", *(["--rows", "200"] if flag != "--rows" else []), flag,
              str(10**23), "--out", str(tmp_path / "out" / "r.parquet")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.strip().splitlines()) == 1
    assert f"argument {flag}: {10**23} does not fit a 64-bit integer" in err
    assert not (tmp_path / "out").exists()


def test_integers_a_run_cannot_use_are_refused_before_it(tmp_path, capsys):
    refused(capsys, ["regress", "--rows", "200", "--init", "normal", "--seed", "-1"],
            "--seed must be an integer >= 0, got -1")
    refused(capsys, ["regress", "--rows", "200", "--history", str(2**62)],
            f"lbfgs: history={2**62} needs about", "use a shorter history")
    refused(capsys, ["regress", "--rows", "200", "--history", "9999999"],
            "lbfgs: history=9999999 needs about")


@pytest.mark.parametrize("where, line", [
    ("top", "seeds = [99999999999999999999999]"),
    ("stopping", "patience = 99999999999999999999999"),
    ("dataset", "seed = -9223372036854775809"),
    ("optimizer", "learning_rate = 99999999999999999999999"),
])
def test_a_config_integer_beyond_64_bits_is_refused(tmp_path, capsys, where, line):
    refused(capsys, ["run", config(tmp_path, **{where: line}), "--out", tmp_path / "out"],
            "does not fit a 64-bit integer", tmp_path=tmp_path)


def test_a_grid_too_large_for_one_folder_is_refused_before_it_is_made(tmp_path, capsys):
    """600,000 runs printed nothing for over 120 s; now they are counted first."""
    seeds = list(range(100))
    path = config(tmp_path, top=f"seeds = {seeds}", dataset=f"kappa = {list(range(1, 61))}",
                  optimizer='[[optimizers]]\nname = "adadelta"\n'
                            f"rho = {[0.001 * r for r in range(1, 51)]}")
    refused(capsys, ["run", path, "--dry-run"], f"{(2 + 50) * 60 * 100} runs, more than the "
            f"{MAX_RUNS} one study folder is made for", "split it")
    refused(capsys, ["run", config(tmp_path, top=f"repeats = {2**62}"), "--dry-run"],
            f"{2 * 2**62} runs")


def test_a_long_dry_run_says_how_many_runs_before_listing_them(tmp_path, capsys):
    path = config(tmp_path, top=f"seeds = {list(range(501))}")
    assert main(["run", str(path), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"1002 runs in c ({path}); listing them:"
    assert lines[-1] == f"1002 runs in c ({path}): 0 done, 1002 to run"


@pytest.mark.parametrize("exclude, named", [
    ('optimizer = "lbgfs"', "no run has optimizer = 'lbgfs'; its values: 'gd'"),
    ('step = ["diag", "1/l"]', "no run has step = '1/l'; its values: '1/L', 'diag'"),
    ("seed = 3", "no run has seed = 3; its values: 0"),
    ('step = "diag"\nseed = 0\n[[exclude]]\nstep = "1/L"\nn = 7',
     "no run has n = 7"),
])
def test_an_exclusion_that_matches_nothing_is_named(tmp_path, capsys, exclude, named):
    """A typo in an [[exclude]] value left in every run it was written to leave out."""
    path = config(tmp_path, tail=f"[[exclude]]\n{exclude}\n")
    refused(capsys, ["run", path, "--out", tmp_path / "out"], "exclude:", named,
            tmp_path=tmp_path)


def test_an_exclusion_of_values_never_together_is_named(tmp_path, capsys):
    path = config(tmp_path, optimizer='[[optimizers]]\nname = "lbfgs"\n',
                  tail='[[exclude]]\noptimizer = "lbfgs"\nstep = "diag"\n')
    refused(capsys, ["run", path, "--dry-run"], "matches no run (no run has all of these "
                                                "values at once)")


@pytest.mark.slow
def test_tensorflow_start_up_lines_stay_off_the_terminal():
    """About seven lines of TensorFlow's (oneDNN, CUDA stubs, cuInit) came before each one-line
    error on that backend; TF_CPP_MIN_LOG_LEVEL does not hold them back."""
    done = subprocess.run([sys.executable, "-m", "study", "regress", "--rows", "200",
                           "--backend", "tensorflow", "--optimizer", "keras:Nope"],
                          capture_output=True, text=True, timeout=300, env=env())
    assert done.returncode == 2
    assert done.stderr.startswith("convergence-study regress: error: unknown Keras optimizer")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


@pytest.mark.parametrize("args, named", [
    (["--seed", "1", "--seed", "2"], "argument --seed: given twice"),
    (["--see", "1", "--seed", "2"], "argument --seed: given twice"),  # an abbreviation too
    (["--history", "5", "--opt-param", "history=3"],
     "history is given twice, by --history and by --opt-param"),
    (["--data-param", "seed=1", "--data-param", "seed=2"], "--data-param seed is given twice"),
    (["--data-param", "rows=30"], "rows is given twice, by --rows and by --data-param"),
])
def test_a_name_given_twice_on_the_command_line_is_refused(capsys, args, named):
    """argparse keeps the last of an option given twice: the record said seed 2 to a user who
    also typed seed 1."""
    try:
        refused(capsys, ["regress", "--rows", "200", *args], named)
    except SystemExit as exit_:  # argparse's usage error
        err = capsys.readouterr().err
        assert exit_.code == 2 and len(err.strip().splitlines()) == 1 and named in err, err


def test_a_key_value_integer_beyond_64_bits_is_refused(capsys):
    """kappa=10**400 reached float() inside the data set's checks: a TypeError traceback."""
    refused(capsys, ["regress", "--dataset", "synthetic", "--data-param", f"kappa={10**400}"],
            "--data-param kappa=", "does not fit 64 bits")


def test_feedmode_calls_that_could_never_finish_are_refused(tmp_path, capsys):
    refused(capsys, ["feedmode", "--calls", str(2**62), "--out", tmp_path / "out"],
            "more than 100000", tmp_path=tmp_path)


# ---- a reader that leaves early (issue 43, case 10) ------------------------------------------

@pytest.mark.parametrize("streams", ["stdout", "stdout and stderr"])
def test_a_reader_that_leaves_early_ends_nothing(tmp_path, streams):
    """`regress --out ... | head -0`: the pipe is closed before the command prints its first
    line (the summary, printed before the files are written): no traceback, the files are
    written and the exit status is the command's own."""
    out = tmp_path / "r.parquet"
    proc = subprocess.Popen(
        [sys.executable, "-m", "study", "regress", "--dataset", "synthetic", "--rows", "200",
         "--optimizer", "lbfgs", "--out", str(out)], cwd=tmp_path, env=env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if streams == "stdout and stderr" else subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is printed
    err = proc.stderr.read().decode() if proc.stderr else ""
    assert proc.wait(timeout=120) == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert out.is_file() and (tmp_path / "r.trace.parquet").is_file()


# ---- every subprocess has a bound that is said when met (issue 43 case 12) -------------------

def sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            stdout=subprocess.PIPE, text=True)


def test_the_gpu_probe_is_bound_and_says_so(monkeypatch, capsys):
    from study.sweep import executors

    monkeypatch.setattr(executors, "GPU_PROBE_SECONDS", 0.2)
    probe = executors.GpuProbe.__new__(executors.GpuProbe)
    probe.framework, probe.proc = "jax", sleeper()
    assert probe.result() is False and probe.proc.returncode is not None  # killed
    assert "jax GPU count did not come within 0.2 s" in capsys.readouterr().err


def test_a_dask_cluster_that_never_starts_is_bound(monkeypatch):
    pytest.importorskip("distributed")
    from convergence_study.errors import InputError
    from study.sweep import dask_cluster

    monkeypatch.setattr(dask_cluster, "START_SECONDS", 0.2)
    monkeypatch.setattr(dask_cluster, "python_command", lambda *args, **kwargs: (
        [sys.executable, "-c", "import time; time.sleep(60)"], None))
    cluster = dask_cluster.ClusterProcess(2)
    with pytest.raises(InputError, match="did not start within 0.2 s"):
        cluster.start()
    assert cluster.proc is None  # closed, its session killed
