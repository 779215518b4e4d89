"""The train study's inputs that used to be accepted without a word or ended in a traceback
(issue 36), and its per-framework code as lookup tables (issue 35): each bad input is one line
on stderr, exit 2 and nothing written; a failure inside Keras or its framework is one line and
exit 1; what the study picked for the user (Keras's default learning rate) is said in the output
and the row. The fast tests refuse before Keras is imported; the slow ones run the command in a
fresh process (Keras picks its backend at import)."""

import io
import json
import os
import re
import socket
import subprocess
import sys
import tokenize
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.__main__ import main as cli
from study.sweep.grid import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SPARSE = "sparse_categorical_crossentropy"

MODELS = '''
import sys
import keras


def exits(shape, outputs):
    sys.exit(3)


def logits(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dense(outputs)])


def softmax(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dense(outputs, activation="softmax")])


def dropout(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape), keras.layers.Dense(8, activation="relu"),
                             keras.layers.Dropout(0.5),
                             keras.layers.Dense(outputs, activation="softmax")])


def batchnorm(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape), keras.layers.Dense(8),
                             keras.layers.BatchNormalization(),
                             keras.layers.Dense(outputs, activation="softmax")])


class Boom(keras.layers.Layer):
    def call(self, x, training=False):
        if training:
            raise ValueError("boom in a training step")
        return x


def fails_in_training(shape, outputs):
    return keras.Sequential([keras.Input(shape=shape), Boom(),
                             keras.layers.Dense(outputs, activation="softmax")])
'''


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Two-class data (.npz), the same with one class, and the models above."""
    folder = tmp_path_factory.mktemp("inputs")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 4)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    np.savez(folder / "ok.npz", x_train=x[:160], y_train=y[:160], x_val=x[160:], y_val=y[160:])
    (folder / "models.py").write_text(MODELS)
    (folder / "a_folder.npz").mkdir()
    (folder / "a_folder.keras").mkdir()
    os.mkfifo(folder / "fifo.npz")
    return folder


def refused(args, words: str, code: int = 2) -> None:
    """`study train ARGS` in this process: one line naming `words`, the code, nothing written."""
    out = Path(args[args.index("--out") + 1]) if "--out" in args else None
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        got = cli(["train", *args])
    text = err.getvalue().strip()
    assert got == code and len(text.splitlines()) == 1 and words in text, text
    assert out is None or not out.exists()


def base(files, tmp_path, *more):
    return ["--model", f"{files}/models.py:softmax", "--data", str(files / "ok.npz"), "--loss",
            SPARSE, "--out", str(tmp_path / "row.parquet"), *more]


# ---- refused before Keras is imported ------------------------------------------------------------

@pytest.mark.parametrize("more, words", [
    (["--target", "val_loss=0.1", "--loop", "fit", "--optimizer", "lbfgs"],
     "--loop fit times Keras's model.fit, which cannot run lbfgs"),
    (["--target", "val_loss=0.1", "--loop", "fit", "--max-steps", "2"],
     "--loop fit needs --max-steps of at least 3"),
    (["--target", "val_loss=0.1", "--optimizer", "lbfgs", "--batch-size", "32"],
     "lbfgs takes a full batch"),
    (["--target", "val_accuracy=2"], "val_accuracy 2 is outside [0, 1]"),
    (["--target", "val_loss=-1"], f"val_loss -1 is below 0, which {SPARSE} never goes"),
    (["--target", "val_loss=0.1", "--features", "a", "b"], "unknown key 'features' (a .npz"),
    (["--target", "val_loss=0.1", "--data-param", "validation_fraction=0.3"],
     "unknown key 'validation_fraction' (a .npz"),
    (["--target", "val_loss=0.1", "--backend", "mxnet"], "--backend: unknown 'mxnet'"),
])
def test_meaningless_options_are_refused_in_one_line(files, tmp_path, more, words):
    refused(base(files, tmp_path, *more), words)


@pytest.mark.parametrize("flag, name, words", [
    ("--data", "a_folder.npz", "is a directory, not a regular file"),
    ("--data", "fifo.npz", "is a FIFO, not a regular file"),
    ("--model", "a_folder.keras", "is a directory, not a regular file"),
    ("--cache", "ok.npz", "is a file, not a folder"),
])
def test_a_file_of_the_wrong_kind_is_one_line(files, tmp_path, flag, name, words):
    args = base(files, tmp_path, "--target", "val_loss=0.1")
    if flag in args:
        args[args.index(flag) + 1] = str(files / name)
    else:
        args += [flag, str(files / name)]
    refused(args, words)


def test_a_framework_without_a_train_adapter_is_refused(monkeypatch):
    from study.frameworks import registry
    from study.train.frameworks import check_framework, keras_frameworks, trainable

    # derived from the registry, not a second list
    assert trainable() == tuple(n for n, f in registry.FRAMEWORKS.items() if f.train)
    assert set(keras_frameworks()) <= set(trainable())
    monkeypatch.setitem(registry.FRAMEWORKS, "cupy2", replace(
        registry.FRAMEWORKS["jax"], name="cupy2", title="CuPy2", train=None))
    with pytest.raises(InputError, match="--backend: the train study runs Keras models, and Keras "
                                         "has no CuPy2 backend; allowed: tensorflow, jax, torch"):
        check_framework("cupy2", "--backend")


FRAMEWORK_WORDS = re.compile(r"(?<![a-z])(tensorflow|tf|jax|jnp|optax|equinox|eqx|flax|nnx|torch|"
                             r"pytorch)(?![a-z])", re.IGNORECASE)


def frameworks_named(path: Path) -> set[str]:
    """The frameworks (and their libraries) a file names in code: in a name or a string, not in
    a docstring or a comment."""
    tokens = list(tokenize.generate_tokens(io.StringIO(path.read_text()).readline))
    found = set()
    for i, token in enumerate(tokens):
        if token.type == tokenize.STRING:
            before = [t for t in tokens[:i] if t.type not in (tokenize.NL, tokenize.COMMENT,
                                                              tokenize.INDENT, tokenize.DEDENT)]
            after = tokens[i + 1] if i + 1 < len(tokens) else None
            alone = not before or before[-1].type == tokenize.NEWLINE or before[-1].string == ":"
            if alone and (after is None or after.type in (tokenize.NEWLINE, tokenize.ENDMARKER)):
                continue  # a docstring
        if token.type in (tokenize.NAME, tokenize.STRING) or token.type == getattr(
                tokenize, "FSTRING_MIDDLE", None):
            found |= {m.group(1).lower() for m in FRAMEWORK_WORDS.finditer(token.string)}
    return found


def test_a_framework_is_named_in_its_adapter_only():
    """Issue 42 item 1, issue 52 item 1: each framework's train knowledge lives in its adapter
    module in its own folder (study/frameworks/<name>/train.py, named by its registry entry and
    read through study.train.frameworks), its shipped native examples beside it (examples.py). So
    no module of the train study names a framework, and a new one touches none of them."""
    from study.train.frameworks import adapter, keras_frameworks, trainable
    from study.train.run import flat

    train = ROOT / "study" / "train"
    naming = {str(p.relative_to(train)): frameworks_named(p) for p in sorted(train.rglob("*.py"))}
    naming = {name: words for name, words in naming.items() if words}
    assert naming == {}, naming
    folders = ROOT / "study" / "frameworks"
    assert {str(p.relative_to(folders)) for p in folders.rglob("*.py") if frameworks_named(p)} >= {
        "jax/train.py", "tensorflow/train.py", "torch/train.py", "jax/examples.py",
        "torch/examples.py"}
    for name in trainable():
        own = adapter(name)
        assert callable(own.flat_value_and_grad) and callable(own.gpu_seen), name
        if name in keras_frameworks():  # the Keras path's pieces
            assert all(callable(getattr(own, m)) for m in ("warm", "scope", "placed",
                                                           "keras_stepper")), name
        if own.LIBRARY:  # native models and optimizers
            assert all(callable(getattr(own, m)) for m in ("module_kind", "workload",
                                                           "submission")), name
    with pytest.raises(InputError, match="lbfgs's flat objective has no code for the framework "
                                         "'cupy'"):
        flat.framework_value_and_grad("cupy")
    trainers = (folders / "keras" / "train.py").read_text()
    assert "study.frameworks.numpy.backend" not in trainers  # through the registry


def test_lbfgs_is_one_submission_over_one_flat_objective_for_every_model():
    """Issue 42 item 1: a Keras model's L-BFGS is the native models' submission
    (study.train.models.workload.LbfgsSubmission) stepped by the same WorkloadStepper, and each
    framework's flat value_and_grad is written once (its adapter's), called by the Keras path
    and by the native workloads alike."""
    from types import SimpleNamespace

    import keras

    from study.frameworks.keras.train import loss_object, make_trainer
    from study.train.models.workload import LbfgsSubmission, WorkloadStepper
    from study.train.run.loop import Target, epoch_batches, run_loop

    train = ROOT / "study" / "train"
    sources = {str(p.relative_to(train)): p.read_text() for p in train.rglob("*.py")}
    assert [n for n, s in sources.items() if "LBFGS(" in s] == ["models/workload.py"]
    assert [n for n, s in sources.items() if "class _Objective" in s] == ["models/workload.py"]
    adapters = {name: (ROOT / "study" / "frameworks" / name / "train.py").read_text()
                for name in ("jax", "tensorflow", "torch")}
    assert not [n for n, s in sources.items() if "def flat_value_and_grad(weights" in s]
    assert all("def flat_value_and_grad(weights" in s for s in adapters.values())
    assert all("return flat_value_and_grad(self." in adapters[n]
               for n in ("jax", "torch"))  # their workloads' too
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3)).astype(np.float32)
    y = (x @ np.array([1.0, -2.0, 0.5], np.float32))[:, None]
    arrays = {"x_train": x[:32], "y_train": y[:32], "x_val": x[32:], "y_val": y[32:]}
    model = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
    spec = SimpleNamespace(optimizer="lbfgs", hyperparameters={}, loss="mse")
    trainer = make_trainer(model, spec, loss_object("mse"), "mae", arrays)
    stepper = trainer.stepper(arrays, epoch_batches(32, 0, 0)[0])
    assert isinstance(stepper, WorkloadStepper)
    assert isinstance(stepper.submission, LbfgsSubmission)
    before = [np.array(w) for w in model.get_weights()]
    record, _ = run_loop(stepper, lambda: {"val_loss": 1.0}, max_steps=3, eval_every=3,
                         target=Target("val_loss", None, "min"))
    stepper.write_back()  # the iterate into the model's variables, as an evaluation reads it
    assert record["steps"] == 3 and record["train_loss"] < 0.5 * float(np.mean(y[:32] ** 2))
    assert not np.array_equal(model.get_weights()[0], before[0])
    assert trainer.record()["loss_evaluations"] > 3


def test_the_test_knob_left_the_spec_schema_and_config():
    from study.train.sweep.schema import SCHEMA
    from study.train.sweep.spec import Spec

    text = json.dumps({"study": "t", "model": "eve-mlp", "data": {"name": "eve-late-week"},
                       "loss": "mse", "metric": "mae", "optimizer": "lbfgs",
                       "hyperparameters": {}, "backend": "jax", "batch_size": 0,
                       "eval_every": 0, "target": {}, "seed": 0, "eval_sleep": 0.0})
    assert not hasattr(Spec.from_json(text), "eval_sleep")  # an older row's spec still reads
    assert SCHEMA.kind_of("eval_sleep") is None


# ---- the config ----------------------------------------------------------------------------------

CONFIG = """
kind = "train"
name = "t"
backends = ["jax"]
[[problems]]
model = "digits-cnn"
data = { name = "digits" }
loss = "sparse_categorical_crossentropy"
metric = "accuracy"
batch_size = 64
target = TARGET
[[optimizers]]
name = "keras:Adam"
learning_rate = 0.01
"""


def specs(text: str):
    import tomllib

    from study.train.sweep.config import expand_specs

    return expand_specs(tomllib.loads(text), "t.toml", "t", 1)


@pytest.mark.parametrize("target, words", [
    ('{ metric = "val_loss", value = 0.3, mode = "max" }', "mode must be min for val_loss"),
    ('{ metric = "val_accuracy", value = 2 }', r"val_accuracy 2 is outside \[0, 1\]"),
    ('{ metric = "val_loss", value = -1 }', "is below 0"),
])
def test_a_target_the_metric_cannot_reach_is_refused(target, words):
    with pytest.raises(ConfigError, match=words):
        specs(CONFIG.replace("TARGET", target))
    assert specs(CONFIG.replace("TARGET", '{ metric = "val_accuracy", value = 0.9 }'))


def test_a_repeated_optimizer_block_and_the_old_test_knob_are_refused():
    text = CONFIG.replace("TARGET", '{ metric = "val_loss", value = 0.3 }')
    with pytest.raises(ConfigError, match="keras:Adam with .* is given twice"):
        specs(text + '[[optimizers]]\nname = "keras:Adam"\nlearning_rate = 0.01\n')
    with pytest.raises(ConfigError, match="unknown key 'eval_sleep'|eval_sleep"):
        specs(text.replace("batch_size = 64", "batch_size = 64\neval_sleep = 0.5"))


def test_a_label_that_is_also_a_feature_is_refused_as_regress_refuses_it(tmp_path):
    """Issue 43 case 4: the label as a feature is its own answer (any target "reached");
    the command and a config refuse it in regress's words, before anything is read."""
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n1,2,0\n2,1,1\n3,5,0\n4,4,1\n5,0,0\n")
    refused(["--model", "eve-mlp-torch", "--data", str(data), "--features", "a", "y",
             "--labels", "y", "--loss", "binary_crossentropy", "--target", "val_loss=0.3",
             "--out", str(tmp_path / "row.parquet")],
            "--data: column 'y' is both a feature and a label")
    text = CONFIG.replace("TARGET", '{ metric = "val_loss", value = 0.3 }').replace(
        'data = { name = "digits" }',
        f'data = {{ path = "{data}", features = ["a", "y"], labels = "y" }}')
    with pytest.raises(ConfigError, match="data: column 'y' is both a feature and a label"):
        specs(text)
    assert specs(text.replace('["a", "y"]', '["a", "b"]').replace("batch_size = 64",
                                                                "batch_size = 2"))


