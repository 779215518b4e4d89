"""The same instance everywhere: per model, data and seed, the initial weights are drawn once by
Keras's NumPy backend in a helper process (they do not depend on the framework that runs), with
their validation loss, the reference every run checks its loaded model against. Both are cached
in the results folder (study.sweep.cache), the split data arrays beside them.

`python -P -m study.train.models.initial REQUESTS` is the helper (KERAS_BACKEND=numpy); a sweep
asks for all its seeds at once (`prepare_initial`), a single run for its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np

from convergence_study.errors import InputError, failure_line
from study.output import check_kind
from study.sweep import cache
from study.sweep.fingerprint import manifest, python_files
from study.sweep.interpreter import QUIET_LOGS, python_command
from study.train.frameworks import model_library
from study.train.models.data import load_data
from study.train.models.examples import NATIVE_MODELS
from study.train.models.model import model_file
from study.train.run.native_optimizers import library_of
from study.train.sweep.spec import Spec

# |loaded - reference| <= RTOL * max(|reference|, 1): a mean over the validation rows summed in
# another order (or fused differently) moves by a few float32 roundings (~1e-7 relative per
# term), far below this; a wrong or shuffled weight moves it by percent.
RTOL = 1e-4
# The helper's bound where no run_timeout applies (a single `train` command); a sweep passes its
# run_timeout, and a run's own helper dies with the run. Said when it is met.
HELPER_TIMEOUT = 600.0


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
    with np.load(check_kind(folder / "arrays.npz")) as archive:
        return {name: archive[name] for name in archive.files}


def initial_key(spec, data: Path) -> dict:
    """The cache key of a spec's initial weights: everything they depend on."""
    path = model_file(spec.model)
    return {"model": spec.model, "model_file": file_digest(path) if path else None,
            "data": data.name, "loss": spec.loss, "seed": spec.seed,
            "code": manifest(python_files("study/train") + python_files("study/frameworks/keras"))}


def initial_folder(spec, cache_dir: Path, python: str = sys.executable,
                   timeout: float = HELPER_TIMEOUT) -> Path:
    """weights.npz and meta.json (the reference validation loss) for the spec's instance."""
    data = data_folder(spec.data, cache_dir)

    def make(folder: Path) -> None:
        answer = draw([request(spec, data, folder)], python, timeout)[0]
        if "error" in answer:
            raise InputError(answer["error"])
        if "failed" in answer:
            raise RuntimeError(f"the initial-weights helper failed: {answer['failed']}")

    return cache.entry(cache_dir, initial_key(spec, data), make)


def prepare_initial(specs, cache_dir: Path, python: str = sys.executable,
                    timeout: float = HELPER_TIMEOUT) -> None:
    """The initial weights every run of `specs` starts from, those not made yet, drawn by one
    helper process before a sweep's runs: one Keras start-up (about 4 s) instead of one per
    seed. A request that fails is left for its run to meet. A helper that does not finish in
    one run's time (`timeout`) is said and left: each run then draws its own weights."""
    cache_dir = Path(cache_dir)
    folders, wanted = {}, {}
    for spec in filter(None, map(keras_instance, specs)):
        name = json.dumps(spec.data, sort_keys=True, default=str)
        if name not in folders:
            try:
                folders[name] = data_folder(spec.data, cache_dir)
            except Exception:  # noqa: BLE001 - data that cannot load: its runs say so
                folders[name] = None
        if folders[name] is None:
            continue
        key = initial_key(spec, folders[name])
        if not (cache_dir / cache.key_digest(key) / "key.json").is_file():
            wanted.setdefault(cache.key_digest(key), (spec, folders[name], key))
    if not wanted:
        return
    batch = Path(tempfile.mkdtemp(prefix=".initial-", dir=cache_dir))
    try:
        outs = [batch / str(i) for i in range(len(wanted))]
        for out in outs:
            out.mkdir()
        try:
            answers = draw([request(spec, data, out) for (spec, data, _), out
                            in zip(wanted.values(), outs, strict=True)], python, timeout)
        except HelperTimeout as exc:
            print(f"{exc}; each run draws its own within its run_timeout", file=sys.stderr)
            return
        except (RuntimeError, OSError, subprocess.SubprocessError):  # no helper:
            return  # each run then draws its own and records what it meets
        for (_, _, key), out, answer in zip(wanted.values(), outs, answers, strict=True):
            if answer.get("ok"):
                cache.entry(cache_dir, key, moved_from(out))
    finally:
        shutil.rmtree(batch, ignore_errors=True)


