"""The CNN feed-mode study at small N: every mode against the NumPy/SciPy reference, the fused
convolution, what the GraphDef embeds, what is recorded, bad parameters, and resume.

No test asserts a timing value: timings are only checked to be recorded, apart and positive.
"""

import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from study.__main__ import main as cli  # noqa: E402
from study.feedmode import config  # noqa: E402
from study.feedmode import model as fm  # noqa: E402
from study.feedmode.command import visible_gpus  # noqa: E402
from study.feedmode.spec import Spec  # noqa: E402
from study.sweep.grid import parse_study, read_config  # noqa: E402

N = 24
CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.fixture(scope="module")
def worker():
    from study.feedmode import measure

    return measure


# --- the arithmetic, NumPy only --------------------------------------------------------------

def test_reference_equals_a_direct_loop():
    x, k = fm.make_input(2, "float64", seed=3), fm.make_kernel("float64", seed=3)
    conv = np.zeros((2, 30, 30, 6))
    for i in range(30):
        for j in range(30):
            conv[:, i, j, :] = np.tensordot(x[:, i:i + 3, j:j + 3, 0], k[:, :, 0, :], axes=2)
    pooled = np.zeros((2, 15, 15, 6))
    for p in range(15):
        for q in range(15):
            pooled[:, p, q, :] = conv[:, 2 * p:2 * p + 2, 2 * q:2 * q + 2, :].mean(axis=(1, 2))
    # 9-term sums of |x| < 1 times |k| ~ 0.3, then a 4-term mean, in two orders: a few 13 eps
    # of sum |x||k| < 3.7, absolute where a sum cancels
    np.testing.assert_allclose(fm.reference(x, k), np.maximum(pooled, 0), rtol=1e-13, atol=1e-13)


def test_fused_kernel_equals_conv_then_pool_in_numpy():
    x, k = fm.make_input(5, "float64"), fm.make_kernel("float64")
    k4 = fm.fused_kernel(k)
    assert k4.shape == (4, 4, 1, 6)
    # 16 entries, each a sum of up to 4 of k's over 4: ~(16 + 9) eps of sum |k| / |sum k| (~2)
    np.testing.assert_allclose(k4.sum(axis=(0, 1)), k.sum(axis=(0, 1)), rtol=1e-14)
    np.testing.assert_allclose(fm.fused_reference(x, k4), fm.reference(x, k),
                               rtol=1e-12, atol=1e-12)


def test_input_is_seeded_and_its_rows_do_not_depend_on_n():
    np.testing.assert_array_equal(fm.make_input(3, "float64"), fm.make_input(40, "float64")[:3])
    assert not np.array_equal(fm.make_input(3, "float64", seed=1), fm.make_input(3, "float64"))
    assert fm.make_input(3, "float32").dtype == np.float32
    assert fm.make_input(3, "float64").shape == (3, 32, 32, 1)


# --- every mode in TensorFlow, in this process -------------------------------------------------

@pytest.mark.parametrize("dtype", fm.DTYPES)
@pytest.mark.parametrize("mode", list(fm.MODES))
def test_every_mode_agrees_with_the_reference(worker, mode, dtype):
    spec = Spec(mode=mode, dtype=dtype, n=N, calls=2, check_n=N)
    record = worker.measure_record(spec)
    # TOLERANCE: sums of 9 or 16 terms |x||k| (sum |k| < 3.7) in the mode's dtype: a few
    # 16 eps 3.7, 1.3e-14 in float64 and 7e-6 in float32 (1e-12 and 1e-5)
    tol = fm.TOLERANCE[dtype]
    assert record["status"] == "ok", record.get("message")
    assert record["check_ok"] and record["check_max_abs_error"] <= tol
    assert record["output_shape"] == [N, 15, 15, 6]
    expected = fm.reference(fm.make_input(N, dtype), fm.make_kernel(dtype))
    # each output within tol (checked above), so their sum within size x tol (the old rel=tol
    # held only while roundings cancel: the mean output is 0.22)
    assert record["checksum"] == pytest.approx(fm.checksum(expected), abs=tol * expected.size)
    assert record["checksum_stable"]
    assert "CPU" in record["device_name"]


