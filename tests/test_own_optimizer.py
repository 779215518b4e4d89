"""A user's own optimizer from a file (optimizers/from_file.py, issue 54): written once in a
folder outside the checkout, run by `regress` and a study on every framework, labelled by its
own name, re-measured when its file changes (and only its rows), refused in one line when
broken."""

import shutil
from pathlib import Path

import pandas as pd
import pytest

from datasets import make_problem
from optimizers import build_rules, make_optimizer, run
from optimizers.bounds import NO_FAMILY
from study.__main__ import main
from study.frameworks.registry import make_backend
from study.regression import style

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "bb_step.py"
NAME = "BarzilaiBorwein"


@pytest.fixture
def own(tmp_path):
    """The shipped example copied into a user's folder, outside the checkout."""
    folder = tmp_path / "mine"
    folder.mkdir()
    shutil.copy(EXAMPLE, folder / "bb_step.py")
    return folder / "bb_step.py"


def test_regress_runs_it_by_a_relative_path_and_records_the_file(own, tmp_path, capsys,
                                                                  monkeypatch):
    monkeypatch.chdir(own.parent)
    out = tmp_path / "run.parquet"
    assert main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer",
                 f"bb_step.py:{NAME}", "--opt-param", "first_step=0.5",
                 "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"bb: no bound ({NO_FAMILY})")
    assert lines[1].startswith("bb on numpy/cpu float64: converged after")
    record = pd.read_parquet(out).iloc[0]
    assert record["optimizer"] == "bb" and record["hp_first_step"] == 0.5
    assert record["optimizer_file"] == str(own)
    assert len(record["optimizer_file_sha256"]) == 16


@pytest.mark.parametrize("backend, options", [
    ("numpy", {}), ("numpy", {"formulation": "gram"}), ("jax", {}), ("jax", {"feed": "resident"}),
    ("torch", {}), ("tensorflow", {}), ("tensorflow", {"feed": "feed"})])
def test_it_reaches_the_target_on_every_framework(own, backend, options):
    """The same file on NumPy, JAX, PyTorch and TensorFlow, fused loops included (the compiled
    modes that cost tens of seconds, XLA and torch.compile, ran by hand: docs/your-optimizer.md)."""
    pytest.importorskip({"numpy": "numpy", "jax": "jax", "torch": "torch",
                         "tensorflow": "tensorflow"}[backend])
    problem = make_problem("synthetic", n=500, d=5, kappa=100.0, seed=1)
    result = run(problem, make_optimizer(f"{own}:{NAME}"), build_rules(tol=1e-8, max_iter=2000),
                 backend=make_backend(backend, "float64", **options))
    assert result.status == "converged" and result.suboptimality <= 1e-8
    assert result.optimizer == "bb"


def test_a_declared_family_gets_its_bound(own):
    source = own.read_text().replace('    name: str = "bb"', '    name: str = "bb"\n'
                                     '    family = "gd"')
    own.write_text(source)
    problem = make_problem("synthetic", n=500, d=5, kappa=100.0, seed=1)
    result = run(problem, make_optimizer(f"{own}:{NAME}"), build_rules(tol=1e-8, max_iter=2000),
                 backend=make_backend("numpy"))
    assert result.prediction["predicted_iterations"] > 0
    assert result.prediction["bound"].startswith("gd 1/L")


def test_a_name_the_style_table_does_not_know_gets_a_spare_colour():
    assert style.color("bb") in style.SPARE_COLORS
    assert style.color("bb") == style.color("bb")  # stable: the same in every figure
    assert style.color("keras:Nadam") == style.OTHER_COLOR  # unchanged


def study_config(folder: Path, optimizer: str) -> Path:
    config = folder / "mine.toml"
    config.write_text(f"""
name = "mine"
seeds = [0]
[stopping]
tol = 1e-8
max_iter = 5000
[[datasets]]
name = "synthetic"
n = 300
d = 4
kappa = 100.0
[[optimizers]]
name = "{optimizer}"
[[optimizers]]
name = "gd"
[[backends]]
name = "numpy"
""")
    return config


