"""The study's sweep and report parts: the spec of one run, the config and its grid, the rounds a
run waits for (tuning, target setting), the row schema, and the summary, figures and report
section drawn from results only."""