@pytest.mark.parametrize("dtype", fm.DTYPES)
@pytest.mark.parametrize("grappler", [g for g in fm.GRAPPLER if g != "default"])
@pytest.mark.parametrize("mode", config.tf1_modes())
def test_graph_optimisation_variants_agree_with_the_reference(worker, mode, grappler, dtype):
    error, ok = worker.check(Spec(mode=mode, dtype=dtype, n=N, grappler=grappler, check_n=N))
    assert ok and error <= fm.TOLERANCE[dtype]


def test_session_config_of_the_variants(worker):
    default, no_cf, no_folding, off = (worker.session_config(g) for g in fm.GRAPPLER)
    assert default == type(default)()
    assert no_cf.graph_options.rewrite_options.constant_folding == 2   # OFF
    assert no_cf.graph_options.optimizer_options.opt_level == 0        # L1 (the default)
    assert no_folding.graph_options.rewrite_options.constant_folding == 2
    options = no_folding.graph_options.optimizer_options
    assert options.opt_level == -1 and not options.do_constant_folding
    assert options.do_common_subexpression_elimination and options.do_function_inlining
    assert not no_folding.graph_options.rewrite_options.disable_meta_optimizer
    assert off.graph_options.rewrite_options.disable_meta_optimizer
    assert off.graph_options.optimizer_options.opt_level == -1         # L0


@pytest.mark.parametrize("dtype", fm.DTYPES)
def test_fused_single_convolution_equals_conv_pool_composition_in_tensorflow(worker, dtype):
    x, k = fm.make_input(N, dtype), fm.make_kernel(dtype)
    composed = worker.network("conv-pool", x, k).numpy()
    fused = worker.network("fused-conv", x, fm.fused_kernel(k)).numpy()
    tol = fm.TOLERANCE[dtype]
    np.testing.assert_allclose(fused, composed, rtol=tol, atol=tol)


def test_graphdef_of_constant_modes_grows_with_n_and_the_placeholders_does_not(worker):
    small, large = 10, 60
    sizes = {(mode, n): worker.measure_record(Spec(mode=mode, dtype="float64", n=n, calls=1,
                                               check_n=2))["graphdef_bytes"]
             for mode in ("numpy", "constant", "function-numpy", "placeholder", "variable",
                          "function-arg", "function-const")
             for n in (small, large)}
    embedded = (large - small) * 32 * 32 * 8   # the extra input rows, as float64 bytes
    for mode in ("numpy", "constant", "function-numpy"):
        assert sizes[mode, large] - sizes[mode, small] >= embedded, mode
    for mode in ("placeholder", "variable", "function-arg", "function-const"):
        assert sizes[mode, large] == sizes[mode, small] < 10_000, mode


def test_first_call_and_steady_calls_are_recorded_apart(worker):
    record = worker.measure_record(Spec(mode="constant", dtype="float32", n=N, calls=4, check_n=4))
    assert len(record["steady_seconds"]) == 4
    for key in ("build_seconds", "session_seconds", "first_call_seconds",
                "steady_median_seconds", "total_calls_seconds", "total_seconds"):
        assert record[key] > 0, key
    assert record["steady_median_seconds"] == float(np.median(record["steady_seconds"]))
    assert record["total_calls_seconds"] == pytest.approx(
        record["first_call_seconds"] + sum(record["steady_seconds"]))
    assert record["phase"] == "done"


def test_a_failing_mode_raises_and_leaves_its_phase(worker):
    bad = Spec(mode="function-arg", dtype="float64", n=N, grappler="off")  # not via the CLI
    record = {}
    with pytest.raises(ValueError, match="TF1 modes only"):
        worker.measure_record(bad, record)
    assert record["phase"] == "setup"


# --- the study through the CLI: fresh processes, tables, resume --------------------------------

@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("feedmode") / "results"
    argv = ["feedmode", "--n", "30", "--modes", "constant", "fused", "--grappler",
            "default", "off", "--dtype", "float32", "--calls", "3", "--out", str(out), "--quiet"]
    assert cli(argv) == 0
    return argv, out