# ---- data and the model's outputs against the loss -----------------------------------------------

@pytest.mark.parametrize("kind, words", [
    ("csv", "x_train holds 1e+300 in column 'b', beyond the range of float32"),
    ("parquet", "x_val holds -1e+300 in column 'b', beyond the range of float32"),
    ("npz", "x_train holds 1e+300 at index (7, 1), beyond the range of float32"),
    ("npz-labels", "y_train holds -1e+200 at index 3, beyond the range of float32"),
])
def test_data_beyond_float32_is_refused_before_the_run(tmp_path, kind, words):
    """Issue 43 case 6: finite in float64, inf in the run's float32 cast, recorded as diverged
    with exit 0; now one line naming the array and column (or index), from the command and
    from the sweep's data cache alike."""
    from study.train.models.initial import data_folder

    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 3))
    y = (x[:, 0] > 0).astype(float)
    if kind.startswith("npz"):
        data = tmp_path / "d.npz"
        if kind == "npz":
            x[7, 1] = 1e300
        else:
            y[3] = -1e200
        np.savez(data, x_train=x[:40], y_train=y[:40], x_val=x[40:], y_val=y[40:])
        more = ["--loss", "mse", "--metric", "mae"]
        table = {"path": str(data)}
    else:
        frame = pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": y})
        order = np.random.default_rng(0).permutation(50)  # the split's: row 0 trains, the last
        frame.loc[order[0] if kind == "csv" else order[-1], "b"] = 1e300 if kind == "csv" \
            else -1e300
        data = tmp_path / f"d.{kind}"
        frame.to_csv(data, index=False) if kind == "csv" else frame.to_parquet(data)
        more = ["--features", "a", "b", "c", "--labels", "y", "--loss", "binary_crossentropy"]
        table = {"path": str(data), "features": ["a", "b", "c"], "labels": "y"}
    refused(["--model", "eve-mlp-torch", "--data", str(data), *more, "--target",
             "val_loss=0.3", "--out", str(tmp_path / "row.parquet")], words)
    with pytest.raises(InputError, match=re.escape(words)):
        data_folder(table, tmp_path / "cache")


