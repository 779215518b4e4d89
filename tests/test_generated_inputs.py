"""Generated inputs through the command line, in-process (issue 17): command lines, study
configs, small CSV/Parquet files and results tables, valid and broken. Whatever comes in, no
exception escapes, every failure is exit status 2 with one line on stderr, and nothing is left
in the output folder. NumPy-only: a generated TensorFlow case always carries an option that is
refused before TensorFlow is imported. Issue 28 added names given twice, integers beyond 64
bits, exclusions that match nothing, and signals at generated moments of a sweep, a bench and a
compiled run (real processes, tests/interrupting.py)."""

import contextlib
import io
import signal
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from interrupting import (
    COMPILED_LOOP,
    Command,
    interrupted_cleanly,
    sentinels,
    tiny_bench,
    unchanged,
)

from study.__main__ import main

SETTINGS = settings(deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
EXAMPLES = {"regress": 150, "config": 120, "results": 60}


def likely_first(choices):
    """One of `choices`, the first (a valid value) about half of the time."""
    return st.one_of(st.just(choices[0]), st.sampled_from(choices))


def run_cli(args, out: Path) -> tuple[int, str]:
    """The command's exit status and stderr; the output folder must be as it was on failure."""
    before = sorted(out.rglob("*")) if out.exists() else None
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # argparse's usage errors leave this way, status 2
            code = exc.code
    lines = err.getvalue().strip().splitlines()
    if code != 0:
        assert code == 2, (args, code, err.getvalue())
        assert len(lines) == 1 and "Traceback" not in err.getvalue(), (args, err.getvalue())
        after = sorted(out.rglob("*")) if out.exists() else None
        assert after == before or (before is None and after == []), (args, after)
    return code, err.getvalue()


# ---- small data files ------------------------------------------------------------------------

cell = st.one_of(st.floats(-1e3, 1e3), st.integers(-5, 5), st.sampled_from(
    ["abc", "", "1e3", "nan", "inf", None, True, 1e201]))
column_names = st.sampled_from(["a", "b", "y", "rate", "rate.1", "a.1", "", "a"])


@st.composite
def data_file(draw, folder: Path):
    """A CSV or Parquet file (or a broken one) and the columns to ask for."""
    names = draw(st.lists(column_names, min_size=1, max_size=4))
    rows = draw(st.lists(st.tuples(*[cell] * len(names)), max_size=8))
    kind = draw(likely_first(["good", "csv", "parquet", "truncated", "empty", "text as parquet",
                              "missing", "directory", "xlsx"]))
    if kind == "good":
        rng = np.random.default_rng(draw(st.integers(0, 9)))
        path = folder / draw(st.sampled_from(["good.csv", "good.parquet"]))
        frame = pd.DataFrame(rng.standard_normal((12, 3)), columns=["a", "rate.1", "y"])
        frame.to_csv(path, index=False) if path.suffix == ".csv" else frame.to_parquet(path)
        twice = draw(likely_first([[], ["a"], ["rate.1"]]))  # a column named twice
        return path, ["a", "rate.1", *twice], ["y"] * draw(likely_first([1, 2]))
    path = folder / ("data.csv" if kind in ("csv", "empty") else "data.xlsx" if kind == "xlsx"
                     else "data.parquet")
    frame = pd.DataFrame(rows, columns=range(len(names)))
    frame.columns = names
    if kind == "csv":
        frame.to_csv(path, index=False)
    elif kind in ("parquet", "truncated"):
        try:
            frame.astype(str).to_parquet(path) if draw(st.booleans()) else \
                frame.apply(pd.to_numeric, errors="coerce").to_parquet(path)
        except (ValueError, TypeError):  # duplicate names: pandas refuses to write them
            path.write_bytes(b"PAR1")
        if kind == "truncated":
            path.write_bytes(path.read_bytes()[: draw(st.integers(0, 200))])
    elif kind == "empty":
        path.write_text("")
    elif kind == "text as parquet":
        path.write_text("a,b\n1,2\n")
    elif kind == "directory":
        path.mkdir()
    elif kind == "xlsx":
        path.write_text("x")
    features = draw(st.lists(column_names, min_size=0, max_size=3))
    labels = draw(st.lists(column_names, min_size=0, max_size=1))
    return path, features, labels


# ---- regress command lines -------------------------------------------------------------------

OPTIONS = {
    "--dataset": ["synthetic", "eve", "tabular", "mnist"],
    "--rows": [30, 3, 0, -1, "x", 10**13],
    "--optimizer": ["gd", "lbfgs", "adadelta", "cgls", "closed-form", "scipy-lsqr", "newton"],
    "--step": ["1/L", "fixed", "diag", "huge"],
    "--lr": [0.1, 0, -1, "nan", "x"],
    "--tol": ["1e-6", "off", "0", "-1", "abc"],
    "--init": ["zeros", "normal", "ones"],
    "--dtype": ["float64", "float32", "int8"],
    "--opt-param": ["history=3", "history=0", "momentum=x", "nope=1", "history"],
    "--data-param": ["kappa=100", "kappa='1e4'", "kappa=True", "d=2", "noise=-1", "seed=-2"],
    "--formulation": ["data", "gram", "sparse"],
    "--seed": [0, 7, -1, 2**63, 10**23],
    "--history": [3, 0, 2**62, 10**9],
}


@given(data=st.data())
@settings(SETTINGS, max_examples=EXAMPLES["regress"])
def generated_regress(data, counts):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        args = ["regress", "--max-iter", data.draw(likely_first([200, 0, "x", 10**23]))]
        for flag in data.draw(st.lists(st.sampled_from(sorted(OPTIONS)), max_size=3,
                                       unique=True)):
            args += [flag, data.draw(likely_first(OPTIONS[flag]))]
        if data.draw(st.booleans()):  # the user's file
            path, features, labels = data.draw(data_file(tmp))
            args += ["--dataset", "tabular", "--path", path]
            args += ["--features", *features] if features else []
            args += ["--labels", *labels] if labels else []
        elif "--rows" not in args:
            args += ["--rows", 40]
        if data.draw(st.integers(0, 3)) == 0:  # TensorFlow, always with an option refused before it
            args += ["--backend", "tensorflow", *data.draw(st.sampled_from(
                [["--feed", "bogus"], ["--device", "gpu"], ["--optimizer", "closed-form"],
                 ["--dtype", "float16"], ["--device", "tpu"]]))]
        out = tmp / "out"
        target = data.draw(likely_first(["new", "folder", "under a file", "trace is a folder"]))
        if target == "folder":
            out.mkdir()
            args += ["--out", out]
        elif target == "under a file":
            out.write_text("x")
            args += ["--out", out / "r.parquet"]
        else:
            if target == "trace is a folder":
                (out / "r.trace.parquet").mkdir(parents=True)
            args += ["--out", out / "r.parquet"]
        code, _ = run_cli(args, out)
        counts["regress", code] += 1
        if code == 0:
            assert (out / "r.parquet").is_file() and (out / "r.trace.parquet").is_file()


# ---- study configs ---------------------------------------------------------------------------

toml_values = st.sampled_from(['1', '0', '-1', '2.5', '"1e4"', 'true', '[]', '[0, 1]', '"x"',
                               '1e300', 'nan', '{}', '"off"', '[1, "a"]',
                               '99999999999999999999999', '-9223372036854775809',
                               '9223372036854775807'])
exclusions = st.tuples(st.sampled_from(["optimizer", "step", "seed", "colour"]),
                       st.sampled_from(['"gd"', '"lbgfs"', '"1/L"', '0', '5', '["gd", "lbgfs"]']))
SECTIONS = {
    "top": ["seeds", "repeats", "init", "run_timeout", "memory_budget_gb", "name", "speed"],
    "stopping": ["tol", "max_iter", "patience", "rel_tol", "exact_repeat", "time_budget"],
    "datasets": ["n", "d", "kappa", "noise", "seed", "rows"],
    "optimizers": ["learning_rate", "step", "history", "rho", "epsilon"],
    "backends": ["dtype", "formulation", "feed", "xla", "device"],
}


@given(data=st.data())
@settings(SETTINGS, max_examples=EXAMPLES["config"])
def generated_config(data, counts):
    top, stopping = [], []
    dataset = {"name": '"synthetic"', "n": "50"}
    optimizer = {"name": data.draw(st.sampled_from(['"gd"', '"lbfgs"', '"adadelta"', '"x"']))}
    backend = {"name": data.draw(st.sampled_from(['"numpy"', '"numpy"', '"tensorflow"']))}
    tables = {"datasets": dataset, "optimizers": optimizer, "backends": backend}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if data.draw(st.integers(0, 2)) == 0:
            path, features, labels = data.draw(data_file(tmp))
            dataset.clear()
            dataset.update(name='"tabular"', path=f'"{path}"', features=repr(features),
                           labels=repr(labels))
        for _ in range(data.draw(likely_first([0, 1, 2, 3]))):
            section = data.draw(st.sampled_from(sorted(SECTIONS)))
            line = (data.draw(st.sampled_from(SECTIONS[section])), data.draw(toml_values))
            {"top": top, "stopping": stopping}.get(section, []).append(line)
            if section in tables:
                tables[section][line[0]] = line[1]
        text = "".join(f"{k} = {v}\n" for k, v in top)
        text += "[stopping]\n" + "".join(f"{k} = {v}\n" for k, v in stopping)
        for section, table in tables.items():
            text += f"[[{section}]]\n" + "".join(f"{k} = {v}\n" for k, v in table.items())
        if data.draw(st.integers(0, 3)) == 0:  # typos in an exclusion's value, among others
            text += "[[exclude]]\n{} = {}\n".format(*data.draw(exclusions))
        if data.draw(st.integers(0, 9)) == 0:
            text = text[: data.draw(st.integers(0, len(text)))]  # cut short
        config = tmp / "study.toml"
        config.write_text(text)
        only = data.draw(st.sampled_from([[], ["--only", "optimizer=gd"], ["--only", "seed=1",
                                          "--only", "dtype=float64"], ["--only", "colour=red"]]))
        code, _ = run_cli(["run", config, "--out", tmp / "out", "--dry-run", *only], tmp / "out")
        counts["config", code] += 1
        assert not (tmp / "out").exists()  # a dry run writes nothing


# ---- results tables --------------------------------------------------------------------------

@given(data=st.data())
@settings(SETTINGS, max_examples=EXAMPLES["results"])
def generated_results(data, counts):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "results"
        folder.mkdir()
        required = ["run_id", "status", "dataset", "dataset_params", "optimizer",
                    "hyperparameters", "backend", "dtype", "seed", "kind"]
        columns = data.draw(st.lists(st.sampled_from(
            [*required, "seconds", "iterations", "code_fingerprint", "env_fingerprint"]),
            unique=True))
        if data.draw(st.booleans()):  # the columns a reader needs, as text
            columns = [*required, *(c for c in columns if c not in required)]
        n = data.draw(st.integers(0, 3))
        words = {"status": ["converged", "error", "max_iter", "x"], "kind": ["regression"],
                 "seed": [0, 1], "dataset_params": ["{}", '{"n": 50}'],
                 "hyperparameters": ["{}"]}
        frame = pd.DataFrame({c: data.draw(st.lists(
            st.sampled_from(words.get(c, ["a", "gd", "numpy"])) if c in required else cell,
            min_size=n, max_size=n)) for c in columns})
        path = folder / "runs.parquet"
        try:
            frame.astype(str).to_parquet(path) if data.draw(st.booleans()) else \
                frame.to_parquet(path)
        except Exception:  # noqa: BLE001 -- a mixed column pyarrow refuses: write junk instead
            path.write_bytes(b"PAR1junk")
        if data.draw(st.integers(0, 3)) == 0:
            path.write_bytes(path.read_bytes()[: data.draw(st.integers(0, 300))])
        out = Path(tmp) / "out"
        code, _ = run_cli(["summarize", folder, "--csv", out / "s.csv"], out)
        counts["results", code] += 1


@pytest.mark.slow
def test_generated_inputs_end_cleanly():
    counts = Counter()
    generated_regress(counts=counts)
    generated_config(counts=counts)
    generated_results(counts=counts)
    total = sum(counts.values())
    print(f"generated cases: {total}; by command and exit status: {dict(sorted(counts.items()))}")
    assert total >= 300
    assert counts["regress", 0] and counts["regress", 2] and counts["config", 2]


# ---- signals at generated moments (real processes) -------------------------------------------

SIGNALS = st.sampled_from([signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
# Each example is a process (seconds): one generated moment, and explicit ones spread over the
# command's life (a derandomized draw favours the first instants).
SIGNAL_SETTINGS = settings(SETTINGS, max_examples=1)
PROBE_SWEEP = 'kind = "probe"\nactions = ["work"]\nseeds = [0, 1, 2, 3, 4]\nseconds = 0.3\n'


@pytest.mark.slow
@given(signum=SIGNALS, delay=st.floats(0, 2.5))
@example(signum=signal.SIGHUP, delay=0.8)
@example(signum=signal.SIGTERM, delay=2.3)
@SIGNAL_SETTINGS
def test_a_signal_at_any_moment_of_a_sweep_loses_nothing(signum, delay):
    with tempfile.TemporaryDirectory() as tmp:
        config, out = Path(tmp) / "p.toml", Path(tmp) / "res"
        config.write_text(PROBE_SWEEP)
        args = ("run", config, "--out", out, "--quiet")
        command = Command(*args)
        # then a run, between runs, the tables' assembly, or the end
        code, printed, err = command.interrupt(
            lambda: any((out / "runs").glob("*.parquet")), delay, signum)
        if interrupted_cleanly(code, printed, err, signum, "this invocation:"):
            assert "finished runs are kept" in err
        if (out / "runs.parquet").exists():  # whatever table there is reads back whole
            assert pd.read_parquet(out / "runs.parquet")["run_id"].is_unique
        again = Command(*args)  # the same command resumes: every run, none twice
        assert again.finish()[0] == 0
        assert len(pd.read_parquet(out / "runs.parquet")) == 5


@pytest.mark.slow
@given(signum=SIGNALS, delay=st.floats(0, 6))
@example(signum=signal.SIGTERM, delay=2.5)
@example(signum=signal.SIGHUP, delay=5.0)
@SIGNAL_SETTINGS
def test_a_signal_at_any_moment_of_a_bench_never_replaces_its_outputs(signum, delay):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "bench"
        kept = sentinels(out, ["bench.txt", "iterations.parquet", "target.parquet"])
        command = Command("bench", "--sections", "iterations", "target", "--out", out,
                          setup=tiny_bench(tensorflow=True))
        # then NumPy runs, TensorFlow's import, fused loops, or the end
        code, printed, err = command.interrupt(lambda: command.printed("[iterations 1/"),
                                               delay, signum)
        if interrupted_cleanly(code, printed, err, signum, "wrote", progress=True):
            assert "nothing was written" in err and unchanged(kept)


@pytest.mark.slow
@given(signum=SIGNALS, delay=st.floats(0, 4))
@example(signum=signal.SIGTERM, delay=1.0)
@example(signum=signal.SIGHUP, delay=3.5)
@SIGNAL_SETTINGS
def test_a_signal_at_any_moment_of_a_compiled_run_ends_it_at_once(signum, delay):
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        kept = sentinels(out, ["r.parquet", "r.trace.parquet"])
        command = Command("regress", "--rows", 20000, "--backend", "tensorflow", "--feed",
                          "fused", "--optimizer", "gd", "--step", "fixed", "--lr", "1e-12",
                          "--tol", "off", "--max-iter", 2_000_000_000, "--time-budget", 3,
                          "--out", out / "r.parquet")
        # then tracing, the loop, or after its 3 s budget
        code, printed, err = command.interrupt(lambda: command.printed(COMPILED_LOOP), delay,
                                               signum)
        if interrupted_cleanly(code, printed, err, signum, "wrote"):
            assert "nothing was written" in err and unchanged(kept)