def test_study_writes_runs_and_calls_tables(study_run):
    _, out = study_run
    runs = pd.read_parquet(out / "runs.parquet")
    calls = pd.read_parquet(out / "calls.parquet")
    assert list(zip(runs["mode"], runs["grappler"], strict=True)) == [
        ("constant", "default"), ("constant", "off"), ("fused", "default")]
    assert (runs["status"] == "ok").all() and runs["check_ok"].all()
    assert {"env_tensorflow", "env_cpu", "env_git_commit"} <= set(runs.columns)
    assert runs["first_call_seconds"].notna().all() and runs["steady_median_seconds"].notna().all()
    assert runs["graphdef_bytes"].notna().all() and runs["peak_memory_mb"].gt(0).all()
    for run_id, group in calls.groupby("run_id"):
        assert list(group["kind"]) == ["first", "steady", "steady", "steady"]
        row = runs.set_index("run_id").loc[run_id]
        assert group["seconds"].iloc[0] == row["first_call_seconds"]
        assert np.median(group["seconds"].iloc[1:]) == row["steady_median_seconds"]
    for run_id in runs["run_id"]:
        assert (out / "runs" / f"{run_id}.parquet").exists()
        assert (out / "logs" / f"{run_id}.log").exists()
    assert not list((out / "runs").glob(".*.tmp*"))   # no partial or temporary files left
    assert not any((out / "runs" / ".pending").iterdir())


