"""A user's own data set from a file (datasets/from_file.py, issue 54): `--dataset
path/load.py:load` returning X, y or a DataFrame and its column names, checked as a CSV is,
with the same certified f* as the same data written as a CSV."""

import textwrap

import numpy as np
import pandas as pd
import pytest

from datasets import make_problem
from study.__main__ import main
from study.sweep.grid import load_study

LOADER = textwrap.dedent("""
    import numpy as np
    import pandas as pd

    def load(rows: int = 200, seed: int = 0):
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((rows, 3)) * [1.0, 10.0, 0.1]
        y = X @ [1.0, -2.0, 3.0] + 0.1 * rng.standard_normal(rows)
        return X, y

    def frame(rows: int = 200):
        X, y = load(rows)
        return (pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "t": y}),
                ["a", "b", "c"], ["t"])
    """)


@pytest.fixture
def loader(tmp_path):
    path = tmp_path / "load.py"
    path.write_text(LOADER)
    return path


def test_the_same_certified_f_star_as_the_same_data_as_a_csv(loader, tmp_path):
    own = make_problem(f"{loader}:load", rows=300, seed=2)
    X, y = own.X[:, 1:], own.y  # the intercept column is ours
    csv = tmp_path / "same.csv"
    pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "y0": y[:, 0]}).to_csv(
        csv, index=False, float_format="%.17g")
    tabular = make_problem("tabular", path=str(csv), features=["x0", "x1", "x2"], labels=["y0"])
    np.testing.assert_array_equal(own.X, tabular.X)
    assert own.reference.f == tabular.reference.f
    assert own.reference.kappa_raw == pytest.approx(tabular.reference.kappa_raw, rel=1e-12)
    framed = make_problem(f"{loader}:frame", rows=200)
    assert framed.reference.f == make_problem(f"{loader}:load", rows=200).reference.f
    assert framed.feature_names == ("intercept", "a", "b", "c")


def test_regress_runs_it_with_its_parameters(loader, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run.parquet"
    assert main(["regress", "--dataset", "load.py:load", "--data-param", "rows=150",
                 "--data-param", "standardize=true", "--optimizer", "lbfgs",
                 "--out", str(out)]) == 0
    record = pd.read_parquet(out).iloc[0]
    assert record["status"] == "converged" and record["n"] == 150


def test_a_study_measures_it_in_its_runs_processes_and_again_when_it_changes(loader, tmp_path,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "mine.toml"
    config.write_text('name = "mine"\n[[datasets]]\nname = "load.py:load"\nrows = 120\n'
                      '[[optimizers]]\nname = "lbfgs"\n[[backends]]\nname = "numpy"\n')
    out = tmp_path / "results"
    assert main(["run", str(config), "--out", str(out), "--quiet", "--no-adaptive"]) == 0
    first = pd.read_parquet(out / "runs.parquet").iloc[0]
    assert first["status"] == "converged" and first["dataset"] == "load.py:load"
    loader.write_text(LOADER.replace("0.1 * rng", "0.2 * rng"))
    assert main(["run", str(config), "--out", str(out), "--quiet", "--no-adaptive"]) == 0
    second = pd.read_parquet(out / "runs.parquet").iloc[0]
    assert second["sweep_id"] != first["sweep_id"] and second["f_star"] > first["f_star"]


def test_a_config_names_it_by_an_absolute_path_and_rows_by_a_short_name(loader, tmp_path,
                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "mine.toml"
    config.write_text('name = "mine"\n[[datasets]]\nname = "load.py:load"\nrows = [100, 200]\n'
                      '[[optimizers]]\nname = "gd"\n[[backends]]\nname = "numpy"\n')
    specs = load_study(config).specs
    assert {s.dataset for s in specs} == {f"{loader}:load"}
    assert {s.axes()["dataset"] for s in specs} == {"load.py:load"}
    assert {s.dataset_params["rows"] for s in specs} == {100, 200}
    assert all(s.data_params()["seed"] == 0 for s in specs)  # it takes a seed: seeded


BROKEN = {  # the loader's body -> what the one line says
    "wrong shapes": ("return np.ones((5, 2)), np.ones(4)", "X has 5 rows but y has 4"),
    "NaN": ("X = np.random.default_rng(0).random((9, 2)); X[3, 1] = np.nan\n"
            "    return X, np.arange(9.0)", "column 'x1' has 1 non-finite values"),
    "constant column": ("return np.c_[np.arange(9.0), np.full(9, 2.0)], "
                        "np.random.default_rng(0).random(9)", "is constant"),
    "label as a feature": ("X = np.random.default_rng(0).random((9, 2))\n    return X, X[:, 1]",
                           "label column 0 is also feature column 1"),
    "one array": ("return np.ones((9, 2))", "must return X, y"),
    "text": ("return np.array([['a', 'b']] * 9), np.arange(9.0)", "X is not numeric"),
    "raises": ("raise FileNotFoundError('data.csv')",
               "raised FileNotFoundError: data.csv"),
    "frame's missing column": ("return pd.DataFrame({'a': [1.0, 2.0, 3.0]}), ['b'], ['a']",
                               "feature column 'b' is not in"),
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_broken_loader_is_one_line_exit_2_and_no_file(kind, tmp_path, capsys):
    body, message = BROKEN[kind]
    path = tmp_path / "bad.py"
    path.write_text(f"import numpy as np\nimport pandas as pd\n\ndef load():\n    {body}\n")
    out = tmp_path / "run.parquet"
    code = main(["regress", "--dataset", f"{path}:load", "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert str(path) in err and message in err, err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--dataset", "nowhere.py:load"], "no such file"),
    (["--dataset", "load.py:absent"], "defines no 'absent'"),
    (["--dataset", "load.py:np"], "is not a function"),
    (["--dataset", "load.py:load", "--data-param", "rowz=3"], "has no parameter 'rowz'"),
    (["--dataset", "load.py:load", "--data-param", "rows=2.5"], "rows must be an integer"),
])
def test_bad_names_and_parameters(loader, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    code = main(["regress", *args, "--out", str(tmp_path / "r.parquet")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "r.parquet").exists()
