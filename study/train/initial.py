"""The same instance everywhere: per model, data and seed, the initial weights are made once,
by Keras's NumPy backend in a helper process, and every framework and optimizer loads them.

Keras's NumPy backend draws its initializers with NumPy's own generator, so the weights do not
depend on which framework runs; the helper also computes the validation loss of those weights
(the reference every run checks its loaded model against, to float32 rounding, before it
trains). Both are cached in the results folder (study.sweep.cache), keyed by the model (and its
file's content), the data, the loss and the seed; the data arrays are cached beside them, so
every run of a sweep reads the same arrays, split once.

`python -P -m study.train.initial REQUEST` is the helper (KERAS_BACKEND=numpy); it answers one
JSON line, {"ok": true} or {"error": "one line"}.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

from datasets.errors import InputError
from study.sweep import cache
from study.sweep.fingerprint import manifest, python_files
from study.sweep.interpreter import python_command
from study.train.data import load_data
from study.train.model import build, check_outputs, loss_object, model_file, outputs_for

# |loaded - reference| <= RTOL * max(|reference|, 1): a mean over the validation rows summed in
# another order (or fused differently) moves by a few float32 roundings (~1e-7 relative per
# term), far below this; a wrong or shuffled weight moves it by percent.
RTOL = 1e-4


def file_digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def data_key(data: dict) -> dict:
    key = {"data": data, "code": manifest(python_files("study/train") + python_files("datasets"))}
    if "path" in data:
        key["file"] = file_digest(data["path"])  # the user's file: its content
    return key


def data_folder(data: dict, cache_dir: Path) -> Path:
    """The split arrays of a data table, made once per sweep (arrays.npz)."""

    def make(folder: Path) -> None:
        np.savez(folder / "arrays.npz", **load_data(data))

    return cache.entry(cache_dir, data_key(data), make)


def read_arrays(folder: Path) -> dict[str, np.ndarray]:
    with np.load(folder / "arrays.npz") as archive:
        return {name: archive[name] for name in archive.files}


def initial_folder(spec, cache_dir: Path, python: str = sys.executable) -> Path:
    """weights.npz (w0, w1, ... in get_weights order) and meta.json (reference_val_loss,
    outputs, input_shape) for the spec's model, data, loss and seed."""
    data = data_folder(spec.data, cache_dir)
    path = model_file(spec.model)
    key = {"model": spec.model, "model_file": file_digest(path) if path else None,
           "data": data.name, "loss": spec.loss, "seed": spec.seed,
           "code": manifest(python_files("study/train"))}

    def make(folder: Path) -> None:
        request = json.dumps({"model": spec.model, "loss": spec.loss, "seed": spec.seed,
                              "data": str(data), "out": str(folder)})
        argv, env = python_command("-m", "study.train.initial", request, python=python,
                                   KERAS_BACKEND="numpy", CUDA_VISIBLE_DEVICES="-1",
                                   TF_CPP_MIN_LOG_LEVEL="3")
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
        lines = done.stdout.strip().splitlines()
        try:
            answer = json.loads(lines[-1])
        except (ValueError, IndexError):
            tail = [line for line in done.stderr.splitlines() if line.strip()]
            raise RuntimeError("the initial-weights helper failed"
                               + (f": {tail[-1][:300]}" if tail else "")) from None
        if "error" in answer:
            raise InputError(answer["error"])

    return cache.entry(cache_dir, key, make)


def read_initial(folder: Path) -> tuple[list[np.ndarray], dict]:
    meta = json.loads((folder / "meta.json").read_text())
    with np.load(folder / "weights.npz") as archive:
        weights = [archive[f"w{i}"] for i in range(meta["n_weights"])]
    return weights, meta


def validation_loss(model, loss, x_val, y_val) -> float:
    """The mean loss over the validation rows, in one call (any backend)."""
    import keras

    return float(keras.ops.convert_to_numpy(loss(y_val, model(x_val, training=False))))


def agrees(value: float, reference: float) -> bool:
    return abs(value - reference) <= RTOL * max(abs(reference), 1.0)


def _helper(request: dict) -> None:
    """In the helper process (KERAS_BACKEND=numpy): build, seed, draw, evaluate, save."""
    import keras

    assert keras.backend.backend() == "numpy", keras.backend.backend()
    arrays = read_arrays(Path(request["data"]))
    loss = loss_object(request["loss"])
    outputs = outputs_for(request["loss"], arrays["y_train"], arrays["y_val"], "data")
    input_shape = arrays["x_train"].shape[1:]
    keras.utils.set_random_seed(request["seed"])
    model = build(request["model"], input_shape, outputs)
    if model_file(request["model"]) is not None and request["model"].endswith(".keras"):
        model = keras.models.clone_model(model)  # fresh weights from its initializers
        model.build((None, *input_shape))
    weights = model.get_weights()
    out = Path(request["out"])
    np.savez(out / "weights.npz", **{f"w{i}": w for i, w in enumerate(weights)})
    check_outputs(request["loss"], keras.ops.convert_to_numpy(model(arrays["x_val"][:256],
                                                                    training=False)),
                  f"model '{request['model']}'")
    reference = validation_loss(model, loss, arrays["x_val"], arrays["y_val"])
    (out / "meta.json").write_text(json.dumps({
        "reference_val_loss": reference, "outputs": outputs, "input_shape": list(input_shape),
        "n_weights": len(weights), "parameters": int(sum(w.size for w in weights)),
        "keras_version": keras.__version__}))


def main() -> None:
    request = json.loads(sys.argv[1])
    try:
        _helper(request)
    except InputError as exc:
        print(json.dumps({"error": str(exc)}))
        return
    print(json.dumps({"ok": True}))


if __name__ == "__main__":
    main()