def test_rerun_skips_finished_runs_and_resumes_a_missing_one(study_run, capsys):
    argv, out = study_run
    before = {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.parquet")}
    capsys.readouterr()
    assert cli(argv) == 0
    assert "3 runs, 3 done, 0 to run" in capsys.readouterr().out
    assert {p.name: p.stat().st_mtime_ns for p in (out / "runs").glob("*.parquet")} == before

    runs = pd.read_parquet(out / "runs.parquet")
    lost = runs["run_id"].iloc[1]      # as if the study had been interrupted during this run
    (out / "runs" / f"{lost}.parquet").unlink()
    assert cli(argv) == 0
    assert "3 runs, 2 done, 1 to run" in capsys.readouterr().out
    again = pd.read_parquet(out / "runs.parquet")
    assert sorted(again["run_id"]) == sorted(runs["run_id"])
    changed = [p.name for p in (out / "runs").glob("*.parquet") if before.get(p.name) !=
               p.stat().st_mtime_ns]
    assert sorted(changed) == sorted([f"{lost}.parquet", f"{lost}.calls.parquet"])


def test_a_run_over_its_budget_is_recorded_and_the_study_goes_on(tmp_path, capsys):
    out = tmp_path / "r"
    assert cli(["feedmode", "--n", "20000", "--modes", "placeholder", "fused", "--run-timeout",
                "0.5", "--out", str(out), "--quiet"]) == 0
    runs = pd.read_parquet(out / "runs.parquet")
    assert list(runs["status"]) == ["timeout", "timeout"]
    assert runs["message"].str.contains("time budget of 0.5 s").all()
    assert runs["message"].str.contains("during ").all()  # the phase it was killed in
    assert cli(["feedmode", "--n", "30000", "--modes", "variable", "--memory-budget-gb", "0.05",
                "--out", str(tmp_path / "m"), "--quiet"]) == 0
    runs = pd.read_parquet(tmp_path / "m" / "runs.parquet")
    assert list(runs["status"]) == ["oom"] and "memory budget" in runs["message"].iloc[0]


# --- bad parameters: one line on stderr, exit 2, nothing written ------------------------------

@pytest.mark.parametrize("flags, words", [
    (["--n", "0"], ["--n", "positive"]),
    (["--n", "-5"], ["--n", "positive"]),
    (["--modes", "constant", "telepathy"], ["telepathy", "allowed", "placeholder"]),
    (["--dtype", "float16"], ["float16", "allowed", "float32"]),
    (["--device", "tpu"], ["tpu", "cpu, gpu"]),
    (["--grappler", "aggressive"], ["aggressive", "no-constant-folding"]),
    (["--calls", "0"], ["--calls", "positive"]),
    (["--run-timeout", "0"], ["--run-timeout", "positive"]),
    (["--modes", "eager-numpy", "--grappler", "off"], ["TF1 modes only"]),
])
def test_bad_parameters_give_one_line_and_exit_2(tmp_path, capsys, flags, words):
    out = tmp_path / "never"
    assert cli(["feedmode", *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("convergence-study feedmode: error:")
    for word in words:
        assert word in err
    assert not out.exists()


def test_gpu_without_a_gpu_is_refused(tmp_path, capsys):
    if visible_gpus():
        pytest.skip("a GPU is visible here")
    out = tmp_path / "never"
    assert cli(["feedmode", "--n", "10", "--device", "gpu", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no GPU" in err
    assert not out.exists()


def test_non_integer_n_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        cli(["feedmode", "--n", "many"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("text, words", [
    ('calls = 3\nspeed = "fast"\n', ["speed", "allowed", "run_timeout"]),
    ('[[grid]]\nmodes = ["constant"]\nsize = 3\n', ["size", "[[grid]] 1", "allowed", "dtypes"]),
    ('[[grid]]\nn = [100, 0]\n', ["n", "positive"]),
    ('[[grid]]\nn = 100\ndtypes = ["float64", "int8"]\n', ["int8", "allowed"]),
    ("calls = [\n", ["invalid TOML"]),
    ('[[grid]]\nn = 100\nrepeats = 0\n', ["[[grid]] 1", "repeats", "0"]),
    ('[[grid]]\nn = 100\nrepeats = true\n', ["[[grid]] 1", "repeats", "True"]),
])
def test_bad_config_names_file_and_key(tmp_path, capsys, text, words):
    config = tmp_path / "study.toml"
    config.write_text(text)
    out = tmp_path / "never"
    assert cli(["feedmode", "--config", str(config), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(config) in err
    for word in words:
        assert word in err
    assert not out.exists()


def test_missing_config_and_out_that_is_a_file(tmp_path, capsys):
    assert cli(["feedmode", "--config", str(tmp_path / "nope.toml")]) == 2
    assert "does not exist" in capsys.readouterr().err
    a_file = tmp_path / "file"
    a_file.write_text("x")
    assert cli(["feedmode", "--n", "10", "--out", str(a_file)]) == 2
    assert "is a file" in capsys.readouterr().err


# --- the shipped configs -----------------------------------------------------------------------

def test_shipped_configs_expand_to_their_grids(tmp_path):
    default = parse_study(read_config(CONFIGS / "feedmode.toml"), "feedmode.toml")
    specs = default.specs
    assert default.name == "feedmode" and len(specs) == len({s.run_id for s in specs})
    assert {(s.mode, s.dtype) for s in specs if s.n == 2000 and s.grappler == "default"} == {
        (m, d) for m in fm.MODES for d in fm.DTYPES}
    assert {(s.mode, s.grappler) for s in specs if s.grappler != "default"} == {
        (m, g) for m in ("numpy", "constant") for g in fm.GRAPPLER if g != "default"}
    assert {s.n for s in specs if s.mode == "placeholder"} == {250, 1000, 2000, 4000}
    assert max(s.n for s in specs) <= 4000
    # The mode table has three repeats (a CI for every mode ratio); the rest one.
    repeats = {}
    for s in specs:
        repeats.setdefault((s.mode, s.dtype, s.n, s.grappler), set()).add(s.repeat)
    assert repeats[("constant", "float64", 2000, "default")] == {0, 1, 2}
    assert repeats[("constant", "float64", 250, "default")] == {0}
    full = parse_study(read_config(CONFIGS / "feedmode-full.toml"), "feedmode-full.toml")
    assert full.name == "feedmode-full"
    # the original question's dtype at its size, every mode (float32 is in the default study)
    assert {(s.mode, s.dtype) for s in full.specs if s.n == 60000} == {
        (m, "float64") for m in fm.MODES}


def test_command_line_flags_replace_config_keys(tmp_path):
    raw = config.with_flags(read_config(CONFIGS / "feedmode.toml"),
                            {"n": [7], "dtypes": ["float32"]})
    study = parse_study(raw, "feedmode.toml")
    assert {s.n for s in study.specs} == {7} and {s.dtype for s in study.specs} == {"float32"}


def test_run_id_is_a_stable_hash_of_the_spec():
    a = Spec(mode="constant", dtype="float64", n=100)
    assert a.run_id == Spec.from_json(a.to_json()).run_id
    assert a.run_id != Spec(mode="constant", dtype="float64", n=101).run_id
    assert a.run_id != Spec(mode="constant", dtype="float64", n=100, grappler="off").run_id
