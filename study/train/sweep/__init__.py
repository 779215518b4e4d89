"""The study's sweep and report parts: the spec, the config, the rounds a run waits for, the row
schema, and the summary, figures and report drawn from results only."""