def test_data_within_float32_passes_in_any_float_dtype(tmp_path):
    from study.train.models.data import load_data

    big = np.full((10, 2), 3e38)
    np.savez(tmp_path / "d.npz", x_train=big, y_train=np.zeros(10),
             x_val=np.ones((10, 2), np.float16), y_val=np.zeros(10, np.float32))
    arrays = load_data({"path": str(tmp_path / "d.npz")})
    assert arrays["x_train"].dtype == np.float32 and np.isfinite(arrays["x_train"]).all()


def test_labels_of_one_class_and_a_single_value_array_are_refused(tmp_path):
    from study.train.models.data import load_data
    from study.train.models.model import outputs_for

    with pytest.raises(InputError, match="all one class"):
        outputs_for(SPARSE, np.zeros(20), np.zeros(5), "data")
    with pytest.raises(InputError, match="all one class"):
        outputs_for("binary_crossentropy", np.ones(20), np.zeros(5), "data")
    with pytest.raises(InputError, match="one column per class"):
        outputs_for("categorical_crossentropy", np.arange(10) % 2, np.ones(5), "data")
    assert outputs_for(SPARSE + ":from_logits", np.arange(20) % 3, np.zeros(5), "data") == 3
    rng = np.random.default_rng(0)
    ok = {"x_train": rng.normal(size=(20, 3)), "y_train": np.arange(20) % 2,
          "x_val": rng.normal(size=(5, 3)), "y_val": np.arange(5) % 2}
    for name, value, words in [("x_train", np.array(3.0), "x_train is a single value"),
                               ("x_train", np.ones((1, 3)), "x_train has one row")]:
        np.savez(tmp_path / "d.npz", **{**ok, name: value,
                                        **({"y_train": np.zeros(1)} if len(np.shape(value))
                                           else {})})
        with pytest.raises(InputError, match=words):
            load_data({"path": str(tmp_path / "d.npz")})


