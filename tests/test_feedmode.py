"""The CNN feed-mode study at small N: every mode of every framework against the NumPy/SciPy
reference, the fused convolution, what the GraphDef and JAX's program embed, which framework runs
which mode (and imports no other), what is recorded, bad parameters, an absent framework, and
resume.

No test asserts a timing value: timings are only checked to be recorded, apart and positive.
"""

import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from study.__main__ import main as cli  # noqa: E402
from study.feedmode import config, plugin  # noqa: E402
from study.feedmode import model as fm  # noqa: E402
from study.feedmode.spec import Spec  # noqa: E402
from study.frameworks.registry import Framework  # noqa: E402
from study.sweep.executors import gpu_visible  # noqa: E402
from study.sweep.grid import parse_study, read_config  # noqa: E402

N = 24
ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"


@pytest.fixture(scope="module")
def worker():
    from study.feedmode import measure

    return measure


@pytest.fixture(scope="module")
def tf_worker():
    from study.frameworks.tensorflow import feedmode as measure_tensorflow

    return measure_tensorflow


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


# --- every mode of every framework, in this process --------------------------------------------

@pytest.mark.parametrize("dtype", fm.DTYPES)
@pytest.mark.parametrize("mode", config.modes_on("cpu"))
def test_every_mode_agrees_with_the_reference(worker, mode, dtype):
    """float64 to 1e-12: JAX's float64 modes run with x64 on, or they could not get there.
    Every mode whose framework runs on the CPU (CuPy's: tests/test_cupy.py)."""
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
    assert "cpu" in record["device_name"].lower()


@pytest.mark.parametrize("dtype", fm.DTYPES)
@pytest.mark.parametrize("grappler", [g for g in fm.GRAPPLER if g != "default"])
@pytest.mark.parametrize("mode", config.tf1_modes())
def test_graph_optimisation_variants_agree_with_the_reference(worker, mode, grappler, dtype):
    record = worker.measure_record(Spec(mode=mode, dtype=dtype, n=N, grappler=grappler,
                                        calls=1, check_n=N))
    assert record["check_ok"] and record["check_max_abs_error"] <= fm.TOLERANCE[dtype]


def test_a_wrong_output_is_a_mismatch(worker):
    spec = Spec(mode="placeholder", dtype="float64", n=N, check_n=4)
    head = fm.reference(fm.make_input(4, "float64"), fm.make_kernel("float64"))
    assert worker.check(spec, head) == (0.0, True)
    head[1, 2, 3, 4] += 1e-9
    error, ok = worker.check(spec, head)
    assert not ok and error == pytest.approx(1e-9, rel=1e-3)
    assert worker.check(spec, head[:3]) == (float("inf"), False)


def test_session_config_of_the_variants(tf_worker):
    default, no_cf, no_folding, off = (tf_worker.session_config(g) for g in fm.GRAPPLER)
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
def test_fused_single_convolution_equals_conv_pool_composition_in_tensorflow(tf_worker, dtype):
    x, k = fm.make_input(N, dtype), fm.make_kernel(dtype)
    composed = tf_worker.network("conv-pool", x, k).numpy()
    fused = tf_worker.network("fused-conv", x, fm.fused_kernel(k)).numpy()
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


