"""The train study's segmented loop on each framework (a fresh process per framework: Keras
picks its backend at import): no host read inside a segment, counted by patching the
framework's reads (PyTorch's and TensorFlow's tensor methods; on JAX a transfer guard that
refuses any implicit device-to-host copy), and the loop's weights after N steps equal to
`model.fit`'s on the same batches from the same initial weights. Then the device axis (a GPU
run refused in one line by the command, skipped with its reason by a sweep) and the
target-setting round's framework and run ids, from the config alone."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from study.__main__ import main as cli
from study.frameworks.registry import gpu_nodes_present
from study.sweep.grid import parse_study

ROOT = Path(__file__).resolve().parents[1]

PROBE = textwrap.dedent('''
    import contextlib, json, os, sys
    import numpy as np
    import keras
    from study.train.run.loop import Target, epoch_batches, run_loop
    from study.frameworks.keras.train import loss_object, make_stepper

    backend = keras.backend.backend()
    reads = {"run": 0, "read": 0, "compiles": 0}
    phase = [None]

    def counting(original):
        def read(*args, **kwargs):
            if phase[0] is not None:
                reads[phase[0]] += 1
            return original(*args, **kwargs)
        return read

    guard = contextlib.nullcontext
    if backend == "torch":
        import torch
        for name in ("item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__",
                     "__array__", "__index__"):
            setattr(torch.Tensor, name, counting(getattr(torch.Tensor, name)))
    elif backend == "tensorflow":
        from tensorflow.python.framework import ops
        for name in ("_numpy", "__float__", "__int__", "__bool__", "__index__"):
            setattr(ops._EagerTensorBase, name, counting(getattr(ops._EagerTensorBase, name)))
    else:
        import jax
        guard = lambda: jax.transfer_guard_device_to_host("disallow")
        # XLA compiles: none may happen in a timed segment (setup, `warm`, compiles)
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, duration, **kw: reads.__setitem__("compiles", reads["compiles"] + 1)
            if event == "/jax/core/compile/backend_compile_duration" and phase[0] == "run"
            else None)

    def model():
        return keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(5),
                                 keras.layers.BatchNormalization(),
                                 keras.layers.Activation("relu"), keras.layers.Dense(1)])

    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5])).astype(np.float32)
    steps, size = 7, 8
    rows, _ = epoch_batches(len(x), size, seed=3)  # 5 steps an epoch: two epochs' orders
    keras.utils.set_random_seed(1)
    reference = model()
    weights = reference.get_weights()

    def compiled():
        built = model()
        built.set_weights(weights)
        built.compile(optimizer=keras.optimizers.Adam(0.05), loss="mse")
        return built

    fitted = compiled()
    order = np.concatenate([rows(i) for i in range(steps)])
    fitted.fit(x[order], y[order], batch_size=size, epochs=1, shuffle=False, verbose=0)

    mine = compiled()
    stepper = make_stepper(mine, loss_object("mse"), x, y, rows)

    class Counted:
        def prepare(self, first, count):
            return stepper.prepare(first, count)

        def warm(self, prepared):  # setup: compiles, moves nothing
            return stepper.warm(prepared)

        def run(self, prepared):
            phase[0] = "run"
            try:
                with guard():
                    return stepper.run(prepared)
            finally:
                phase[0] = None

        def read(self, value):
            phase[0] = "read"
            try:
                return stepper.read(value)
            finally:
                phase[0] = None

    def evaluate():  # off the clock and uncounted: the state into the model and back
        stepper.write_back()
        out = {"val_loss": float(mine.test_on_batch(x, y))}
        stepper.reload()
        return out

    record, trace = run_loop(Counted(), evaluate, target=Target("val_loss", None, "min"),
                             max_steps=steps, eval_every=3)
    stepper.write_back()
    differences = [float(np.max(np.abs(a - b)))
                   for a, b in zip(fitted.get_weights(), mine.get_weights())]
    moved = [float(np.max(np.abs(a - b))) for a, b in zip(weights, mine.get_weights())]
    print(json.dumps({"backend": backend, "reads": reads, "segments": record["segments"],
                      "evaluated_at": [t["step"] for t in trace], "differences": differences,
                      "moved": moved,
                      "iterations": int(keras.ops.convert_to_numpy(mine.optimizer.iterations)),
                      "fit_iterations": int(keras.ops.convert_to_numpy(
                          fitted.optimizer.iterations))}))
''')


@pytest.mark.parametrize("backend", ["jax", pytest.param("tensorflow", marks=pytest.mark.slow),
                                     pytest.param("torch", marks=pytest.mark.slow)])
def test_the_loop_reads_nothing_inside_a_segment_and_trains_as_fit_does(backend):
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          cwd=ROOT, timeout=300,
                          env={**__import__("os").environ, "KERAS_BACKEND": backend,
                               "CUDA_VISIBLE_DEVICES": "-1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["backend"] == backend
    # segments: steps 1-3, 4-6, 7 (setup apart); evaluations where they end
    assert out["segments"] == 3 and out["evaluated_at"] == [0, 3, 6, 7]
    assert out["reads"]["run"] == 0, out  # nothing read back inside a segment
    assert out["reads"]["compiles"] == 0, out  # nothing compiled after the setup step (JAX)
    if backend != "jax":  # JAX's read is jax.device_get, which the guard allows
        assert out["reads"]["read"] == out["segments"], out  # one read per segment
    assert out["iterations"] == out["fit_iterations"] == 7
    assert min(out["moved"]) > 1e-5  # every weight moved (BatchNorm's statistics too)
    assert max(out["differences"]) < 1e-5, out  # fit's weights, to float32 rounding


# ---- the device axis ----------------------------------------------------------------------------

def test_a_gpu_run_without_a_gpu_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("study.frameworks.registry.gpu_nodes_present", lambda *a: False)
    out = tmp_path / "out.parquet"
    code = cli(["train", "--model", "digits-cnn", "--data", "digits", "--target",
                "val_loss=0.3", "--device", "gpu", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "no GPU visible to JAX" in err, err
    assert not out.exists()
    code = cli(["train", "--model", "digits-cnn", "--data", "digits", "--target",
                "val_loss=0.3", "--device", "tpu", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "--device: unknown 'tpu'" in err, err
    assert not out.exists()


DEVICES = """
kind = "train"
name = "devices"
backends = ["jax"]
device = ["cpu", "gpu"]
run_timeout = 120

