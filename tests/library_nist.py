"""The library references' L-BFGS on NIST StRD (tests/test_nist.py reads the data): shared by
tests/test_torch_optimizer.py and tests/test_optax_lbfgs.py."""

from __future__ import annotations

import pandas as pd
import pytest
from test_nist import HONEST, NIST, SETS, arguments, loss_digits, problem

from study.__main__ import main

__all__ = ["SETS", "check", "requires_nist"]

requires_nist = pytest.mark.skipif(not (NIST / "certified.json").is_file(),
                                   reason=f"NIST StRD data not found at {NIST} (outside the "
                                          "project)")
CONDITIONED = 1e3  # kappa of X as given at most this: every L-BFGS must converge


def check(name: str, optimizer: list[str], tmp_path, capsys) -> None:
    """A converged run has 7 correct loss digits against the exact rational optimum; any other
    ends honestly; on a set conditioned as given, the run converges."""
    out = tmp_path / "run.parquet"
    code = main(["regress", *arguments(name), "--optimizer", *optimizer, "--max-iter", "1000",
                 "--out", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    if code == 2:  # f* too coarse for the target: refused before anything ran
        assert "kappa" in err and len(err.strip().splitlines()) == 1
        return
    assert code == 0, err
    row = pd.read_parquet(out).iloc[0]
    if problem(name).reference.kappa_raw <= CONDITIONED:
        assert row["status"] == "converged", row["message"]
    if row["status"] == "converged":
        assert loss_digits(name, row["final_loss"]) >= 7
    else:
        assert row["status"] in HONEST, row["message"]