def test_a_study_runs_it_and_an_edit_remeasures_its_rows_only(own, tmp_path, monkeypatch,
                                                               capsys):
    monkeypatch.chdir(own.parent)
    config = study_config(own.parent, f"bb_step.py:{NAME}")
    out = tmp_path / "results"
    assert main(["run", str(config), "--out", str(out), "--quiet", "--no-adaptive"]) == 0
    first = pd.read_parquet(out / "runs.parquet").set_index("optimizer")
    assert set(first.index) == {"bb", "gd"} and set(first["status"]) == {"converged"}
    assert first.loc["bb", "optimizer_file"] == str(own)
    assert '"optimizer": "' + str(own) in first.loc["bb", "spec"]  # absolute for the child
    before = tmp_path / "before"
    shutil.copytree(out, before)
    own.write_text(own.read_text() + "# an edit\n")
    assert main(["run", str(config), "--out", str(out), "--quiet", "--no-adaptive"]) == 0
    second = pd.read_parquet(out / "runs.parquet").set_index("optimizer")
    assert second.loc["bb", "sweep_id"] != first.loc["bb", "sweep_id"]
    assert second.loc["gd", "sweep_id"] == first.loc["gd", "sweep_id"]
    assert second.loc["bb", "optimizer_file_sha256"] != first.loc["bb", "optimizer_file_sha256"]
    capsys.readouterr()
    assert main(["compare", str(before), str(out)]) == 0
    said = capsys.readouterr().out
    old_hash, new_hash = (frame.loc["bb", "optimizer_file_sha256"][:8] for frame in (first, second))
    assert f"{own} ({old_hash})" in said and f"{own} ({new_hash})" in said, said


