"""The data of a train run: a shipped example, a `.npz` file (x_train, y_train, x_val, y_val) or
a CSV/Parquet file with chosen feature and label columns, split by a seeded fraction (the same
split for every seed, optimizer and framework).

The arrays reach the model as they are: nothing guesses their layout. `layout =
"channels_first"` moves the channel axis once, here (so the cached arrays carry it and no clock
sees it). Every check ends in one line naming the file or field."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from convergence_study.errors import InputError
from datasets import values
from datasets.files import check_input_file
from datasets.tabular import check_disjoint, read_table, select_columns
from study.train.models.examples import DATA, DATA_PARAMS

NPZ_ARRAYS = ("x_train", "y_train", "x_val", "y_val")
FILE_KEYS = ("path", "features", "labels", "validation_fraction", "split_seed")
NPZ_KEYS = ("path",)  # a .npz holds its own split and columns
LAYOUTS = ("channels_last", "channels_first")  # as stored; the channel axis moved after the rows
SUFFIXES = (".npz", ".csv", ".parquet", ".pq")
RUN_DTYPE = np.dtype(np.float32)  # what every framework computes in (features, float labels)


def check_data(data: dict, where: str = "data") -> dict:
    """The data table's keys and values (before anything is read): the table, as given."""
    if not isinstance(data, dict):
        raise InputError(f"{where} must be a table, got {data!r}")
    if "name" in data:
        name = data["name"]
        if name not in DATA:
            raise InputError(f"{where}: unknown name {name!r}; allowed: {', '.join(DATA)}, or "
                             "path = a .npz, .csv or .parquet file")
        allowed = ("name", *DATA_PARAMS[name], "validation_fraction", "split_seed", "layout")
    elif "path" in data:
        path = Path(str(data["path"]))
        if path.suffix.lower() not in SUFFIXES:
            raise InputError(f"{where}: path '{path}' has suffix '{path.suffix}'; allowed: "
                             f"{', '.join(SUFFIXES)}")
        check_input_file(path, where)
        tabular = path.suffix.lower() != ".npz"
        allowed = (*(FILE_KEYS if tabular else NPZ_KEYS), "layout")
        for key in ("features", "labels"):
            if tabular and key not in data:
                raise InputError(f"{where}: a CSV or Parquet file needs '{key}' (column names)")
            if key in data:
                values.names().check(f"{where}: {key}", data[key])
        if tabular:
            check_disjoint(data["features"], data["labels"], where)
    else:
        raise InputError(f"{where} needs name (one of: {', '.join(DATA)}) or path")
    for key in data:
        if key not in allowed:
            why = " (a .npz holds its own split: x_train, y_train, x_val, y_val)" \
                if "name" not in data and key in FILE_KEYS and "features" not in allowed else ""
            raise InputError(f"{where}: unknown key '{key}'{why}; allowed: {', '.join(allowed)}")
    kinds = {"rows": values.integer(1), "seed": values.integer(0),
             "split_seed": values.integer(0), "one_hot": values.boolean(),
             "layout": values.choice(*LAYOUTS),
             "validation_fraction": values.Value("number", 0.0, 1.0, low_open=True,
                                                 high_open=True)}
    for key, value in data.items():
        if key in kinds:
            kinds[key].check(f"{where}: {key}", value)
    return data


def load_data(data: dict, where: str = "data") -> dict[str, np.ndarray]:
    """x_train, y_train, x_val, y_val as checked arrays (x float32)."""
    check_data(data, where)
    if "name" in data:
        params = {k: data[k] for k in DATA_PARAMS[data["name"]] if k in data}
        arrays = split(*DATA[data["name"]](**params), data)
        source = f"{where} '{data['name']}'"
    elif Path(data["path"]).suffix.lower() == ".npz":
        arrays, source = read_npz(Path(data["path"])), f"'{data['path']}'"
    else:
        frame = read_table(data["path"])
        source = f"'{data['path']}'"
        x = select_columns(frame, data["features"], "feature", source)
        y = select_columns(frame, data["labels"], "label", source)
        columns = {"x": list(x.columns), "y": list(y.columns)}
        x, y = x.to_numpy(np.float64), y.to_numpy()
        arrays = split(x, y[:, 0] if y.shape[1] == 1 else y, data)
        return laid_out(checked(arrays, source, columns), data.get("layout"), source)
    return laid_out(checked(arrays, source), data.get("layout"), source)


