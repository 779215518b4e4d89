"""Failed writes and unusable output paths (issue 17): a write that fails part-way (a full disk)
leaves the old file or nothing, says which file in one line and exits 1; an --out that cannot
be what the command writes is refused before any work, in one line, exit 2."""

import errno
import os
import stat
from pathlib import Path

import matplotlib.figure
import pandas as pd
import pytest

from study.__main__ import main
from study.output import ResultsWriteError, write_files_atomic


@pytest.fixture
def full_disk(monkeypatch):
    """`full_disk("name")`: writing the file `name` writes half of it, then fails ENOSPC."""

    def fail_on(name):
        def wrap(original):
            def write(self, *args, **kwargs):
                result = original(self, *args, **kwargs)
                path = self if isinstance(self, Path) else args[0]
                if os.path.basename(str(path)).startswith(f".{name}.tmp-"):
                    data = open(path, "rb").read()
                    open(path, "wb").write(data[: len(data) // 2])
                    raise OSError(errno.ENOSPC, "No space left on device")
                return result
            return write

        for cls, method in ((pd.DataFrame, "to_parquet"), (matplotlib.figure.Figure, "savefig"),
                            (Path, "write_text")):
            monkeypatch.setattr(cls, method, wrap(getattr(cls, method)))

    return fail_on


def contents(folder):
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def one_error_line(capsys, *words):
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err
    return lines[0]


REGRESS = ["regress", "--dataset", "synthetic", "--rows", "200", "--optimizer", "lbfgs"]


@pytest.mark.parametrize("failing", ["r.parquet", "r.trace.parquet"])
def test_regress_on_a_full_disk_keeps_the_old_record_and_trace(tmp_path, capsys, full_disk,
                                                                failing):
    out = tmp_path / "r.parquet"
    assert main([*REGRESS, "--out", str(out)]) == 0
    before = contents(tmp_path)
    capsys.readouterr()
    full_disk(failing)
    assert main([*REGRESS, "--seed", "1", "--init", "normal", "--out", str(out)]) == 1
    one_error_line(capsys, failing, "No space left on device")
    assert contents(tmp_path) == before  # both old files, byte for byte, and no temporary


def test_regress_on_a_full_disk_into_a_new_folder_leaves_nothing(tmp_path, capsys, full_disk):
    full_disk("r.parquet")
    assert main([*REGRESS, "--out", str(tmp_path / "new" / "sub" / "r.parquet")]) == 1
    one_error_line(capsys, "r.parquet")
    assert not list(tmp_path.iterdir())  # no trace without its record, no folder made for them



@pytest.mark.slow
def test_figures_on_a_full_disk_leave_no_truncated_svg(results, capsys, full_disk):
    out = results / "figures"
    full_disk("convergence_time.svg")
    assert main(["figures", "regression", "--results", str(results / "results" / "regression"),
                 "--out", str(out)]) == 1
    one_error_line(capsys, "convergence_time.svg", "No space left")
    names = {p.name for p in out.iterdir()} if out.exists() else set()
    assert not {"convergence_time.svg", "convergence_time.png"} & names  # both or neither
    assert not [n for n in names if ".tmp-" in n]
    for svg in out.glob("*.svg"):
        assert svg.read_text().rstrip().endswith("</svg>")


@pytest.mark.slow
def test_report_on_a_full_disk_keeps_both_old_files(results, capsys, full_disk):
    args = ["report", "--results", str(results / "results"), "--studies", "regression",
            "--figures", str(results / "figures"), "--out", str(results / "reports")]
    assert main(args) == 0
    before = contents(results / "reports")
    (results / "results" / "regression" / "runs.parquet").touch()
    capsys.readouterr()
    full_disk("report.html")
    assert main(args) == 1
    one_error_line(capsys, "report.html")
    assert contents(results / "reports") == before


def test_summarize_csv_on_a_full_disk_leaves_nothing(results, capsys, full_disk):
    full_disk("s.csv")
    csv = results / "new" / "s.csv"
    assert main(["summarize", str(results / "results" / "regression"), "--csv", str(csv)]) == 1
    one_error_line(capsys, "s.csv")
    assert not (results / "new").exists()


def test_assembled_tables_are_replaced_together_or_not_at_all(tmp_path, full_disk):
    from study.regression.plugin import SCHEMA, SIDE_TABLES
    from study.sweep.folder import ResultsFolder

    folder = ResultsFolder(tmp_path, SCHEMA, SIDE_TABLES)
    folder.prepare()
    row = {"run_id": "a", "status": "converged", "dataset": "synthetic", "optimizer": "gd",
           "backend": "numpy"}
    trace = pd.DataFrame({"iteration": [0, 1], "seconds": [0.0, 0.1],
                          "suboptimality": [1.0, 0.1]})
    folder.write_run(row, {"traces": trace})
    folder.assemble(folder.scan())
    before = {n: (tmp_path / n).read_bytes() for n in ("runs.parquet", "traces.parquet")}
    folder.write_run({**row, "run_id": "b"}, {"traces": trace})
    full_disk("runs.parquet")
    with pytest.raises(ResultsWriteError, match="runs.parquet"):
        folder.assemble(folder.scan())
    assert {n: (tmp_path / n).read_bytes() for n in before} == before
    assert not list(tmp_path.glob(".*tmp*"))


def test_bench_outputs_are_written_together_or_not_at_all(tmp_path, full_disk):
    from study.bench.render import write_outputs

    table = pd.DataFrame({"x": [1.0]})
    write_outputs({"target": table}, "old\n", tmp_path)
    before = contents(tmp_path)
    full_disk("bench.txt")
    with pytest.raises(ResultsWriteError, match="bench.txt"):
        write_outputs({"target": table.assign(x=2.0)}, "new\n", tmp_path)
    assert contents(tmp_path) == before


def test_a_failed_write_names_the_file_and_keeps_the_old_one(tmp_path):
    old = tmp_path / "a.txt"
    old.write_text("old")

    def fail(tmp):
        open(tmp, "w").write("par")
        raise OSError(errno.EIO, "Input/output error")

    with pytest.raises(ResultsWriteError, match="cannot write '.*b.txt': Input/output error"):
        write_files_atomic({old: lambda tmp: open(tmp, "w").write("new"), tmp_path / "b.txt": fail})
    assert old.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


# ---- output paths refused before any work ----------------------------------------------------

def special_files(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    found = {"FIFO": fifo}
    try:  # a device of our own (root only): never a real one such as /dev/null
        os.mknod(tmp_path / "dev", 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        found["device"] = tmp_path / "dev"
    except (PermissionError, OSError):
        pass
    return found


def commands(target, results):
    regression = str(results / "results" / "regression")
    return {"regress": [*REGRESS, "--out", str(target)],
            "summarize": ["summarize", regression, "--csv", str(target)],
            "figures": ["figures", "regression", "--results", regression, "--out", str(target)],
            "report": ["report", "--results", str(results / "results"), "--studies",
                       "regression", "--out", str(target)]}


def test_a_fifo_or_device_as_out_is_refused(results, capsys):
    for kind, target in special_files(results).items():
        for name, args in commands(target, results).items():
            before = contents(results / "results")
            assert main(args) == 2, (kind, name)
            one_error_line(capsys, str(target), kind if kind == "FIFO" else "device")
            assert contents(results / "results") == before
            assert not stat.S_ISREG(target.stat().st_mode)


def test_an_unwritable_folder_as_out_is_refused(results, capsys):
    for name, args in commands("/proc/no-such-folder/x", results).items():
        assert main(args) == 2, name
        one_error_line(capsys, "cannot write in '/proc'")


def test_a_directory_where_the_trace_goes_is_refused_before_the_run(tmp_path, capsys):
    (tmp_path / "X.trace.parquet").mkdir()
    assert main([*REGRESS, "--out", str(tmp_path / "X.parquet")]) == 2
    one_error_line(capsys, "X.trace.parquet' is a directory")
    assert capsys.readouterr().out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["X.trace.parquet"]


# ---- no output over a file read or into a results folder (issue 43, case 7) ------------------

TRAIN = ["train", "--model", "eve-mlp", "--data", "d.csv", "--features", "a", "--labels", "y",
         "--loss", "mse", "--target", "val_loss=0.1"]
FOLDER = "results/regression"
FILE_FLAGS = {  # each command's flags that name a file, aimed at `t`
    "summarize --csv": lambda t: ["summarize", FOLDER, "--csv", t],
    "compare --figure": lambda t: ["compare", FOLDER, FOLDER, "--figure", t + ".png"],
    "regress --out": lambda t: [*REGRESS, "--out", t],
    "train --out": lambda t: [*TRAIN, "--out", t]}
FOLDER_FLAGS = {  # and the flags that name a folder
    "figures --out": lambda t: ["figures", "regression", "--results", FOLDER, "--out", t],
    "report --out": lambda t: ["report", "--results", "results", "--studies", "regression",
                               "--figures", "fig", "--out", t],
    "train --cache": lambda t: [*TRAIN, "--cache", t],
    "bench --out": lambda t: ["bench", "--sections", "target", "--out", t],
    "run --out": lambda t: ["run", str(Path(__file__).parents[1] / "configs" / "regression.toml"),
                            "--out", t + "/sub"],
    "feedmode --out": lambda t: ["feedmode", "--n", "10", "--out", t + "/sub"]}
CASES = [(flag, target) for flag in FILE_FLAGS for target in (
    "results/regression/runs.parquet", "./results/../results/regression/traces.parquet",
    "link/runs.parquet", "results/regression/new.csv")] + \
    [(flag, target) for flag in FOLDER_FLAGS for target in (
        "results/regression", "link", "results/regression/logs")]


@pytest.mark.parametrize("command, target", CASES)
def test_no_output_flag_writes_into_a_results_folder(results, capsys, monkeypatch, command,
                                                     target):
    monkeypatch.chdir(results)
    (results / "link").symlink_to(results / "results" / "regression")
    (results / "d.csv").write_text("a,y\n1,2\n2,3\n3,5\n")
    (results / "results" / "regression" / "logs").mkdir()
    before = contents(results / "results")
    assert main({**FILE_FLAGS, **FOLDER_FLAGS}[command](target)) == 2
    line = one_error_line(capsys, command.split()[1], target.split("/")[-1])
    assert "inside the results folder" in line or "which this command reads" in line, line
    assert contents(results / "results") == before


@pytest.mark.parametrize("command", ["regress", "train"])
@pytest.mark.parametrize("data, out", [
    ("d.parquet", "d.parquet"), ("d.parquet", "./sub/../d.parquet"),
    ("d.parquet", "alias.parquet"), ("d.parquet", "hard.parquet"),
    ("d.trace.parquet", "d.parquet")])  # the trace written beside --out
def test_no_output_flag_writes_over_a_file_the_command_reads(tmp_path, capsys, monkeypatch,
                                                              command, data, out):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    pd.DataFrame({"a": [1.0, 2.0, 3.0], "y": [2.0, 3.0, 5.0]}).to_parquet(data)
    (tmp_path / "alias.parquet").symlink_to(tmp_path / data)
    os.link(data, "hard.parquet")
    read = {"regress": ["--dataset", "tabular", "--path", data],
            "train": ["--model", "eve-mlp", "--data", data, "--loss", "mse", "--target",
                      "val_loss=0.1"]}[command]
    before = Path(data).read_bytes()
    assert main([command, *read, "--features", "a", "--labels", "y", "--out", out]) == 2
    one_error_line(capsys, "--out", "this command reads", data)
    assert Path(data).read_bytes() == before


def test_a_folder_with_a_study_json_of_its_own_is_no_results_folder(tmp_path, capsys):
    """A project's own study.json (no runs beside it) does not make its folder a results
    folder: outputs below it are written."""
    (tmp_path / "study.json").write_text("{}")
    out = tmp_path / "sub" / "r.parquet"
    assert main([*REGRESS, "--out", str(out)]) == 0
    assert out.is_file()
