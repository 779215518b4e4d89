import subprocess
import sys

import pandas as pd
import pytest

from study.__main__ import main


def test_regress_writes_record_and_trace(tmp_path, capsys):
    out = tmp_path / "sub" / "run.parquet"
    assert main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer", "gd",
                 "--max-iter", "5000", "--out", str(out)]) == 0
    line = capsys.readouterr().out.splitlines()[1]  # after the bound's prediction (issue 44)
    assert line.startswith("gd on numpy/cpu float64: converged after")
    record = pd.read_parquet(out)
    trace = pd.read_parquet(tmp_path / "sub" / "run.trace.parquet")
    assert len(record) == 1 and record["status"].iloc[0] == "converged"
    assert record["stop_tol"].iloc[0] == 1e-8
    assert trace["iteration"].iloc[-1] == record["iterations"].iloc[0]
    assert not list(tmp_path.glob("sub/.*tmp*"))


@pytest.mark.parametrize("args, message", [
    (["--optimizer", "newton"], "unknown optimizer 'newton'; allowed:"),
    (["--dataset", "mnist"],
     "unknown dataset 'mnist'; allowed: eve, synthetic, synthetic-logistic, tabular"),
    (["--backend", "mxnet"], "unknown backend 'mxnet'"),
    (["--dtype", "int8"], "unknown dtype 'int8' for numpy; allowed: float64, float32"),
    (["--tol", "0"], "tol must be a finite number > 0, got 0.0"),
    (["--tol=-1e-8"], "tol must be"),
    (["--optimizer", "gd", "--step", "fixed", "--lr", "-0.1"], "learning_rate must be"),
    (["--optimizer", "gd", "--step", "fixed", "--lr", "0"], "learning_rate must be"),
    (["--max-iter", "0"], "max_iter must be"),
    (["--init", "ones"], "unknown init 'ones'"),
    (["--rows", "0"], "rows must be an integer >= 1, got 0"),
    (["--data-param", "kappa=5"], "dataset 'eve' has no parameter 'kappa'"),
    (["--dataset", "tabular", "--rows", "3"],
     "--rows applies to eve, synthetic, synthetic-logistic, not 'tabular'"),
])
def test_bad_input_exits_2_with_one_line_and_no_file(tmp_path, capsys, args, message):
    out = tmp_path / "run.parquet"
    base = [] if "--rows" in args else ["--rows", "300"]
    code = main(["regress", *base, *args, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_missing_tabular_file(tmp_path, capsys):
    code = main(["regress", "--dataset", "tabular", "--path", str(tmp_path / "no.csv"),
                 "--features", "a", "--labels", "y", "--out", str(tmp_path / "r.parquet")])
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_out_inside_a_file_and_out_a_directory(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["regress", "--rows", "300", "--out", str(blocker / "r.parquet")]) == 2
    assert "which is a file" in capsys.readouterr().err
    assert main(["regress", "--rows", "300", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert blocker.read_text() == "x"


def test_usage_errors_exit_2_on_one_line():
    proc = subprocess.run([sys.executable, "-m", "study", "regress", "--no-such-flag"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "--no-such-flag" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "study", "frobnicate"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
