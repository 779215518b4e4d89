"""optax-lbfgs: optax's L-BFGS with its zoom line search, run by the jax backend's modes."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")
optax = pytest.importorskip("optax")

import tomllib  # noqa: E402

import library_nist  # noqa: E402

from datasets import InputError, make_problem  # noqa: E402
from optimizers import build_rules, make_optimizer, run  # noqa: E402
from study.frameworks.jax.optimizers import analytic_loss  # noqa: E402
from study.frameworks.registry import make_backend  # noqa: E402
from study.regression.plugin import SCHEMA, code_files  # noqa: E402
from study.sweep.grid import ConfigError, parse_study  # noqa: E402


@pytest.fixture(scope="module")
def problems():
    return {"least-squares": make_problem("synthetic", n=1000, d=5, kappa=100.0, seed=3),
            "logistic": make_problem("synthetic-logistic", n=1000, d=5, seed=3)}


@pytest.mark.parametrize(("kind", "feed"), [("least-squares", "fused"),
                                            ("logistic", "resident"), ("least-squares", "feed")])
@pytest.mark.slow
def test_it_reaches_the_certified_optimum_in_every_mode(problems, kind, feed):
    result = run(problems[kind], make_optimizer("optax-lbfgs"),
                 build_rules(tol=1e-8, max_iter=500), backend=make_backend("jax", feed=feed))
    assert result.status == "converged", result.message
    assert result.suboptimality <= 1e-8 and result.extra["feed"] == feed
    # one evaluation per line-search step, at least one step per iteration
    assert result.nfev == result.ngev >= 1 + result.iterations
    record = result.record()
    assert record["optimizer"] == "optax-lbfgs" and record["hp_history"] == 10
    assert record["optax_version"] == optax.__version__
    assert SCHEMA.kind_of("optax_version") == "str"


@pytest.mark.slow
def test_the_modes_take_the_same_steps(problems):
    """The same jitted update whether the host loop or a while_loop calls it."""
    runs = [run(problems["logistic"], make_optimizer("optax-lbfgs", history=4),
                build_rules(max_iter=8), backend=make_backend("jax", feed=feed))
            for feed in ("resident", "fused")]
    assert runs[0].iterations == runs[1].iterations == 8 and runs[0].nfev == runs[1].nfev
    np.testing.assert_allclose(runs[0].w, runs[1].w, rtol=1e-12)


def test_the_loss_optax_differentiates_has_our_gradient(problems):
    """optax differentiates value_fn itself; its derivative is the objective's analytic one."""
    import jax

    from optimizers.objective import make_objective, problem_data

    ops = make_backend("jax").ops
    objective = make_objective(ops, problem_data(ops, problems["logistic"], "data"), "data",
                               "logistic")
    w = ops.asarray(np.linspace(-1.0, 1.0, 5)[:, None])
    value, gradient = jax.value_and_grad(analytic_loss(objective))(w)
    f, g = objective.value_and_grad(w)
    assert float(value) == float(f)
    np.testing.assert_array_equal(np.asarray(gradient), np.asarray(g))


@pytest.mark.parametrize(("hp", "message"), [
    ({"history": 0}, "optax-lbfgs: history must be an integer >= 1, got 0"),
    ({"history": 2.5}, "history must be an integer >= 1"),
    ({"memory_size": 5}, "optimizer 'optax-lbfgs' has no hyperparameter 'memory_size'; "
                         "allowed: history"),
])
def test_bad_hyperparameters_are_one_line(hp, message):
    with pytest.raises(InputError, match=message) as info:
        make_optimizer("optax-lbfgs", **hp)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_another_backend_is_refused_in_one_line(problems, backend):
    if backend == "torch":
        pytest.importorskip("torch")
    with pytest.raises(InputError, match=f"optax-lbfgs runs on the jax backend only, not "
                                         f"'{backend}'") as info:
        run(problems["least-squares"], make_optimizer("optax-lbfgs"), build_rules(max_iter=3),
            backend=make_backend(backend))
    assert "\n" not in str(info.value)


@pytest.mark.slow
def test_cli_runs_it_on_the_default_jax_mode(tmp_path, capsys):
    import pandas as pd

    from study.__main__ import main

    out = tmp_path / "run.parquet"
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer",
                 "optax-lbfgs", "--backend", "jax", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    row = pd.read_parquet(out).iloc[0]
    assert row["optimizer"] == "optax-lbfgs" and row["status"] == "converged"
    assert row["feed"] == "fused" and row["optax_version"] == optax.__version__
    code = main(["regress", "--dataset", "synthetic", "--rows", "500", "--optimizer",
                 "optax-lbfgs", "--backend", "numpy", "--out", str(out.with_name("n.parquet"))])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "jax backend only" in err
    assert not out.with_name("n.parquet").exists()


CONFIG = """
name = "o"
[stopping]
max_iter = 5
[[datasets]]
name = "synthetic"
n = 300
[[optimizers]]
name = "optax-lbfgs"
history = [5, 10]
[[backends]]
name = "jax"
feed = "resident"
"""


def test_config_accepts_it_and_fingerprints_its_module():
    study = parse_study(tomllib.loads(CONFIG), "o.toml")
    assert [s.hyperparameters for s in study.specs] == [{"history": 5}, {"history": 10}]
    assert "study/frameworks/jax/optimizers.py" in code_files(study.specs[0])
    with pytest.raises(ConfigError, match="history must be an integer >= 1"):
        parse_study(tomllib.loads(CONFIG.replace("[5, 10]", "0")), "o.toml")


@pytest.mark.slow
@library_nist.requires_nist
@pytest.mark.parametrize("name", library_nist.SETS)
def test_on_nist_it_is_converged_to_the_exact_optimum_or_honest(name, tmp_path, capsys):
    """NIST StRD as stored: where optax's L-BFGS claims convergence the loss has 7 correct
    digits against the exact rational optimum, elsewhere the status is honest (on Pontius and
    Filip its line search finds no decrease in its 20 steps and optax takes the last trial
    step, so the loss grows: 'diverged'); on the sets conditioned as given it converges."""
    library_nist.check(name, ["optax-lbfgs", "--backend", "jax", "--feed", "resident"],
                       tmp_path, capsys)