def test_outputs_that_are_not_probabilities_are_refused_naming_the_fix():
    from study.train.models.model import check_outputs

    logits = np.array([[-1.2, 2.9], [0.3, 0.1]])
    with pytest.raises(InputError, match=f"end the model with a softmax, or give the loss as "
                                         f"'{SPARSE}:from_logits'"):
        check_outputs(SPARSE, logits, "model 'm'")
    with pytest.raises(InputError, match="a sigmoid"):
        check_outputs("binary_crossentropy", np.array([[1.5], [0.2]]), "model 'm'")
    check_outputs(SPARSE, np.array([[0.2, 0.8], [0.5, 0.5]]), "model 'm'")  # probabilities
    check_outputs(SPARSE + ":from_logits", logits, "model 'm'")  # logits, said so
    check_outputs("mse", logits, "model 'm'")  # any values


# ---- the engine: older code noted, a dry run's time estimate -------------------------------------

def test_a_folder_measured_by_older_code_is_noted():
    from study.results import changed_since, older_code_note
    from study.sweep.fingerprint import manifest

    now = manifest(["study/train/run/loop.py"])["study/train/run/loop.py"]
    versions = {"study/train/run/loop.py": {now}, "study/train/sweep/spec.py": {"0" * 16},
                "study/train/gone.py": {"1" * 16}}
    changed = changed_since(versions)
    assert changed == ("study/train/gone.py", "study/train/sweep/spec.py")
    note = older_code_note(changed, "results/train")
    assert ("measured by older code, study/train/gone.py, study/train/sweep/spec.py now differ"
            in note)
    assert older_code_note((), "results/train") == ""