def test_jax_embeds_a_closed_over_array_in_its_program_and_not_an_argument(worker):
    """jax-constant's StableHLO holds the input (its size grows by the extra rows' bytes), and at
    small N XLA folds the whole network into the executable's result; the modes that pass the
    array as an argument compile one program whatever N."""
    small, large = 10, 40
    records = {(mode, n): worker.measure_record(Spec(mode=mode, dtype="float64", n=n, calls=1,
                                                     check_n=2))
               for mode in fm.modes_of("jax") for n in (small, large)}
    embedded = (large - small) * 32 * 32 * 8   # the extra input rows, as float64 bytes
    folded = (large - small) * fm.OUT * fm.OUT * fm.CHANNELS * 8   # the extra output rows
    grown = {mode: {key: records[mode, large][key] - records[mode, small][key]
                    for key in ("program_bytes", "executable_bytes")}
             for mode in fm.modes_of("jax")}
    assert embedded <= grown["jax-constant"]["program_bytes"] < embedded + 1000
    assert folded <= grown["jax-constant"]["executable_bytes"] < folded + 1000
    for mode in ("jax-numpy", "jax-resident"):
        assert all(abs(change) < 100 for change in grown[mode].values()), mode  # shape digits
        assert records[mode, large]["program_bytes"] < 10_000
    for (mode, _), record in records.items():
        assert record["output_folded"] == (mode == "jax-constant")
        assert 0 < record["compile_seconds"] <= record["first_call_seconds"]
        assert record.get("graphdef_bytes") is None


def test_output_folded_reads_the_entry_computations_result():
    from study.frameworks.jax.feedmode import output_folded

    head = "HloModule m\n\n%fused (p: f64[2]) -> f64[2] {\n  ROOT %c = f64[2] constant({1, 2})\n}\n"
    assert output_folded(head + "\nENTRY %main () -> f64[2] {\n  %constant.3 = f64[2] "
                                "constant({...})\n  ROOT %copy = f64[2]{0} copy(%constant.3)\n}")
    assert output_folded(head + "\nENTRY %main () -> f64[2] {\n  ROOT %c = f64[2]{0} "
                                "constant({1, 2})\n}")
    assert not output_folded(head + "\nENTRY %main (x: f64[2]) -> f64[2] {\n  %x = f64[2] "
                                    "parameter(0)\n  ROOT %f = f64[2] fusion(%x)\n}")


def test_torch_compile_records_what_it_wrote_and_leaves_no_cache(worker, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "kept"))
    for mode in ("torch-compile-arg", "torch-compile-captured"):
        record = worker.measure_record(Spec(mode=mode, dtype="float32", n=N, calls=1, check_n=N))
        assert record["check_ok"] and record["executable_bytes"] > 0, mode
        assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "kept")
    assert not (tmp_path / "kept").exists()   # the fresh directories were used instead
    eager = worker.measure_record(Spec(mode="torch-resident", dtype="float32", n=N, calls=1))
    assert eager["executable_bytes"] is None and eager["data_seconds"] > 0


# --- which framework runs which mode ----------------------------------------------------------

def test_each_mode_names_its_framework_and_its_warm_process_imports_only_that():
    expected = {mode: mode.split("-")[0] if mode.startswith(("jax-", "torch-", "cupy-"))
                else "tensorflow" for mode in fm.MODES}
    assert {mode: plugin.framework(Spec(mode=mode, dtype="float64", n=1))
            for mode in fm.MODES} == expected
    for name in ("tensorflow", "jax", "torch", "cupy"):
        module = f"study.frameworks.{name}.feedmode"
        assert plugin.preload(name) == (module,)
        spec = Spec(mode=fm.modes_of(name)[0], dtype="float64", n=1)
        files = plugin.code_files(spec)
        assert module.replace(".", "/") + ".py" in files
        assert sum(f.endswith("/feedmode.py") and f.startswith("study/frameworks/")
                   for f in files) == 1
        assert "study/feedmode/measure.py" in files