GOOD = EXAMPLE.read_text()
BROKEN = {  # what the file holds -> what the one line says
    "syntax error": ("def oops(:\n", "fails to import: SyntaxError"),
    "raises on import": ("raise RuntimeError('no GPU here')\n",
                         "fails to import: RuntimeError: no GPU here"),
    "missing import": ("import no_such_module_anywhere\n",
                       "fails to import: ModuleNotFoundError"),
    "name missing": ("X = 1\n", f"defines no '{NAME}'"),
    "a function": (f"def {NAME}():\n    pass\n", "is not an optimizer"),
    "not an Optimizer": (f"class {NAME}:\n    pass\n", "is not an optimizer"),
    "not a dataclass": (GOOD.replace("@dataclass(frozen=True)\n", ""), "is not a dataclass"),
    "no update": (GOOD.replace("def update(", "def other("), "defines no update"),
    "shipped name": (GOOD.replace('name: str = "bb"', 'name: str = "gd"'),
                     "not a shipped optimizer's, got 'gd'"),
    "no evaluations": (GOOD.replace("    evaluations = {", "    evaluation = {"),
                       "`evaluations` must say what one iteration costs"),
    "unknown family": (GOOD.replace('    name: str = "bb"', '    name: str = "bb"\n'
                                    '    family = "newton"'), "unknown family 'newton'"),
    "state not a NamedTuple": (GOOD.replace("return BBState(w0, *objective.value_and_grad(w0), "
                                            "params)", "return (w0, params)"),
                               "init must return a NamedTuple with at least the fields w, f, g"),
    "state without g": (GOOD.replace("    g: object  # its gradient", "    grad: object"),
                        "init must return a NamedTuple with at least the fields w, f, g"),
    "update changes the state": (GOOD.replace("return BBState(w, f, g, step)",
                                              "return state._replace(w=w[:2])"),
                                 "update's state.w has shape (2, 1), not the iterate's (4, 1)"),
    "non-finite first step": (GOOD.replace("w = state.w - state.step * state.g",
                                           "w = state.w - state.step * state.g / 0.0"),
                              "the first step is not finite"),
    "update raises": (GOOD.replace("sy = ops.vdot(s, y)", "sy = ops.no_such_op(s, y)"),
                      "update raised AttributeError"),
    "setup raises": (GOOD.replace("return ops.scalar(self.first_step",
                                  "return 1 / 0 + ops.scalar(self.first_step"),
                     "setup raised ZeroDivisionError"),
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_a_broken_file_is_one_line_naming_it_exit_2_and_no_file(kind, tmp_path, capsys):
    source, message = BROKEN[kind]
    path = tmp_path / "mine.py"
    path.write_text(source)
    out = tmp_path / "run.parquet"
    code = main(["regress", "--rows", "300", "--optimizer", f"{path}:{NAME}",
                 "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2, captured
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in captured.err, err
    assert str(path) in err and message in err, err
    assert not out.exists()


@pytest.mark.parametrize("args, message", [
    (["--optimizer", "no_such_file.py:Mine"], "no such file"),
    (["--optimizer", "bb_step.py:1bad"], "path/to/file.py:Name"),
    (["--optimizer", f"bb_step.py:{NAME}", "--opt-param", "momentum=0.9"],
     "has no hyperparameter 'momentum'; allowed: first_step"),
    (["--optimizer", f"bb_step.py:{NAME}", "--opt-param", "first_step=-1"],
     "bb: first_step must be"),
])
def test_bad_names_and_hyperparameters(own, tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(own.parent)
    code = main(["regress", "--rows", "300", *args, "--out", str(tmp_path / "r.parquet")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "r.parquet").exists()


def test_a_config_naming_a_broken_file_runs_nothing(tmp_path, capsys):
    path = tmp_path / "mine.py"
    path.write_text(BROKEN["non-finite first step"][0])
    config = study_config(tmp_path, f"{path}:{NAME}")
    out = tmp_path / "results"
    assert main(["run", str(config), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "not finite" in err, err
    assert not out.exists()


TORCH_FILE = '''
import torch


class PlainSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad, alpha=-group["lr"])


class Exploding(PlainSGD):
    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                p.add_(p.grad / 0.0)


class Raising(PlainSGD):
    def step(self, closure=None):
        raise RuntimeError("not yet")


class MyLBFGS(torch.optim.LBFGS):
    pass
'''


def test_a_torch_optimizer_subclass_from_a_file_runs_as_torch_optims_do(tmp_path):
    pytest.importorskip("torch")
    path = tmp_path / "mine_torch.py"
    path.write_text(TORCH_FILE)
    from study.regression.plugin import code_files
    from study.regression.spec import RunSpec

    optimizer = make_optimizer(f"{path}:PlainSGD", lr=0.5)
    assert optimizer.name == "torch:PlainSGD"
    problem = make_problem("synthetic", n=500, d=5, kappa=10.0, seed=1)
    result = run(problem, optimizer, build_rules(tol=1e-8, max_iter=2000),
                 backend=make_backend("torch", "float64"))
    assert result.status == "converged" and result.extra["torch_class"] == "PlainSGD"
    spec = RunSpec("s", "synthetic", {}, f"{path}:PlainSGD", {"lr": 0.5}, "torch", {},
                   "float64", "zeros", 0, 0)
    assert spec.axes()["optimizer"] == "torch:PlainSGD"
    assert {str(path), "study/frameworks/torch/optimizers.py"} <= set(code_files(spec))


@pytest.mark.parametrize("name, args, message", [
    ("MyLBFGS", [], "MyLBFGS steps with a closure"),
    ("Exploding", [], "the first step is not finite"),
    ("Raising", [], "step raised RuntimeError: not yet"),
    ("PlainSGD", ["--opt-param", "lr=-1"], "torch:PlainSGD: lr must be"),
    ("PlainSGD", ["--opt-param", "momentum=0.9"], "has no parameter 'momentum'; allowed: lr"),
])
def test_a_broken_torch_optimizer_file_is_one_line(tmp_path, capsys, name, args, message):
    pytest.importorskip("torch")
    path = tmp_path / "mine_torch.py"
    path.write_text(TORCH_FILE)
    out = tmp_path / "r.parquet"
    code = main(["regress", "--rows", "300", "--backend", "torch", "--optimizer",
                 f"{path}:{name}", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert not out.exists()


def test_two_files_declaring_one_name_are_refused(own, tmp_path, capsys):
    twin = tmp_path / "twin.py"
    shutil.copy(own, twin)
    config = study_config(tmp_path, f"{own}:{NAME}")
    config.write_text(config.read_text() + f'[[optimizers]]\nname = "{twin}:{NAME}"\n')
    assert main(["run", str(config), "--out", str(tmp_path / "results"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "both declare the name 'bb'" in err, err


OPTAX_FILE = '''
import optax


def clipped_adam(learning_rate: float = 0.1, clip: float = 1.0):
    return optax.chain(optax.clip_by_global_norm(clip), optax.adam(learning_rate))


def my_lbfgs():
    return optax.lbfgs()


def not_a_transformation(learning_rate=0.1):
    return 3
'''


@pytest.mark.parametrize("options", [{}, {"feed": "resident"}])
def test_an_optax_factory_from_a_file_runs_on_jax(tmp_path, options):
    pytest.importorskip("optax")
    path = tmp_path / "mine_optax.py"
    path.write_text(OPTAX_FILE)
    from study.regression.plugin import code_files
    from study.regression.spec import RunSpec

    optimizer = make_optimizer(f"{path}:clipped_adam", learning_rate=0.05)
    assert optimizer.name == "optax:clipped_adam"
    problem = make_problem("synthetic", n=500, d=5, kappa=10.0, seed=1)
    result = run(problem, optimizer, build_rules(tol=1e-8, max_iter=20000),
                 backend=make_backend("jax", "float64", **options))
    assert result.status == "converged" and result.suboptimality <= 1e-8
    spec = RunSpec("s", "synthetic", {}, f"{path}:clipped_adam", {"learning_rate": 0.05}, "jax",
                   options, "float64", "zeros", 0, 0)
    assert spec.axes()["optimizer"] == "optax:clipped_adam"
    assert {str(path), "study/frameworks/jax/optax_file.py"} <= set(code_files(spec))


@pytest.mark.parametrize("name, args, message", [
    ("my_lbfgs", [], "my_lbfgs: update raised TypeError"),
    ("not_a_transformation", [], "must return an optax.GradientTransformation"),
    ("clipped_adam", ["--opt-param", "lr=3"], "unexpected keyword argument 'lr'"),
])
def test_a_broken_optax_factory_is_one_line(tmp_path, capsys, name, args, message):
    pytest.importorskip("optax")
    path = tmp_path / "mine_optax.py"
    path.write_text(OPTAX_FILE)
    out = tmp_path / "r.parquet"
    code = main(["regress", "--rows", "300", "--backend", "jax", "--optimizer",
                 f"{path}:{name}", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err and str(path) in err, err
    assert not out.exists()


KERAS_FILE = '''
import keras


class PlainSGD(keras.optimizers.Optimizer):
    def __init__(self, learning_rate=0.1, name="plain_sgd", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        lr = keras.ops.cast(learning_rate, variable.dtype)
        self.assign_sub(variable, keras.ops.multiply(gradient, lr))


class Exploding(PlainSGD):
    def update_step(self, gradient, variable, learning_rate):
        self.assign_sub(variable, gradient * float("inf"))


class NotAnOptimizer:
    pass
'''


def test_a_keras_optimizer_class_from_a_file_runs_as_keras_classes_do(tmp_path):
    """On the tensorflow backend, as `keras:<Class>`: the same iterations as keras:SGD."""
    pytest.importorskip("tensorflow")
    path = tmp_path / "mine_keras.py"
    path.write_text(KERAS_FILE)
    from study.regression.plugin import code_files
    from study.regression.spec import RunSpec

    optimizer = make_optimizer(f"{path}:PlainSGD", learning_rate=0.05)
    assert optimizer.name == "keras:PlainSGD"
    problem = make_problem("synthetic", n=500, d=5, kappa=10.0, seed=1)
    rules = build_rules(tol=1e-8, max_iter=5000)
    result = run(problem, optimizer, rules, backend=make_backend("tensorflow", "float64"))
    shipped = run(problem, make_optimizer("keras:SGD", learning_rate=0.05), rules,
                  backend=make_backend("tensorflow", "float64"))
    assert result.status == "converged" and result.extra["keras_class"] == "PlainSGD"
    assert result.iterations == shipped.iterations
    spec = RunSpec("s", "synthetic", {}, f"{path}:PlainSGD", {"learning_rate": 0.05},
                   "tensorflow", {}, "float64", "zeros", 0, 0)
    assert spec.axes()["optimizer"] == "keras:PlainSGD"
    assert str(path) in set(code_files(spec))


@pytest.mark.parametrize("name, args, message", [
    ("Exploding", [], "the first step is not finite"),
    ("NotAnOptimizer", [], "not an optimizer"),
    ("PlainSGD", ["--opt-param", "learning_rate=-1"], "learning_rate must be"),
    ("PlainSGD", ["--opt-param", "momentum=0.9"], "not recognized: {'momentum': 0.9}"),
])
def test_a_broken_keras_optimizer_file_is_one_line(tmp_path, capsys, name, args, message):
    pytest.importorskip("tensorflow")
    path = tmp_path / "mine_keras.py"
    path.write_text(KERAS_FILE)
    out = tmp_path / "r.parquet"
    code = main(["regress", "--rows", "300", "--backend", "tensorflow", "--optimizer",
                 f"{path}:{name}", *args, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err and str(path) in err, err
    assert not out.exists()