def test_a_dry_run_estimates_the_time_from_this_machines_past_runs(tmp_path, capsys):
    from study.sweep.grid import load_study

    config = tmp_path / "t.toml"
    config.write_text(CONFIG.replace("TARGET", '{ metric = "val_loss", value = 0.3 }'))
    study = load_study(str(config))
    out = tmp_path / "results"
    out.mkdir()
    first = study.specs[0]
    pd.DataFrame([{"run_id": first.run_id, "spec": first.to_json(), "wall_seconds": 120.0,
                   "worker_host": socket.gethostname()},
                  {"run_id": "elsewhere", "spec": "{}", "wall_seconds": 9999.0,
                   "worker_host": "another-machine"}]).to_parquet(out / "runs.parquet")
    assert cli(["run", str(config), "--dry-run", "--out", str(out)]) == 0
    text = " ".join(line.strip() for line in capsys.readouterr().out.splitlines())  # wrapped
    assert len(study.specs) == 1 and "time estimate: about 2 min for 1 runs" in text, text
    assert cli(["run", str(config), "--dry-run", "--out", str(tmp_path / "none")]) == 0
    assert "time estimate: none measured yet (no past runs of this machine" in " ".join(
        line.strip() for line in capsys.readouterr().out.splitlines())


# ---- in a fresh process, with Keras -------------------------------------------------------------

