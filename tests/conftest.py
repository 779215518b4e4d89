import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture(scope="session")
def well_conditioned():
    from datasets import make_problem

    return make_problem("synthetic", n=2000, d=5, kappa=10.0, noise=0.1, seed=1)


@pytest.fixture(scope="session")
def numpy64():
    from optimizers import make_backend

    return make_backend("numpy", "float64")