@pytest.mark.slow
def test_a_jax_or_torch_run_imports_no_tensorflow_and_x64_waits_for_the_run():
    code = (
        "import sys, jax\n"
        "from study.feedmode import measure, plugin\n"
        "import study.frameworks.jax.feedmode, study.frameworks.torch.feedmode\n"
        "from study.feedmode.spec import Spec\n"
        "assert not jax.config.jax_enable_x64, 'x64 switched on at import'\n"
        "for mode in ('jax-numpy', 'torch-numpy'):\n"
        "    r = measure.measure_record(Spec(mode=mode, dtype='float64', n=3, calls=1))\n"
        "    assert r['check_ok'], r\n"
        "assert jax.config.jax_enable_x64\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


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


@pytest.mark.parametrize("mode", ["placeholder", "constant", "function-arg", "eager-tensor",
                                  "jax-resident", "jax-numpy", "torch-resident",
                                  "torch-numpy"])
def test_each_call_is_split_into_compute_and_fetch_that_add_up(worker, mode):
    """The bookkeeping, not the times: a call's seconds are its compute plus its fetch (defined
    so, so this cannot be flaky), every part recorded and non-negative, the medians those of the
    parts, and the side table's rows the same split."""
    pytest.importorskip(fm.MODES[mode].framework)
    spec = Spec(mode=mode, dtype="float32", n=N, calls=3, check_n=4)
    record = worker.measure_record(spec)
    assert record["check_ok"], record.get("message")
    for part in ("first_compute_seconds", "first_fetch_seconds",
                 "steady_compute_median_seconds", "steady_fetch_median_seconds"):
        assert record[part] >= 0, part
    assert record["first_compute_seconds"] > 0
    assert record["first_call_seconds"] == pytest.approx(
        record["first_compute_seconds"] + record["first_fetch_seconds"], rel=1e-12)
    computes, fetches = record["steady_compute"], record["steady_fetch"]
    assert len(computes) == len(fetches) == len(record["steady_seconds"]) == 3
    for call, compute, fetch in zip(record["steady_seconds"], computes, fetches, strict=True):
        assert compute > 0 and fetch >= 0 and call == pytest.approx(compute + fetch, rel=1e-12)
    assert record["steady_compute_median_seconds"] == float(np.median(computes))
    assert record["steady_fetch_median_seconds"] == float(np.median(fetches))


def test_the_split_keeps_the_call_whole_and_calls_the_parts_in_order(worker):
    """Prepared.call (what the bench times) is compute then fetch, and an output is released
    after its fetch, outside both clocks."""
    seen = []
    prepared = worker.Prepared(compute=lambda: seen.append("compute") or np.ones(2),
                               fetch=lambda out: seen.append("fetch") or out * 2,
                               sizes=dict, release=lambda out: seen.append("release"))
    assert list(prepared.call()) == [2, 2] and seen == ["compute", "fetch", "release"]
    compute, fetch, y = prepared.timed_call()
    assert compute >= 0 and fetch >= 0 and list(y) == [2, 2]
    assert seen[3:] == ["compute", "fetch", "release"]


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
        # every call split: compute (output left on the device) + fetch (to the host) = call
        assert (group["compute_seconds"] > 0).all() and (group["fetch_seconds"] >= 0).all()
        np.testing.assert_allclose(group["compute_seconds"] + group["fetch_seconds"],
                                   group["seconds"], rtol=1e-12)
        assert group["compute_seconds"].iloc[0] == row["first_compute_seconds"]
        assert np.median(group["compute_seconds"].iloc[1:]) == \
            row["steady_compute_median_seconds"]
        assert np.median(group["fetch_seconds"].iloc[1:]) == row["steady_fetch_median_seconds"]
    for run_id in runs["run_id"]:
        assert (out / "runs" / f"{run_id}.parquet").exists()
        assert (out / "logs" / f"{run_id}.log").exists()
    assert not list((out / "runs").glob(".*.tmp*"))   # no partial or temporary files left
    assert not any((out / "runs" / ".pending").iterdir())


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.parametrize("mode, title", [("fused", "TensorFlow"), ("jax-resident", "JAX"),
                                         ("torch-resident", "PyTorch")])
@pytest.mark.slow
def test_gpu_without_a_gpu_is_refused_naming_the_framework(tmp_path, capsys, mode, title):
    if gpu_visible(plugin.framework(Spec(mode=mode, dtype="float64", n=1))):
        pytest.skip("a GPU is visible here")
    out = tmp_path / "never"
    assert cli(["feedmode", "--n", "10", "--modes", mode, "--device", "gpu",
                "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{title} sees no GPU" in err
    assert not out.exists()


@pytest.mark.parametrize("absent, extra", [("jax", "convergence-study[jax]"),
                                           ("torch", "convergence-study[torch]")])
def test_a_mode_whose_framework_is_absent_is_refused_naming_the_extra(tmp_path, capsys,
                                                                     monkeypatch, absent, extra):
    installed = Framework.installed
    monkeypatch.setattr(Framework, "installed",
                        lambda self: self.name != absent and installed(self))
    config = tmp_path / "study.toml"
    config.write_text('kind = "feedmode"\n[[grid]]\nmodes = ["placeholder", "jax-numpy", '
                      '"torch-numpy"]\nn = [10]\n')
    out = tmp_path / "never"
    for argv in (["feedmode", "--config", str(config)], ["run", str(config)]):
        assert cli([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and extra in err and "not installed" in err
        assert ", ".join(fm.modes_of(absent)) in err
        assert not out.exists()
    # without its modes the config runs (here: is accepted)
    study = parse_study(read_config(config) | {"grid": [{"modes": ["placeholder"], "n": [10]}]},
                        str(config))
    assert [s.mode for s in study.specs] == ["placeholder"]
    from study.feedmode import measure

    with pytest.raises(Exception, match=extra.replace("[", r"\[").replace("]", r"\]")):
        measure.worker(fm.modes_of(absent)[0])


@pytest.mark.slow
def test_the_engine_runs_each_framework_in_its_own_warm_process(tmp_path):
    out = tmp_path / "r"
    assert cli(["feedmode", "--n", "12", "--modes", "placeholder", "jax-resident",
                "torch-resident", "--calls", "2", "--out", str(out), "--quiet"]) == 0
    runs = pd.read_parquet(out / "runs.parquet").set_index("mode")
    assert (runs["status"] == "ok").all() and runs["check_ok"].all()
    assert runs["framework"].to_dict() == {"placeholder": "tensorflow", "jax-resident": "jax",
                                           "torch-resident": "torch"}
    assert runs.loc["jax-resident", "env_jax"] and runs.loc["torch-resident", "env_torch"]
    assert runs.loc["jax-resident", "program_bytes"] > 0
    # every framework's rows carry the compute/fetch split, consistent with the call columns
    split = ["first_compute_seconds", "first_fetch_seconds", "steady_compute_median_seconds",
             "steady_fetch_median_seconds"]
    assert runs[split].notna().all().all() and (runs[split] >= 0).all().all()
    np.testing.assert_allclose(runs["first_compute_seconds"] + runs["first_fetch_seconds"],
                               runs["first_call_seconds"], rtol=1e-12)
    calls = pd.read_parquet(out / "calls.parquet")
    assert len(calls) == 3 * 3 and calls[["compute_seconds", "fetch_seconds"]].notna().all().all()
    np.testing.assert_allclose(calls["compute_seconds"] + calls["fetch_seconds"],
                               calls["seconds"], rtol=1e-12)
    logs = {p.name for p in (out / "logs").glob("server-*.log")}
    assert logs == {"server-tensorflow.log", "server-jax.log", "server-torch.log"}


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


# --- figures and report of the new frameworks, from a table --------------------------------------

def frameworks_table() -> pd.DataFrame:
    """Two repeats of JAX's and PyTorch's modes at N = 2000, and jax-constant swept over N with
    a program that grows by the input's bytes (folded below N = 8000)."""
    rows = []
    for repeat in (0, 1):
        for mode, first, steady in (("placeholder", 0.5, 0.2), ("jax-numpy", 0.6, 0.3),
                                    ("jax-resident", 0.5, 0.1), ("torch-numpy", 0.4, 0.3),
                                    ("torch-resident", 0.4, 0.29),
                                    ("torch-compile-arg", 20.0, 0.2),
                                    ("torch-compile-captured", 21.0, 0.2)):
            rows.append({"mode": mode, "grappler": "default", "dtype": "float64", "n": 2000,
                         "seed": 0, "device": "cpu", "status": "ok", "repeat": repeat,
                         "first_call_seconds": first * (1 + 0.01 * repeat),
                         "steady_median_seconds": steady * (1 + 0.01 * repeat),
                         "compile_seconds": first / 2 if mode.startswith("jax") else None,
                         "program_bytes": 1800 if mode.startswith("jax") else None})
    for n, compile_seconds in ((250, 4.0), (2000, 30.0), (10000, 3.0)):
        rows.append({"mode": "jax-constant", "grappler": "default", "dtype": "float64", "n": n,
                     "seed": 0, "device": "cpu", "status": "ok", "repeat": 0,
                     "first_call_seconds": compile_seconds + 0.01,
                     "steady_median_seconds": 0.001 if n < 8000 else 0.2,
                     "compile_seconds": compile_seconds, "program_bytes": 1500 + 8192 * n,
                     "executable_bytes": 2000 + 10800 * n if n < 8000 else 2000 + 8192 * n,
                     "output_folded": n < 8000})
    return pd.DataFrame(rows)


def test_report_states_jax_constants_first_call_and_program_against_n():
    from study.feedmode import report

    lines = report.jax_constant_answer(frameworks_table())
    assert lines[0].startswith("JAX's jitted function closing over the array (jax-constant, "
                               "float64): first call 4.01 s at N = 250 (compilation 4 s, "
                               "StableHLO 2.05 MB, executable 2.7 MB, output folded); 30 s at "
                               "N = 2000")
    assert "3.01 s at N = 10000 (compilation 3 s, StableHLO 81.9 MB, executable 81.9 MB)" \
        in lines[0]
    assert "grows by 8192 bytes per image between N = 250 and N = 10000, against 8192 bytes " \
           "per input image: the installed JAX embeds" in lines[1]
    assert "at N = 250, 2000, not at N = 10000" in lines[2]
    embedded_not = frameworks_table().assign(program_bytes=1500)
    assert "does not embed" in report.jax_constant_answer(embedded_not)[1]
    assert report.jax_constant_answer(frameworks_table().query("mode != 'jax-constant'")) == []


def test_report_compares_the_frameworks_modes_paired_over_repeats():
    from study.feedmode import report

    jax_line, torch_line = report.frameworks_answer(frameworks_table())
    assert jax_line.startswith("JAX, N = 2000, float64: jax-numpy first call 603 ms "
                               "(compilation 300 ms), later calls 302 ms; jax-resident")
    assert "jax-numpy took 3x the time per call of jax-resident" in jax_line
    assert torch_line.startswith("PyTorch, N = 2000, float64: torch-numpy first call 402 ms, "
                                 "later calls 302 ms;")
    assert "torch-compile-captured took 1.05x the first-call time of torch-compile-arg" \
        in torch_line


def with_split(runs: pd.DataFrame, fetch_share: float) -> pd.DataFrame:
    """The table with every call split: the fetch to the host `fetch_share` of each call."""
    return runs.assign(
        first_compute_seconds=runs["first_call_seconds"] * (1 - fetch_share),
        first_fetch_seconds=runs["first_call_seconds"] * fetch_share,
        steady_compute_median_seconds=runs["steady_median_seconds"] * (1 - fetch_share),
        steady_fetch_median_seconds=runs["steady_median_seconds"] * fetch_share)


def tf1_table() -> pd.DataFrame:
    """constant and placeholder, three repeats, at N = 2000: the constant's later calls 10x
    faster (as on a CPU, with a small fetch) unless the fetch is most of both calls."""
    rows = [{"mode": mode, "grappler": "default", "dtype": "float64", "n": 2000, "seed": 0,
             "device": "gpu", "status": "ok", "repeat": repeat,
             "first_call_seconds": first * (1 + 0.01 * repeat),
             "steady_median_seconds": steady * (1 + 0.01 * repeat), "graphdef_bytes": 1000}
            for repeat in range(3)
            for mode, first, steady in (("constant", 2.0, 0.01), ("placeholder", 0.4, 0.1))]
    return pd.DataFrame(rows)


def test_report_answers_on_compute_only_and_on_compute_plus_fetch():
    """Where the fetch is a sliver of every call one sentence says compute only agrees; where
    it is most of a call (a GPU's copy), the compute-only comparison is given as well; results
    from before the split say neither."""
    from study.feedmode import report

    small = report.frameworks_answer(with_split(frameworks_table(), 0.01))
    assert all("Compute only (the output left on the cpu) gives the same answer: the fetch to "
               "the host took at most 1.0% of a call" in line for line in small)
    big = report.frameworks_answer(with_split(frameworks_table(), 0.6))
    assert all("the fetch to the host took up to 60% of a call" in line for line in big)
    assert "jax-numpy first call 241 ms, later calls 121 ms" in big[0]   # compute only
    assert big[0].count("jax-numpy took 3x the time per call of jax-resident") == 2
    assert not any("Compute only" in line
                   for line in report.frameworks_answer(frameworks_table()))
    # the original question, on a GPU where the copy is most of the later calls: both views
    table = tf1_table()
    gpu = table.assign(
        first_compute_seconds=table["first_call_seconds"] - 0.05,
        first_fetch_seconds=0.05,
        steady_compute_median_seconds=table["steady_median_seconds"] * 0.1,
        steady_fetch_median_seconds=table["steady_median_seconds"] * 0.9)
    line = report.original_feedmode_answer(gpu)[0]
    assert "later calls: constant took 0.1x the time per call of placeholder" in line
    assert "Compute only (the output left on the gpu; the fetch to the host took up to 90% " \
           "of a call): constant first call 1.97 s, later calls 1.01 ms" in line
    assert line.count("constant took 0.1x the time per call of placeholder") == 2
    cpu = report.original_feedmode_answer(with_split(table, 0.02))[0]
    assert cpu.endswith("Compute only (the output left on the gpu) gives the same answer: the "
                        "fetch to the host took at most 2.0% of a call (medians).")
    shown = report.feedmode_table(with_split(table, 0.02))
    assert {"first call, compute only", "later calls, compute only",
            "later calls, fetch to host"} <= set(shown.columns)


def test_summary_shows_the_call_and_its_compute():
    from study.feedmode.summary import summary_table

    text = summary_table(with_split(frameworks_table(), 0.5).assign(checksum=1.0))
    header = text.splitlines()[0]
    for column in ("first s", "first compute s", "steady s", "steady compute s",
                   "steady fetch s"):
        assert column in header
    assert "steady compute s" in summary_table(frameworks_table().assign(checksum=1.0))


def test_figures_show_every_framework_and_jaxs_program_against_n():
    import matplotlib.pyplot as plt

    from study.feedmode import figures

    runs = frameworks_table()
    fig = figures.figure_feedmode(runs)
    first, built, _, sweep, grown, compiled = fig.axes[:6]
    assert [t.get_text() for t in first.get_yticklabels()] == [
        "placeholder", "jax-numpy", "jax-resident", "jax-constant", "torch-numpy",
        "torch-resident", "torch-compile-arg", "torch-compile-captured"]
    assert {t.get_text() for t in built.get_yticklabels()} == {"jax-numpy", "jax-resident",
                                                                "jax-constant"}
    assert [t.get_text() for t in sweep.get_legend().get_texts()] == ["jax-constant"]
    lines = {t.get_text() for t in grown.get_legend().get_texts()}
    assert lines == {"jax-constant: StableHLO (JAX)", "jax-constant: executable / compiled code"}
    program = next(line for line in grown.get_lines() if len(line.get_xdata()) == 3)
    assert list(program.get_xdata()) == [250, 2000, 10000]
    assert compiled.get_yscale() == "log" and len(compiled.collections) >= 2
    plt.close(fig)
    headline = figures.figure_headline(runs)
    assert [t.get_text() for t in headline.axes[0].get_yticklabels()][-1] == \
        "torch-compile-captured"
    assert "program 1.8 kB" in {t.get_text() for t in headline.axes[0].texts}
    assert "no compute/fetch split" in headline.axes[0].get_title(loc="left")
    plt.close(headline)
    # each call in two views: the compute bar drawn over the call's, the fetch the rest
    headline = figures.figure_headline(with_split(runs, 0.25))
    ax = headline.axes[0]
    assert ax.get_title(loc="left") == "float64: fetch up to 25% of a call"
    widths = [p.get_width() for p in ax.patches]
    calls, computes = widths[:len(widths) // 4], widths[len(widths) // 4:len(widths) // 2]
    assert computes == pytest.approx([0.75 * w for w in calls])
    labels = [t.get_text() for t in headline.legends[0].get_texts()]
    assert labels == ["first call, compute", "first call, + fetch", "later calls, compute",
                      "later calls, + fetch"]
    assert "dark: compute, the output left on the device" in headline._suptitle.get_text()
    plt.close(headline)
    small = figures.figure_headline(with_split(runs, 0.01))
    assert small.axes[0].get_title(loc="left") == ("float64: fetch at most 1.0% of any call: "
                                                   "compute only is the same")
    plt.close(small)


# --- the shipped configs -----------------------------------------------------------------------

def test_shipped_configs_expand_to_their_grids(tmp_path):
    default = parse_study(read_config(CONFIGS / "feedmode.toml"), "feedmode.toml")
    specs = default.specs
    assert default.name == "feedmode" and len(specs) == len({s.run_id for s in specs})
    # every CPU mode of every framework at N = 2000 in float64 (float32 in the -full config)
    # but torch.compile's (the -full config has them), and the JAX closed-over constant swept
    # to N = 1000 (their first calls cost tens of seconds: the config says why)
    compiled = {"torch-compile-arg", "torch-compile-captured"}
    assert {(s.mode, s.dtype) for s in specs if s.n == 2000 and s.grappler == "default"} == {
        (m, "float64") for m in config.modes_on("cpu")
        if m not in compiled and m != "jax-constant"}
    assert {(s.mode, s.grappler) for s in specs if s.grappler != "default"} == {
        (m, g) for m in ("numpy", "constant") for g in fm.GRAPPLER if g != "default"}
    assert {s.n for s in specs if s.mode == "placeholder"} == {250, 1000, 2000, 4000}
    assert {(s.n, s.dtype) for s in specs if s.mode == "jax-constant"} == {
        (250, "float64"), (500, "float64"), (1000, "float64")}
    assert max(s.n for s in specs) <= 4000
    # The mode table has two repeats (a CI for every mode ratio); the rest one.
    repeats = {}
    for s in specs:
        repeats.setdefault((s.mode, s.dtype, s.n, s.grappler), set()).add(s.repeat)
    for mode in ("constant", "jax-numpy", "torch-resident"):
        assert repeats[(mode, "float64", 2000, "default")] == {0, 1}
    assert repeats[("constant", "float64", 250, "default")] == {0}
    full = parse_study(read_config(CONFIGS / "feedmode-full.toml"), "feedmode-full.toml")
    assert full.name == "feedmode-full"
    # the original question's dtype at its size, every mode (float32 at N = 2000)
    assert {(s.mode, s.dtype) for s in full.specs if s.n == 60000} == {
        (m, "float64") for m in config.modes_on("cpu")}
    assert {1000, 10000, 20000} <= {s.n for s in full.specs if s.mode == "jax-constant"}
    # the dtype comparison: every mode of the default study's table in both dtypes at N = 2000
    table = {(s.mode, s.dtype) for s in specs if s.n == 2000 and s.grappler == "default"
             and s.mode not in compiled}
    assert {(m, d) for m, _ in table for d in fm.DTYPES} <= {
        (s.mode, s.dtype) for s in full.specs if s.n == 2000}


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
