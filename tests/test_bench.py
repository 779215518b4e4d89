"""The bench's figures are ratios computed from real timings; no test here asserts a timing.

One tiny bench runs once for the module (through the CLI, into a temporary folder); the tests
check its structure and that every ratio is the quotient of the timings stored beside it.
`--device gpu` (`make gpu-check`) is refused in one line on this machine (no GPU).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from study.__main__ import main
from study.bench import plan, runs, timing
from study.bench.sections import bandwidth, harness, iterations, overhead, peer
from study.bench.sections.scaling import SLOPE_METRICS
from study.bench.twins import twin
from study.frameworks.jax import twin as twin_jax
from study.frameworks.numpy import twin as twin_numpy
from study.frameworks.tensorflow import twin as twin_tensorflow

ROOT = Path(__file__).resolve().parent.parent

TINY = replace(
    plan.FULL, name="tiny", rows=3000, dtypes=("float64",), optimizers=("gd", "lbfgs"),
    backends=("numpy", "numpy-blas1", "tf-fused", "tf1"), data_iterations=3, gram_iterations=5,
    repeats=2, read_repeats=2, overhead_repeats=2, overhead_gram_iterations=5,
    overhead_backends=("numpy", "tf-fused"), scaling_n=(1000, 2000, 4000), scaling_d=(5, 10),
    scaling_d_rows=400, scaling_methods=(("gd", "numpy", "data"), ("lbfgs", "numpy", "gram")),
    scaling_iterations=3, scaling_repeats=2, scaling_time_budget=5.0, feed_n=8,
    feed_dtypes=("float32",), feed_modes=("placeholder", "function-arg", "fused"), feed_calls=2,
    target_repeats=2, target_candidates=(("lbfgs", "numpy", "data"), ("lbfgs", "numpy", "gram")),
    harness_rows=(3000,), harness_small=((500, 120),), harness_dtypes=("float64",),
    harness_iterations=3, harness_repeats=2,
    harness_backends=("numpy", "jax"), bandwidth_rows=(3000,), bandwidth_dtypes=("float32",),
    bandwidth_backends=("numpy", "jax"), bandwidth_iterations=3, bandwidth_repeats=2,
    probe_rows=2000, peer_problems=(("least-squares", 200, 5), ("logistic", 200, 5)),
    peer_iterations=3, peer_long_iterations=150, peer_max_iter=500, peer_repeats=2,
    peer_sweep_runs=0,
)


def from_json(text) -> list[float]:
    return json.loads(text)


@pytest.fixture(scope="module")
def benched(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "results"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(plan, "FULL", TINY)
        assert main(["bench", "--out", str(out)]) == 0
    tables = {p.stem: pd.read_parquet(p) for p in out.glob("*.parquet")}
    return out, printed.getvalue(), tables


def ok(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["status"] == "ok"]


def test_writes_every_table_and_the_printed_text(benched):  # the fast tier pays the fixture
    out, printed, tables = benched
    assert set(tables) == {"iterations", "overhead", "scaling", "slopes", "feedmode", "target",
                           "harness", "bandwidth", "peer"}
    text = (out / "bench.txt").read_text()
    assert printed.startswith(text)
    for heading in ("passes over X per iteration", "overhead", "scaling", "fitted log-log slopes",
                    "CNN feed modes", "normal-equations solve", "hand-written loop",
                    "fraction of the copy bandwidth", "float32 against float64",
                    "over SciPy's L-BFGS-B"):
        assert heading in text
    assert not list(out.glob(".*"))  # no temporary file left
    for name, frame in tables.items():
        if name != "slopes":
            assert "env_git_commit" in frame and "env_blas" in frame, name


def test_passes_per_iteration_is_the_quotient_of_the_stored_timings(benched):
    frame = benched[2]["iterations"]
    # gd, lbfgs x numpy, numpy-blas1, tf-fused x data, gram, plus tf1 gd (data, gram)
    assert len(frame) == 2 * 3 * 2 + 2
    rows = ok(frame)
    assert set(rows["backend"]) >= {"numpy", "numpy-blas1", "tf-fused", "tf1"}
    assert set(rows["formulation"]) == {"data", "gram"}
    for _, row in rows.iterrows():
        per_iteration = from_json(row["seconds_per_iteration_samples"])
        reads = from_json(row["read_pass_samples"])
        assert len(per_iteration) == TINY.repeats
        assert len(reads) == (TINY.repeats + 1) * TINY.read_repeats  # interleaved, and once more
        assert all(v > 0 for v in per_iteration + reads)
        assert row["seconds_per_iteration"] == np.median(per_iteration)
        assert row["read_pass_seconds"] == np.median(reads)
        assert row["passes_per_iteration"] == row["seconds_per_iteration"] / row[
            "read_pass_seconds"]
        assert row["passes_per_iteration_best"] == min(per_iteration) / min(reads)
        assert row["iterations"] == row["max_iter"]
    assert (rows.loc[rows["backend"] == "numpy-blas1", "blas_threads"] == 1).all()
    assert (rows.loc[rows["backend"] == "numpy", "blas_threads"] == 0).all()
    # the TensorFlow gram rows either run or say why not (the option arrives with issue 7)
    tf_gram = frame[(frame["backend"] == "tf-fused") & (frame["formulation"] == "gram")]
    assert set(tf_gram["status"]) <= {"ok", "unavailable"}
    assert (tf_gram.loc[tf_gram["status"] == "unavailable", "message"].str.len() > 0).all()


def test_a_known_denominator_gives_the_expected_ratio(well_conditioned):
    reads = iter([[0.5, 0.25], [0.125, 0.5], [1.0, 0.25]])
    row = iterations.measure_iterations(well_conditioned, "gd", "numpy", "data", "float64",
                                        iterations=4, repeats=2, read=lambda: next(reads))
    assert row["status"] == "ok"
    assert row["read_pass_seconds"] == np.median([0.5, 0.25, 0.125, 0.5, 1.0, 0.25])
    assert row["seconds_per_iteration"] > 0
    assert row["passes_per_iteration"] == row["seconds_per_iteration"] / row["read_pass_seconds"]


def test_a_configuration_that_cannot_run_is_a_row_saying_why(well_conditioned):
    row = iterations.measure_iterations(well_conditioned, "lbfgs", "tf1", "data", "float64",
                                        iterations=2, repeats=1, read=lambda: [1.0])
    assert row["status"] == "unavailable" and "tf1 runs gd, adadelta only" in row["message"]
    with pytest.raises(runs.Unavailable, match="formulation"):
        runs.backend_for("numpy", "float64", "sketch")


def test_overhead_ratios_are_quotients_of_interleaved_timings(benched):
    frame = benched[2]["overhead"]
    harness = frame[frame["check"] == "harness"]
    assert set(zip(harness["backend"], harness["formulation"], strict=True)) == {
        ("numpy", "data"), ("numpy", "gram"), ("tf-fused", "data")}
    trace = frame[frame["check"].isin(["trace", "trace-wall"])]
    assert set(trace["formulation"]) == {"data", "gram"}
    for _, row in ok(frame).iterrows():
        ours, baseline = from_json(row["seconds_samples"]), from_json(row["baseline_samples"])
        assert len(ours) == len(baseline) == TINY.overhead_repeats
        assert all(v > 0 for v in ours + baseline)
        assert row["seconds"] == np.median(ours)
        assert row["baseline_seconds"] == np.median(baseline)
        assert row["ratio"] == row["seconds"] / row["baseline_seconds"]
        assert row["ratio_best"] == min(ours) / min(baseline)
        if row["check"] in ("harness", "trace"):
            assert row["meets_goal"] == (row["ratio"] <= row["goal"])
    assert (ok(harness)["goal"] == plan.HARNESS_GOAL).all()


def test_the_hand_written_loops_compute_gradient_descent(well_conditioned):
    assert twin_numpy.hand_numpy_gd(well_conditioned, "float64", "data", 3) > 0
    assert twin_numpy.hand_numpy_gd(well_conditioned, "float32", "gram", 3) > 0
    assert twin_tensorflow.hand_tf_gd(well_conditioned, "float64", 3, xla=False) > 0


def test_trace_schedule_is_restored_after_the_measurement():
    import optimizers.driver as driver

    original = driver.on_trace_schedule, driver.next_on_schedule
    with pytest.raises(RuntimeError), overhead.trace_schedule(lambda i: True, lambda i: i + 1):
        assert (driver.on_trace_schedule, driver.next_on_schedule) != original
        raise RuntimeError
    assert (driver.on_trace_schedule, driver.next_on_schedule) == original


def test_scaling_slopes_are_fitted_to_the_stored_points(benched):
    tables = benched[2]
    scaling, slopes = tables["scaling"], tables["slopes"]
    assert set(zip(scaling["sweep"], scaling["n"], scaling["d"], strict=True)) == {
        ("n", 1000, 5), ("n", 2000, 5), ("n", 4000, 5), ("d", 400, 5), ("d", 400, 10)}
    assert set(slopes["metric"]) == set(SLOPE_METRICS)
    for _, fit in slopes.iterrows():
        same = (scaling["sweep"] == fit["sweep"]) & (scaling["method"] == fit["method"])
        part = ok(scaling[same])
        slope, points = timing.loglog_slope(part[fit["against"]], part[fit["metric"]])
        assert fit["points"] == points
        assert (math.isnan(slope) and math.isnan(fit["slope"])) or fit["slope"] == slope
    for _, row in ok(scaling).iterrows():
        assert row["passes_per_iteration"] == row["seconds_per_iteration"] / row[
            "read_pass_seconds"]
        if row["target_status"] == "converged":
            assert row["seconds_to_target"] > 0
            assert row["total_to_target"] == row["seconds_to_target"] + row["setup_to_target"]


@pytest.mark.numerical
@pytest.mark.parametrize("slope", [0.0, 1.0, 1.5, -0.5])
def test_loglog_slope_recovers_a_known_power_law(slope):
    n = np.array([1e4, 1e5, 1e6, 1e7])
    fitted, points = timing.loglog_slope(n, 3e-7 * n**slope)
    # a 2-parameter fit of logs of size ~20 with cond(Vandermonde) ~ 1e2 (polyfit scales it):
    # a few eps 20 1e2 ~ 1e-13
    assert points == 4 and fitted == pytest.approx(slope, abs=1e-12)


@pytest.mark.numerical
def test_loglog_slope_ignores_missing_points_and_needs_two():
    n = [1e4, 1e5, 1e6, 1e7]
    fitted, points = timing.loglog_slope(n, [2e-3, 2e-2, float("nan"), 2.0])
    assert points == 3 and fitted == pytest.approx(1.0, abs=1e-12)  # as above
    assert math.isnan(timing.loglog_slope([1e4, 1e5], [1.0, float("nan")])[0])
    assert math.isnan(timing.loglog_slope([1e4, 1e4], [1.0, 2.0])[0])


def test_ratio_is_nan_without_a_positive_denominator():
    assert timing.ratio(3.0, 2.0) == 1.5
    assert math.isnan(timing.ratio(1.0, 0.0))
    assert math.isnan(timing.ratio(float("nan"), 1.0))
    assert math.isnan(timing.ratio(1.0, float("nan")))


def test_feed_modes_are_divided_by_their_memory_floor(benched):
    frame = benched[2]["feedmode"]
    assert list(frame["mode"]) == list(TINY.feed_modes)
    assert (frame["status"] == "ok").all()
    for _, row in frame.iterrows():
        steady, reads = from_json(row["steady_samples"]), from_json(row["read_samples"])
        writes = from_json(row["write_samples"])
        assert len(steady) == len(reads) == len(writes) == TINY.feed_calls
        assert row["floor_seconds"] == np.median(reads) + np.median(writes)
        assert row["steady_over_floor"] == row["steady_seconds"] / row["floor_seconds"]
        assert row["input_bytes"] == TINY.feed_n * 32 * 32 * 4
        assert row["output_bytes"] == TINY.feed_n * 15 * 15 * 6 * 4


def test_time_to_target_is_divided_by_the_normal_equations(benched):
    frame = benched[2]["target"]
    assert list(frame["optimizer"]) == ["lbfgs", "lbfgs", "closed-form-lstsq"]
    assert list(frame["formulation"]) == ["data", "gram", "data"]
    assert frame["best"].sum() == 1
    for _, row in ok(frame).iterrows():
        assert row["reached"]
        assert row["seconds_to_target"] == np.median(from_json(row["seconds_samples"]))
        assert row["reference_seconds"] == np.median(from_json(row["reference_samples"]))
        assert row["over_normal"] == row["seconds_to_target"] / row["reference_seconds"]
        assert row["total_over_normal_total"] == row["total_seconds"] / row[
            "reference_total_seconds"]
    best = frame[frame["best"]].iloc[0]
    assert best["total_over_normal_total"] == ok(frame)["total_over_normal_total"].min()


@pytest.mark.parametrize("args, message", [
    (["--sections", "roofline"], "unknown section 'roofline'; allowed: iterations"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, message):
    assert main(["bench", "--out", str(tmp_path / "b"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b").exists()


def test_out_that_is_a_file_is_refused(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["bench", "--out", str(target)]) == 2
    assert "is a file" in capsys.readouterr().err


# --- harness against hand-written loops, fractions of the copy bandwidth ---------------------

def test_harness_covers_every_declared_mode_and_divides_side_by_side(benched):
    from study.frameworks.registry import BACKENDS

    frame = benched[2]["harness"]
    expected = {BACKENDS[name].label({"feed": feed} if feed else {})
                for name in ("numpy", "jax") for feed in BACKENDS[name].allowed("feed") or ("",)}
    assert set(frame["backend"]) == expected
    assert set(zip(frame["n"], frame["iterations"], strict=True)) == {(500, 120), (3000, 3)}
    rows = ok(frame)
    assert len(rows) == len(frame)  # every NumPy and JAX mode has its hand-written loop
    for _, row in rows.iterrows():
        mine, hand = from_json(row["seconds_samples"]), from_json(row["hand_samples"])
        assert len(mine) == len(hand) == TINY.harness_repeats
        assert row["ratio"] == np.median(mine) / np.median(hand)
        assert row["ratio_best"] == min(mine) / min(hand)
        assert row["meets_goal"] == (row["ratio"] <= plan.LOOP_GOAL)
        assert row["host_reads"] == ("per chunk" if row["feed"] in harness.WHOLE_LOOP
                                     else "per iteration")


def test_bandwidth_fractions_are_quotients_of_the_stored_figures(benched):
    frame = benched[2]["bandwidth"]
    assert set(frame["check"]) == {"mode", "precision", "reduction"}
    assert len(frame[frame["check"] == "precision"]) == 4  # 2 dtypes x default, highest
    assert list(frame.loc[frame["check"] == "reduction", "variant"]) == [
        *twin_jax.REDUCTIONS, *twin_jax.REDUCTIONS]
    modes = frame[frame["check"] == "mode"]
    assert set(modes["optimizer"]) == {"gd", "lbfgs"}
    for _, row in ok(frame).iterrows():
        x_bytes = row["n"] * row["d"] * np.dtype(row["dtype"]).itemsize
        expected = x_bytes * plan.PASSES[row["optimizer"]] / row["seconds_per_iteration"] / (
            row["copy_gb_per_s"] * 1e9)
        assert row["fraction_of_copy"] == pytest.approx(expected, rel=1e-12)
        assert row["seconds_per_iteration"] == np.median(from_json(row["seconds_samples"]))


def test_a_mode_declared_later_appears_as_a_row_saying_why(monkeypatch, well_conditioned):
    """The modes are read from the registry when the bench runs: a new one (PyTorch's
    `graphed`, CUDA only) is a row, here one saying why it cannot run on this CPU."""
    from dataclasses import replace as change

    from study.frameworks import registry

    torch_backend = registry.BACKENDS["torch"]
    options = {**torch_backend.options, "feed": (*torch_backend.allowed("feed"), "graphed")}
    monkeypatch.setitem(registry.BACKENDS, "torch", change(torch_backend, options=options))
    assert ("torch", "graphed") in harness.engines("cpu", ("torch",))
    row = harness.measure_loop(well_conditioned, "torch", "graphed", "float64", "cpu",
                               iterations=2, repeats=1)
    assert row["status"] == "unavailable" and row["message"]
    assert row["host_reads"] == "per chunk"


@pytest.mark.parametrize("name, feed", [("torch", "feed"), ("torch", "resident"),
                                        ("tensorflow", "feed"), ("tensorflow", "resident"),
                                        ("tensorflow", "fused"), ("tensorflow", "tf1")])
def test_the_other_hand_written_loops_run(well_conditioned, name, feed):
    assert twin(name, "hand_loop")(well_conditioned, feed, "float32", "cpu", 3) > 0


# --- the engines and their twins come from the backend registry -------------------------------

# the engines `make bench` measured before they were read from the registry (issue 42 item 5):
# label -> (backend, options); only the XLA one's label changed, to the registry's
MEASURED = {
    "numpy": ("numpy", {}), "numpy-blas1": ("numpy", {}),
    "tf-feed": ("tensorflow", {"feed": "feed"}),
    "tf-resident": ("tensorflow", {"feed": "resident"}),
    "tf-fused": ("tensorflow", {"feed": "fused"}),
    "tf-fused+xla": ("tensorflow", {"feed": "fused", "xla": True}),
    "tf1": ("tensorflow", {"feed": "tf1"}), "jax-feed": ("jax", {"feed": "feed"}),
    "jax-resident": ("jax", {"feed": "resident"}), "jax-fused": ("jax", {"feed": "fused"}),
    "torch-feed": ("torch", {"feed": "feed"}), "torch-resident": ("torch", {"feed": "resident"}),
    "torch-compiled": ("torch", {"feed": "compiled"})}


def test_the_engines_are_the_registrys_and_the_plans_measure_what_they_did():
    from study.frameworks.registry import BACKENDS

    table = plan.engines()
    for name, declared in BACKENDS.items():  # every backend's every feed, in its own label
        for feed in declared.allowed("feed") or (None,):
            options = {"feed": feed} if feed else {}
            assert table[declared.label(options)] == (name, options)
    assert {label: table[label] for label in plan.FULL.backends} == MEASURED
    for chosen in (plan.FULL, plan.QUICK):
        labels = {*chosen.backends, *chosen.overhead_backends, *chosen.trace_backends,
                  *(c[1] for c in chosen.target_candidates + chosen.scaling_methods)}
        assert labels <= set(MEASURED)
    assert plan.QUICK.backends == ("numpy", "numpy-blas1", "tf-resident", "tf-fused",
                                   "jax-fused", "torch-resident")
    assert runs.describe("tf-fused+xla")["xla"] is True


def test_an_unknown_engine_is_one_line():
    from convergence_study.errors import InputError

    with pytest.raises(InputError, match=r"^unknown engine 'tf-fused-xla'; allowed: numpy, "):
        plan.engine("tf-fused-xla")


def test_every_twin_the_registry_names_has_a_hand_loop():
    from study.bench.twins import twin
    from study.frameworks.registry import BACKENDS

    named = [name for name, declared in BACKENDS.items() if declared.twin]
    assert named == ["numpy", "tensorflow", "jax", "torch"]
    for name in named:
        assert callable(twin(name, "hand_loop")) and callable(twin(name, "copy_call"))


def test_a_backend_without_a_twin_is_a_row_saying_so(monkeypatch, well_conditioned):
    """A backend registered with no twin (here NumPy's, under another name) is measured where
    it can be and said to have no hand-written loop and no copy measurement."""
    from study.frameworks import registry

    bare = registry.Backend("bare", None, "study.frameworks.numpy.backend", "NumpyBackend",
                            {"dtype": registry.DTYPES})
    monkeypatch.setitem(registry.BACKENDS, "bare", bare)
    assert plan.engine("bare") == ("bare", {})
    row = harness.measure_loop(well_conditioned, "bare", "", "float64", "cpu", iterations=2,
                               repeats=1)
    assert (row["status"], row["message"]) == ("unavailable", "no hand-written loop for bare")
    assert "seconds_samples" not in row  # nothing ran before it said so
    over = overhead.measure_harness(well_conditioned, "bare", "data", "float64", iterations=2,
                                    repeats=1)
    assert (over["status"], over["message"]) == ("unavailable", "no hand-written loop for bare")
    small = replace(TINY, bandwidth_backends=("bare",), bandwidth_rows=(300,), probe_rows=300,
                    bandwidth_repeats=1, bandwidth_iterations=2)
    frame = bandwidth.bench_bandwidth(small)
    assert set(frame["status"]) == {"unavailable"}
    assert set(frame["message"]) == {"no copy measurement for bare"}


def test_a_backend_that_runs_only_on_a_gpu_is_no_cpu_engine(monkeypatch):
    from study.frameworks import registry

    gpu_only = registry.Backend("gpuonly", None, "study.frameworks.numpy.backend", "NumpyBackend",
                                {"dtype": registry.DTYPES, "device": ("gpu",)})
    monkeypatch.setitem(registry.BACKENDS, "gpuonly", gpu_only)
    assert ("gpuonly", "") not in harness.engines("cpu", ("numpy", "gpuonly"))
    assert harness.engines("gpu", ("numpy", "gpuonly")) == [("gpuonly", "")]


def test_the_jax_matmul_precision_is_restored():
    import jax

    saved = jax.config.jax_default_matmul_precision
    with pytest.raises(RuntimeError), twin_jax.matmul_precision("highest"):
        assert jax.config.jax_default_matmul_precision == "highest"
        raise RuntimeError
    assert jax.config.jax_default_matmul_precision == saved


def test_device_gpu_without_a_gpu_is_one_line(tmp_path, capsys):
    assert main(["bench", "--device", "gpu", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GPU visible" in err[0]
    assert main(["bench", "--device", "gpu", "--sections", "target", "--out",
                 str(tmp_path / "b")]) == 2
    assert "measures the host" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


# --- make gpu-check: the bench's GPU sections (was scripts/gpu_check.py) ----------------------

def test_device_gpu_without_device_files_imports_no_framework(monkeypatch):
    """Where no framework's GPU device files exist, --device gpu is refused without importing
    TensorFlow, JAX or PyTorch (seconds each on a small machine) to ask them."""
    import importlib

    from study.bench.command import gpu_frameworks
    from study.frameworks.registry import Framework

    monkeypatch.setattr(Framework, "gpu_nodes_present", lambda self: False)
    imported = []
    monkeypatch.setattr(importlib, "import_module", lambda name: imported.append(name))
    assert gpu_frameworks() == [] and imported == []


def test_make_gpu_check_runs_the_bench_on_the_gpu():
    import shutil

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    plan = subprocess.run(["make", "-n", "gpu-check"], cwd=ROOT, capture_output=True, text=True,
                          check=True, env={**os.environ, "MAKEFLAGS": ""}).stdout
    assert "-m study bench --device gpu --out results/bench-gpu" in plan, plan


# --- peer: SciPy's L-BFGS-B, the hand loop, a sweep's cost per run (issue 53) -------------------

def test_peer_ratios_are_quotients_of_side_by_side_timings(benched):
    frame = benched[2]["peer"]
    assert set(zip(frame["method"], frame["objective"], frame["check"], strict=True)) == {
        ("lbfgs", "least-squares", "per iteration"), ("lbfgs", "least-squares", "to 1e-08"),
        ("gd", "least-squares", "per iteration"), ("gd", "least-squares", "per iteration over 150"),
        ("lbfgs", "logistic", "per iteration"),
        ("lbfgs", "logistic", "to 1e-08")}  # the hand GD loop is least squares only
    assert (frame["status"] == "ok").all(), frame["message"].tolist()
    for _, row in frame.iterrows():
        mine, theirs = from_json(row["seconds_samples"]), from_json(row["peer_samples"])
        assert len(mine) == len(theirs) == TINY.peer_repeats
        assert row["ratio"] == pytest.approx(timing.median(mine) / timing.median(theirs))
        assert row["goal"] == plan.PEER_GOALS[
            "lbfgs to target" if row["check"].startswith("to ") else
            f"{row['method']} per iteration"]
    to_target = frame[frame["check"] == "to 1e-08"]
    assert (to_target["iterations"] < TINY.peer_max_iter).all()  # both reached the target
    assert (to_target["peer_iterations"] < TINY.peer_max_iter).all()


def test_scipys_lbfgs_in_the_peer_section_stops_at_the_target():
    problem = peer.peer_problem("least-squares", 300, 8, 100.0)
    _, iterations = peer.scipy_lbfgs(problem, 1000, 1e-8)
    _, more = peer.scipy_lbfgs(problem, 1000, 1e-12)
    assert 0 < iterations < more
    _, fixed = peer.scipy_lbfgs(problem, 4, None)
    assert fixed == 4


@pytest.mark.slow
def test_the_peer_sweep_row_is_a_fresh_command_of_trivial_runs():
    row = peer.measure_sweep(2)
    assert row["status"] == "ok", row["message"]
    assert row["seconds"] > row["peer_seconds"] > 0  # wall per run, measured per run
    assert row["ratio"] == pytest.approx(row["seconds"] - row["peer_seconds"])