def laid_out(arrays: dict, layout: str | None, source: str) -> dict[str, np.ndarray]:
    """The x arrays in the data table's layout (channels_first: channel axis after the rows)."""
    if layout != "channels_first":
        return arrays
    shape = arrays["x_train"].shape
    if len(shape) < 3:
        raise InputError(f"{source}: layout = \"channels_first\" moves the channel axis of "
                         f"image rows (N, H, W, C), but x_train has shape {shape}: rows of "
                         "features have no channel axis; leave layout out")
    return {name: np.ascontiguousarray(np.moveaxis(array, -1, 1)) if name.startswith("x")
            else array for name, array in arrays.items()}


def read_npz(path: Path) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            missing = [name for name in NPZ_ARRAYS if name not in archive.files]
            if missing:
                raise InputError(f"'{path}' lacks {', '.join(missing)} (a .npz needs "
                                 f"{', '.join(NPZ_ARRAYS)}; it has {', '.join(archive.files)})")
            return {name: np.asarray(archive[name]) for name in NPZ_ARRAYS}
    except InputError:
        raise
    except Exception as exc:  # a damaged archive, pickled objects
        raise InputError(f"cannot read '{path}' as .npz: {type(exc).__name__}: "
                         f"{str(exc).splitlines()[0] if str(exc) else ''}") from None


def check_run_range(array: np.ndarray, name: str, source: str, columns=None) -> None:
    """Float values the run's float32 cannot hold: they would become inf in the cast every
    framework makes, and the run be recorded as diverged at its first step."""
    if array.dtype.kind != "f" or array.dtype.itemsize <= RUN_DTYPE.itemsize:
        return
    with np.errstate(over="ignore"):
        beyond = ~np.isfinite(array.astype(RUN_DTYPE))
    if not beyond.any():
        return
    at = tuple(int(i) for i in np.argwhere(beyond)[0])
    column = (f" in column '{columns[at[1] if len(at) > 1 else 0]}'" if columns else
              f" at index {at if len(at) > 1 else at[0]}")
    raise InputError(f"{source}: {name} holds {array[at]:.3g}{column}, beyond the range of "
                     f"{RUN_DTYPE.name}, which the run computes in (|values| up to "
                     f"{np.finfo(RUN_DTYPE).max:.3g}); rescale the data")


def split(x: np.ndarray, y: np.ndarray, data: dict) -> dict[str, np.ndarray]:
    """A seeded permutation of the rows, the last `validation_fraction` of it for validation."""
    fraction = data.get("validation_fraction", 0.2)
    order = np.random.default_rng(data.get("split_seed", 0)).permutation(len(x))
    n_val = int(round(fraction * len(x)))
    if n_val < 1 or n_val >= len(x):
        raise InputError(f"data: validation_fraction {fraction} of {len(x)} rows leaves no "
                         "training or no validation row")
    train, val = order[:-n_val], order[-n_val:]
    return {"x_train": x[train], "y_train": y[train], "x_val": x[val], "y_val": y[val]}


def checked(arrays: dict, source: str, columns: dict | None = None) -> dict[str, np.ndarray]:
    """The arrays, each numeric, finite in the dtype the run computes in, with rows; x as
    float32. `columns`: a table's column names ({"x": [...], "y": [...]}), to name a value's."""
    out = {}
    for name, array in arrays.items():
        if array.dtype.kind not in "biuf":
            raise InputError(f"{source}: {name} is not numeric (dtype {array.dtype})")
        if array.dtype.kind == "f" and not np.isfinite(array).all():
            bad = int((~np.isfinite(array)).sum())
            raise InputError(f"{source}: {name} has {bad} non-finite values")
        check_run_range(array, name, source, (columns or {}).get(name[0]))
        if array.ndim == 0:
            raise InputError(f"{source}: {name} is a single value, not an array of rows")
        if len(array) == 0:
            raise InputError(f"{source}: {name} has no rows")
        out[name] = array.astype(np.float32) if name.startswith("x") else array
    for part in ("train", "val"):
        if len(out[f"x_{part}"]) != len(out[f"y_{part}"]):
            raise InputError(f"{source}: x_{part} has {len(out[f'x_{part}'])} rows but y_{part} "
                             f"{len(out[f'y_{part}'])}")
    if len(out["x_train"]) < 2:
        raise InputError(f"{source}: x_train has one row; training needs at least two")
    if out["x_train"].shape[1:] != out["x_val"].shape[1:]:
        raise InputError(f"{source}: x_train's rows have shape {out['x_train'].shape[1:]} but "
                         f"x_val's {out['x_val'].shape[1:]}")
    return out
