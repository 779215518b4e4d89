"""The bench's sections, one module each; `study.bench.command.run_bench` runs them in order.

A section module has a `bench_<name>(plan, ...)` that returns its table (one row per
configuration, status 'ok', 'unavailable', 'error' or 'skipped') and the `measure_*` functions
that make one row from timings taken side by side (`study.bench.timing`).
"""
