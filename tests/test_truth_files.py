"""Files and results folders (issue 51, part D): no command writes over a file it reads, nothing
in a results folder is written through a symlink, a FIFO or device given as an input is said by
its kind, a folder whose runs all failed says so, and progress lines tell runs apart."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from convergence_study.errors import InputError
from study.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
MODEL = "import keras\n\n\ndef build(shape, outputs):\n    return keras.Sequential([])\n"
TABULAR = """name = "t"
seeds = [0]
run_timeout = 60
[stopping]
max_iter = 30
[[datasets]]
name = "tabular"
path = "{path}"
features = ["a", "b"]
labels = ["y"]
[[optimizers]]
name = "gd"
[[backends]]
name = "numpy"
"""


def one_error_line(capsys, *words) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


def write_data(path: Path) -> Path:
    rows = [(0.1 * i, (i * 7) % 5 - 2.0) for i in range(40)]
    pd.DataFrame({"a": [a for a, _ in rows], "b": [b for _, b in rows],
                  "y": [2 * a - b + 0.01 * (i % 3) for i, (a, b) in enumerate(rows)]}) \
        .to_csv(path, index=False) if path.suffix == ".csv" else \
        pd.DataFrame({"a": [1.0, 2.0, 4.0], "b": [0.0, 1.0, 3.0], "y": [1.0, 2.0, 2.0]}) \
        .to_parquet(path)
    return path


def sweep(folder: Path, config: Path, *more) -> subprocess.CompletedProcess:
    """`study run` in a fresh process, from `folder` (a sweep's warm processes and locks)."""
    return subprocess.run([sys.executable, "-m", "study", "run", str(config), "--quiet", *more],
                          cwd=folder, capture_output=True, text=True, timeout=300)


# ---- no command writes over any of its inputs ------------------------------------------------

@pytest.mark.parametrize("model, out", [("m.py:build", "m.py"), ("m.py:build", "./sub/../m.py"),
                                        ("m.keras", "m.keras")])
def test_train_never_writes_over_its_model_file(tmp_path, capsys, monkeypatch, model, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    Path("m.py").write_text(MODEL)
    Path("m.keras").write_bytes(b"PK not really")
    write_data(tmp_path / "d.csv")
    before = Path(out).read_bytes()
    assert main(["train", "--model", model, "--data", "d.csv", "--features", "a", "b",
                 "--labels", "y", "--loss", "mse", "--target", "val_loss=0.1",
                 "--out", out]) == 2
    one_error_line(capsys, "--out", "which this command reads")
    assert Path(out).read_bytes() == before


def test_a_write_never_replaces_a_noted_input_whatever_flag_led_there(tmp_path):
    """The one net under every output flag: study.output.write_files_atomic refuses a file the
    command noted as read, by any name."""
    from study import output

    data = tmp_path / "d.csv"
    data.write_text("a,y\n1,2\n")
    (tmp_path / "alias.csv").symlink_to(data)
    output.inputs.clear()
    output.reading(data)
    try:
        for target in (data, tmp_path / "alias.csv", tmp_path / "." / "d.csv"):
            with pytest.raises(InputError, match="which this command reads"):
                output.write_text_atomic("x", target)
        output.write_text_atomic("x", tmp_path / "other.csv")  # anything else is written
    finally:
        output.inputs.clear()
    assert data.read_text() == "a,y\n1,2\n"
    assert (tmp_path / "other.csv").read_text() == "x"


def test_a_sweep_never_writes_its_tables_over_its_data(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("r").mkdir()
    data = write_data(tmp_path / "r" / "runs.parquet")
    before = data.read_bytes()
    Path("t.toml").write_text(TABULAR.format(path=data))
    assert main(["run", "t.toml", "--out", "r", "--quiet"]) == 2
    one_error_line(capsys, "--out", "runs.parquet", "which this command reads")
    assert data.read_bytes() == before and sorted(os.listdir("r")) == ["runs.parquet"]


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A small tabular sweep's results folder, r, beside its config and data."""
    folder = tmp_path_factory.mktemp("measured")
    write_data(folder / "d.csv")
    (folder / "tab.toml").write_text(TABULAR.format(path="d.csv"))
    done = sweep(folder, folder / "tab.toml", "--out", "r")
    assert done.returncode == 0, done.stderr
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tab.toml", "d.csv"])
def test_summarize_csv_never_writes_over_the_config_or_data_of_the_folder(measured, capsys,
                                                                         monkeypatch, name):
    monkeypatch.chdir(measured)
    before = Path(name).read_bytes()
    assert main(["summarize", "r", "--csv", name]) == 2
    one_error_line(capsys, "--csv", name, "which this command reads")
    assert Path(name).read_bytes() == before
    assert main(["summarize", "r", "--csv", "summary.csv"]) == 0  # elsewhere: written
    assert Path("summary.csv").is_file()


# ---- nothing in a results folder is written through a symlink --------------------------------

@pytest.mark.slow
def test_retry_failed_never_writes_a_log_through_a_symlink(measured, tmp_path):
    folder = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(measured), str(folder)], check=True)
    claim = folder / "r" / "study.json"  # the copy's config owns the copied folder
    claim.write_text(json.dumps({**json.loads(claim.read_text()),
                                 "source": str(folder / "tab.toml")}))
    rows = folder / "r" / "runs"
    run_id = next(p.name.split(".")[0] for p in rows.glob("*.parquet") if p.name.count(".") == 1)
    row = pd.read_parquet(rows / f"{run_id}.parquet")
    row.assign(status="error").to_parquet(rows / f"{run_id}.parquet")
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    log = folder / "r" / "logs" / f"{run_id}.log"
    log.unlink(missing_ok=True)
    log.symlink_to(outside)
    done = sweep(folder, folder / "tab.toml", "--out", "r", "--retry-failed")
    assert done.returncode == 2, done.stderr
    assert "is a symlink" in done.stderr and f"{run_id}.log" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert outside.read_text() == "keep me\n"


@pytest.mark.parametrize("name", [".lock", "logs", "logs/server-numpy.log", "runs"])
def test_a_symlink_in_a_results_folder_is_refused_before_anything_is_written(tmp_path, name):
    write_data(tmp_path / "d.csv")
    (tmp_path / "tab.toml").write_text(TABULAR.format(path="d.csv"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    target = outside if name in ("logs", "runs") else outside / "precious.txt"
    link = tmp_path / "r" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(target)
    done = sweep(tmp_path, tmp_path / "tab.toml", "--out", "r")
    assert done.returncode == 2, done.stderr
    assert f"'r/{name}' is a symlink" in done.stderr and "remove it" in done.stderr, done.stderr
    assert sorted(os.listdir(outside)) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "keep me\n"


def test_an_atomic_write_never_writes_through_a_link_left_at_its_temporary_name(tmp_path):
    from study.output import write_text_atomic

    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    target = tmp_path / "runs.parquet"
    (tmp_path / f".runs.parquet.tmp-{os.getpid()}").symlink_to(outside)
    write_text_atomic("new\n", target)
    assert outside.read_text() == "keep me\n" and target.read_text() == "new\n"
    assert not target.is_symlink()


# ---- a FIFO or device as an input is said by its kind ----------------------------------------

def special(tmp_path: Path, kind: str, name: str) -> Path:
    path = tmp_path / name
    if kind == "FIFO":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    return path


TRAIN = ["train", "--target", "val_loss=0.1", "--loss", "mse"]
SURFACES = {  # command line reading `p`, a special file of the given name
    "regress --path": ("z.csv", lambda p: ["regress", "--dataset", "tabular", "--path", p,
                                           "--features", "a", "--labels", "y"]),
    "regress --path parquet": ("z.parquet", lambda p: ["regress", "--dataset", "tabular",
                                                       "--path", p, "--features", "a",
                                                       "--labels", "y"]),
    "run CONFIG": ("z.toml", lambda p: ["run", p, "--dry-run"]),
    "feedmode --config": ("z.toml", lambda p: ["feedmode", "--config", p]),
    "train --data npz": ("z.npz", lambda p: [*TRAIN, "--model", "eve-mlp", "--data", p]),
    "train --data csv": ("z.csv", lambda p: [*TRAIN, "--model", "eve-mlp", "--data", p,
                                             "--features", "a", "--labels", "y"]),
    "train --model py": ("z.py", lambda p: [*TRAIN, "--model", p + ":build", "--data",
                                            "digits"]),
    "train --model keras": ("z.keras", lambda p: [*TRAIN, "--model", p, "--data", "digits"]),
    "train --initial": ("z.npz", lambda p: [*TRAIN, "--model", "eve-mlp-torch", "--data",
                                            "eve-late-week", "--initial", p]),
}


@pytest.mark.parametrize("kind, words", [("FIFO", "is a FIFO, not a regular file"),
                                         ("device", "is a character device, not a regular "
                                                    "file")])
@pytest.mark.parametrize("surface", SURFACES)
def test_a_fifo_or_device_given_as_an_input_is_refused_by_kind(tmp_path, capsys, kind, words,
                                                               surface):
    name, command = SURFACES[surface]
    path = special(tmp_path, kind, name)
    assert main(command(str(path))) == 2
    one_error_line(capsys, name, words)


def test_a_fifo_as_a_sweeps_data_file_is_refused_by_kind(tmp_path, capsys):
    path = special(tmp_path, "FIFO", "z.csv")
    (tmp_path / "t.toml").write_text(TABULAR.format(path=path))
    assert main(["run", str(tmp_path / "t.toml"), "--dry-run"]) == 2
    one_error_line(capsys, "z.csv' is a FIFO, not a regular file")


# ---- a folder whose runs all failed ----------------------------------------------------------

@pytest.mark.parametrize("status, words", [
    ("error", "failed (19 error)"), ("timeout", "failed (19 timeout)"),
    ("skipped", "failed or was skipped (18 skipped, 1 error)")])
def test_a_folder_whose_runs_all_failed_says_so_and_where_the_logs_are(results, capsys, status,
                                                                        words):
    folder = results / "results" / "regression"
    runs = pd.read_parquet(folder / "runs.parquet")
    assert len(runs) == 19
    runs.assign(status=[status] * 18 + ["error"] if status == "skipped" else status) \
        .to_parquet(folder / "runs.parquet")
    pd.read_parquet(folder / "traces.parquet").iloc[0:0].to_parquet(folder / "traces.parquet")
    assert main(["figures", "regression", "--results", str(folder),
                 "--out", str(results / "figs")]) == 2
    line = one_error_line(capsys, f"every run in '{folder}' {words}", str(folder / "logs"))
    assert "run again" not in line and not (results / "figs").exists()


# ---- progress lines name what tells runs apart -----------------------------------------------

def labels_of(raw: dict) -> list[str]:
    from study.sweep.dry_run import told_apart
    from study.sweep.grid import parse_study

    study = parse_study(raw, "t.toml")
    labels = told_apart(study.specs)
    return [labels[spec.run_id] for spec in study.specs]


@pytest.mark.parametrize("raw, axis", [
    ({"datasets": [{"name": "eve", "rows": 300, "standardize": [False, True]}]},
     "data_standardize"),
    ({"datasets": [{"name": "eve", "rows": [300, 400]}]}, "data_rows"),
    ({"datasets": [{"name": "eve", "rows": 300}],
      "optimizers": [{"name": "gd", "stopping": {"max_iter": 10}},
                     {"name": "gd", "stopping": {"max_iter": 20}}]}, "stop_max_iter"),
    ({"datasets": [{"name": "eve", "rows": 300}], "init": ["zeros", "normal"]}, "init"),
])
def test_every_axis_that_differs_between_runs_is_in_their_progress_lines(raw, axis):
    raw = {"name": "t", "seeds": [1], "optimizers": [{"name": "gd"}],
           "backends": [{"name": "numpy"}], **raw}
    labels = labels_of(raw)
    assert len(set(labels)) == len(labels), labels
    assert all(f"{axis}=" in label for label in labels), labels


@pytest.mark.slow
def test_a_sweeps_progress_lines_name_the_standardize_axis(tmp_path):
    (tmp_path / "s.toml").write_text(
        'name = "s"\nseeds = [1]\nrun_timeout = 60\n[stopping]\nmax_iter = 20\n'
        '[[datasets]]\nname = "eve"\nrows = 300\nstandardize = [false, true]\n'
        '[[optimizers]]\nname = "gd"\n[[backends]]\nname = "numpy"\n')
    done = sweep(tmp_path, tmp_path / "s.toml", "--out", "r")
    lines = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert len(lines) == 2, done.stdout + done.stderr
    assert sorted("data_standardize=True" in line for line in lines) == [False, True], lines


def test_a_fifo_or_link_as_a_run_file_is_set_aside_not_read(tmp_path):
    """A FIFO would hold the sweep forever; a link would read a file from anywhere as a row."""
    import signal

    from study.regression.plugin import SCHEMA
    from study.sweep.folder import ResultsFolder

    folder = ResultsFolder(tmp_path / "r", SCHEMA)
    folder.runs_dir.mkdir(parents=True)
    os.mkfifo(folder.row_path("0" * 16))
    (tmp_path / "row.parquet").write_bytes(b"")
    folder.row_path("1" * 16).symlink_to(tmp_path / "row.parquet")
    said = []
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("read a FIFO")))
    signal.alarm(30)
    try:
        assert folder.scan(report=said.append).empty
    finally:
        signal.alarm(0)
    assert sorted(p.name for p in folder.damaged_dir.iterdir()) == [f"{'0' * 16}.parquet",
                                                                   f"{'1' * 16}.parquet"]
    assert any("is a FIFO" in line for line in said) and any("symlink" in line for line in said)
