"""Studies of time to convergence: the CLI, the runner, results, plots and the report."""

# The package's own choices of study, kept out of the engine (which names none): the kind of a
# config that states none, and the results folders `report` covers when --studies is not given.
DEFAULT_KIND = "regression"
REPORTED = ("regression", "feedmode")