def moved_from(made: Path):
    """A cache entry's `make` that moves in the files the helper wrote to `made`."""
    def make(folder: Path) -> None:
        for path in made.iterdir():
            os.replace(path, folder / path.name)

    return make


def keras_instance(spec: Spec) -> Spec | None:
    """The spec whose Keras-drawn weights a run starts from: its own for a Keras model (or a
    user's file), its Keras twin's for a shipped native example; None where none is drawn (a
    native optimizer, a given `initial`, a target still to be set)."""
    if spec.initial is not None or (spec.target.get("how") == "round"
                                    and spec.target.get("value") is None):
        return None
    if spec.model in NATIVE_MODELS:
        return replace(spec, model=spec.model.rsplit("-", 1)[0])
    return spec if library_of(spec.optimizer) in ("keras", "ours") else None


def request(spec, data: Path, out: Path) -> dict:
    return {"model": spec.model, "loss": spec.loss, "seed": spec.seed, "data": str(data),
            "out": str(out)}


class HelperTimeout(RuntimeError):
    pass


def draw(requests: list[dict], python: str, timeout: float = HELPER_TIMEOUT) -> list[dict]:
    """The helper's answer to each request: {"ok": true}, {"error": its one line} (bad input)
    or {"failed": one line} (anything else). RuntimeError where the helper itself failed,
    HelperTimeout where it did not finish in `timeout` seconds (it is killed)."""
    argv, env = python_command("-m", "study.train.models.initial", json.dumps(requests),
                               python=python, KERAS_BACKEND="numpy", CUDA_VISIBLE_DEVICES="-1",
                               **QUIET_LOGS)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        models = sorted({r["model"] for r in requests})
        raise HelperTimeout(f"the initial-weights helper (model {', '.join(models)}) did not "
                            f"finish within {timeout:g} s") from None
    lines = done.stdout.strip().splitlines()
    try:
        answers = json.loads(lines[-1])
        assert isinstance(answers, list) and len(answers) == len(requests)
    except (ValueError, IndexError, AssertionError):
        tail = [line for line in done.stderr.splitlines() if line.strip()]
        raise RuntimeError("the initial-weights helper failed"
                           + (f": {tail[-1][:300]}" if tail else "")) from None
    return answers


def read_initial(folder: Path) -> tuple[list[np.ndarray], dict]:
    meta = json.loads(check_kind(folder / "meta.json").read_text())
    with np.load(check_kind(folder / "weights.npz")) as archive:
        weights = [archive[f"w{i}"] for i in range(meta["n_weights"])]
    return weights, meta


def check_agrees(value: float, reference: float, gives: str, twin: str) -> None:
    """A loss at the drawn weights against the one Keras's NumPy backend gave (`gives` and
    `twin` name them): farther apart than float32 rounding, it is another instance."""
    if not abs(value - reference) <= RTOL * max(abs(reference), 1.0):  # NaN too
        raise InputError(f"{gives}, {twin} (Keras's NumPy backend) {reference:.9g}: more than "
                         f"float32 rounding ({RTOL:g}) apart; refusing to train a different "
                         "instance")


def main() -> None:
    answers = []
    for one in json.loads(sys.argv[1]):
        try:
            model_library().draw_initial(one, read_arrays(Path(one["data"])))
            answers.append({"ok": True})
        except InputError as exc:
            answers.append({"error": str(exc)})
        except Exception as exc:  # noqa: BLE001 - its run reports it; the other requests go on
            answers.append({"failed": failure_line(exc)})
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
