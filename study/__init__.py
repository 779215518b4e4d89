"""Studies of time to convergence: the CLI, the runner, results, plots and the report."""