def train(files, tmp_path, *args):
    """`python -m study train` in a fresh process: (code, stderr, stdout, the row or None)."""
    out = tmp_path / "row.parquet"
    loss = [] if "--loss" in args else ["--loss", SPARSE]
    done = subprocess.run([sys.executable, "-m", "study", "train", "--data", str(files / "ok.npz"),
                           *loss, *args, "--out", str(out)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    row = pd.read_parquet(out).iloc[0] if out.exists() else None
    return done.returncode, done.stderr.strip(), done.stdout, row


@pytest.mark.slow
@pytest.mark.parametrize("model, args, words", [
    ("exits", [], "failed to build: SystemExit: 3"),
    ("logits", ["--backend", "tensorflow"], f"but {SPARSE} expects probabilities: end the model "
                                             f"with a softmax, or give the loss as '{SPARSE}"
                                             ":from_logits'"),
    ("logits", ["--backend", "jax"], f"but {SPARSE} expects probabilities"),
    ("dropout", ["--optimizer", "lbfgs", "--backend", "jax"],
     "lbfgs needs a deterministic training objective, but the model has Dropout"),
    ("batchnorm", ["--optimizer", "lbfgs", "--backend", "torch"],
     "the model has BatchNormalization"),
    ("softmax", ["--batch-size", "1000000000000"], "is more than the 160 training rows"),
    ("softmax", ["--target", "val_loss=5"], "the initial weights already meet the target"),
])
def test_what_used_to_train_or_end_in_a_traceback_is_one_line(files, tmp_path, model, args,
                                                               words):
    target = [] if "--target" in args else ["--target", "val_loss=0.1"]
    code, err, _, row = train(files, tmp_path, "--model", f"{files}/models.py:{model}",
                              "--max-steps", "5", *target, *args)
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert row is None


@pytest.mark.slow
def test_a_failure_inside_keras_is_one_line_and_exit_1(files, tmp_path):
    code, err, _, row = train(files, tmp_path, "--model", f"{files}/models.py:fails_in_training",
                              "--target", "val_loss=0.1", "--max-steps", "5")
    assert code == 1 and len(err.splitlines()) == 1 and "boom in a training step" in err, err
    assert row is None


@pytest.mark.slow
def test_logits_train_with_from_logits_and_a_default_rate_is_said(files, tmp_path):
    code, err, out, row = train(files, tmp_path, "--model", f"{files}/models.py:logits",
                                "--loss", f"{SPARSE}:from_logits", "--optimizer", "keras:SGD",
                                "--target", "val_loss=0.01", "--max-steps", "20")
    assert code == 0, err
    assert "learning_rate 0.01 (Keras's default for SGD: none was given)" in out
    assert row["default_learning_rate"] == pytest.approx(0.01) and row["steps"] == 20
    assert row["loss"] == f"{SPARSE}:from_logits" and np.isfinite(row["train_loss"])


@pytest.mark.slow
def test_a_sweeps_seeds_are_drawn_by_one_helper_as_each_alone_would_be(files, tmp_path,
                                                                       monkeypatch):
    from study.train.models import initial
    from study.train.sweep.spec import Spec

    calls = []
    draw = initial.draw
    monkeypatch.setattr(initial, "draw", lambda requests, python, timeout: calls.append(
        requests) or draw(requests, python, timeout))
    data = {"path": str(files / "ok.npz")}
    target = {"metric": "val_loss", "value": 0.1, "mode": "min", "how": "given"}

    def spec(model, seed, optimizer="keras:Adam"):
        return Spec("t", model, data, SPARSE, "accuracy", optimizer, {}, "jax", 32, 0, target,
                    seed)

    softmax, exits = f"{files}/models.py:softmax", f"{files}/models.py:exits"
    specs = [spec(softmax, 0), spec(softmax, 1), spec(softmax, 0, "lbfgs"), spec(exits, 0),
             spec(softmax, 2, "torch:Adam")]  # the last is no Keras model's: nothing to draw
    batch, alone = tmp_path / "batch", tmp_path / "alone"
    initial.prepare_initial(specs, batch)
    assert [[(r["model"], r["seed"]) for r in requests] for requests in calls] == [
        [(softmax, 0), (softmax, 1), (exits, 0)]]  # one helper; a seed's two runs share it
    assert not list(batch.glob(".initial-*"))  # the helper's folder is gone
    made = [initial.read_initial(initial.initial_folder(spec(softmax, seed), batch))
            for seed in (0, 1)]
    assert len(calls) == 1  # both were made: no helper started
    assert len(list(batch.glob("*/weights.npz"))) == 2  # the failure left to its run
    assert made[0][1]["reference_val_loss"] != made[1][1]["reference_val_loss"]
    # the second of a batch is drawn as it is alone (the seed resets every generator)
    by_itself, its_meta = initial.read_initial(initial.initial_folder(spec(softmax, 1), alone))
    assert all(np.array_equal(a, b) for a, b in zip(made[1][0], by_itself, strict=True))
    assert made[1][1]["reference_val_loss"] == its_meta["reference_val_loss"]


def test_the_initial_weights_helper_is_bound_by_the_run_timeout(files, tmp_path, capsys):
    """A model file that never finishes importing: the sweep's helper is killed at the study's
    run_timeout (here 1 s), said, and nothing is cached (each run then meets it in its own
    run_timeout), instead of a hidden wait of ten minutes before the first run."""
    from study.train.models import initial
    from study.train.sweep.spec import Spec

    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(3600)\n")
    target = {"metric": "val_loss", "value": 0.1, "mode": "min", "how": "given"}
    spec = Spec("t", f"{tmp_path}/hangs.py:model", {"path": str(files / "ok.npz")}, SPARSE,
                "accuracy", "keras:Adam", {}, "jax", 32, 0, target, 0)
    initial.prepare_initial([spec], tmp_path / "cache", timeout=1)
    err = capsys.readouterr().err
    assert "initial-weights helper (model" in err and "did not finish within 1 s" in err, err
    assert not list((tmp_path / "cache").glob("*/weights.npz"))


@pytest.mark.slow
def test_a_sweep_whose_model_never_imports_is_bound_by_its_run_timeout(files, tmp_path):
    """End to end: `run_timeout = 8`, a model file that sleeps at import: the helper and every
    run end at that bound (recorded timeout), not at a hidden one."""
    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(3600)\n")
    config = tmp_path / "t.toml"
    config.write_text(f"""kind = "train"
name = "t"
run_timeout = 8
backends = ["jax"]
[[problems]]
model = "{tmp_path}/hangs.py:model"
data = {{ path = "{files / 'ok.npz'}" }}
loss = "{SPARSE}"
metric = "accuracy"
batch_size = 32
target = {{ metric = "val_loss", value = 0.1 }}
[[optimizers]]
name = "lbfgs"
""")  # our L-BFGS: a Keras optimizer's config check (a child of 3.8 s, bound by the same
    # run_timeout) would make the test's outcome depend on the machine's speed
    done = subprocess.run([sys.executable, "-m", "study", "run", str(config), "--out",
                           str(tmp_path / "r"), "--quiet"], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert "did not finish within 8 s" in done.stderr, done.stderr
    assert set(pd.read_parquet(tmp_path / "r" / "runs.parquet")["status"]) == {"timeout"}
