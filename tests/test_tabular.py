import numpy as np
import pandas as pd
import pytest

from datasets import InputError, make_problem
from datasets.eve import FEATURES, LABEL, eve_frame


@pytest.fixture
def frame():
    return eve_frame(500, seed=1)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_tabular_reads_chosen_columns(tmp_path, frame, suffix):
    path = tmp_path / f"data{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    p = make_problem("tabular", path=path, features=list(FEATURES), labels=[LABEL])
    reference = make_problem("eve", rows=500, seed=1)
    np.testing.assert_array_equal(p.X, reference.X)
    np.testing.assert_array_equal(p.y, reference.y)
    assert p.feature_names == ("intercept", *FEATURES)


def write(tmp_path, frame, name="d.csv"):
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


def test_missing_column_names_it_and_lists_columns(tmp_path, frame):
    path = write(tmp_path, frame)
    with pytest.raises(InputError, match=r"feature column 'kills' is not in .*columns present"):
        make_problem("tabular", path=path, features=["kills"], labels=[LABEL])


@pytest.mark.parametrize("value, message", [
    ("oops", "column 'npc_kills' is not numeric"),
    (np.nan, "column 'npc_kills' has 1 non-finite"),
    (np.inf, "non-finite"),
])
def test_bad_values_in_a_chosen_column(tmp_path, frame, value, message):
    bad = frame.astype({"npc_kills": object if isinstance(value, str) else float})
    bad.loc[7, "npc_kills"] = value
    path = tmp_path / "d.parquet"
    bad.to_parquet(path) if not isinstance(value, str) else None
    if isinstance(value, str):
        path = write(tmp_path, bad)
    with pytest.raises(InputError, match=message):
        make_problem("tabular", path=path, features=list(FEATURES), labels=[LABEL])


def test_boolean_column_is_rejected(tmp_path, frame):
    path = tmp_path / "b.parquet"
    frame.assign(flag=frame["ship_kills"] > 1).to_parquet(path)
    with pytest.raises(InputError, match="column 'flag' is not numeric"):
        make_problem("tabular", path=path, features=["flag", "ship_jumps"], labels=[LABEL])


def test_duplicate_column_names(tmp_path):
    path = tmp_path / "dup.csv"
    path.write_text("a,b,a,y\n1,2,3,4\n2,3,5,6\n4,1,2,3\n5,5,1,0\n")
    with pytest.raises(InputError, match="duplicate column names"):
        make_problem("tabular", path=path, features=["a", "b"], labels=["y"])


@pytest.mark.parametrize("content, message", [("", "is empty"), ("a,b,y\n", "zero rows")])
def test_empty_files(tmp_path, content, message):
    path = tmp_path / "e.csv"
    path.write_text(content)
    with pytest.raises(InputError, match=message):
        make_problem("tabular", path=path, features=["a", "b"], labels=["y"])


def test_truncated_parquet(tmp_path, frame):
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(InputError, match="cannot read"):
        make_problem("tabular", path=path, features=list(FEATURES), labels=[LABEL])


def test_paths_that_are_not_files(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        make_problem("tabular", path=tmp_path / "nope.csv", features=["a"], labels=["y"])
    with pytest.raises(InputError, match="is a directory"):
        make_problem("tabular", path=tmp_path, features=["a"], labels=["y"])


def test_fewer_rows_than_features(tmp_path):
    path = write(tmp_path, pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 1.0], "y": [1.0, 2.0]}))
    with pytest.raises(InputError, match="2 rows but 3 coefficients"):
        make_problem("tabular", path=path, features=["a", "b"], labels=["y"])