[[problems]]
model = "eve-mlp"
data = { name = "eve-late-week", rows = 400 }
loss = "binary_crossentropy"
metric = "accuracy"
batch_size = 64
eval_every = 2
target = { metric = "val_loss", value = 0.01 }
stopping = { max_steps = 4 }

[[optimizers]]
name = "keras:Adam"
learning_rate = 0.01
"""


@pytest.mark.slow
@pytest.mark.skipif(gpu_nodes_present(), reason="this machine has a GPU: the run would use it")
def test_a_sweeps_gpu_runs_are_skipped_with_the_reason_where_there_is_none(tmp_path, capsys):
    """The engine skips them (no row: a machine with a GPU runs them later) and says why."""
    (tmp_path / "devices.toml").write_text(DEVICES)
    out = tmp_path / "results"
    assert cli(["run", str(tmp_path / "devices.toml"), "--out", str(out), "--quiet"]) == 0
    assert "1 run not run here: no GPU visible to JAX" in capsys.readouterr().out
    runs = pd.read_parquet(out / "runs.parquet").set_index("device")
    assert list(runs.index) == ["cpu"]
    assert runs.loc["cpu", "status"] == "timeout" and runs.loc["cpu", "steps"] == 4
    assert runs.loc["cpu", "device_name"].startswith("cpu")
    assert runs.loc["cpu", "segments"] == 2  # steps 1-2 and 3-4 (setup apart)


# ---- the target-setting round: its framework and the run ids ----------------------------------

ROUND = """
kind = "train"
name = "round"
seeds = [0, 1]
backends = ["tensorflow", "jax", "torch"]

[[problems]]
name = "digits"
model = "digits-cnn"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 64
target = { metric = "val_loss", set = "round", margin = 0.1, seed = 9, stopping = {max_steps = 6} }

[[problems]]
name = "given"
model = "digits-cnn"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 32
target = { metric = "val_loss", value = 0.5 }

[[optimizers]]
name = "keras:Adam"
learning_rate = 0.01
"""


def study(text: str):
    import tomllib

    return parse_study(tomllib.loads(text), "round.toml")


@pytest.mark.slow
def test_the_round_runs_on_the_problems_own_first_framework():
    specs = study(ROUND + '\n[[exclude]]\nbackend = "tensorflow"\ntarget_how = "round"\n').specs
    setting = [s for s in specs if s.target["how"] == "setting"]
    assert setting and all(s.backend == "jax" and s.device == "cpu" for s in setting)
    assert {s.backend for s in specs if s.target["how"] == "round"} == {"jax", "torch"}
    assert {s.backend for s in specs if s.target["how"] == "given"} == {"tensorflow", "jax",
                                                                        "torch"}
    plain = [s for s in study(ROUND).specs if s.target["how"] == "setting"]
    assert plain and all(s.backend == "tensorflow" for s in plain)


@pytest.mark.slow
def test_adding_an_optimizer_keeps_the_other_runs_ids():
    before = {s.run_id for s in study(ROUND).specs}
    after = study(ROUND + '\n[[optimizers]]\nname = "keras:SGD"\nlearning_rate = 0.1\n').specs
    kept = {s.run_id for s in after if s.optimizer == "keras:Adam"}
    assert kept == before  # measured, round-targeted and the round's own runs alike
    assert len({s.run_id for s in after}) == 2 * len(before)
