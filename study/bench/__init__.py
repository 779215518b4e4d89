"""`python -m study bench`: how close each implementation comes to what the machine allows.

Every figure is a ratio of two timings taken in this process, interleaved, because the machines
are shared and noisy: an absolute millisecond means little, a ratio to a pass over the same data
measured a moment before means a lot. Each section is a table, `<out>/<section>.parquet`, and a
block of `<out>/bench.txt`.

A new section is a module in `sections/` with a `bench_<name>(plan, ...)` returning its table,
its name in `plan.SECTIONS`, a line in `command.run_bench` and its block in `render.render`.
Imports go one way: plan and timing import nothing of the bench, runs imports plan, twins
imports runs, the sections import those.

The driver's `seconds` (first evaluation to the stopping iteration, setup excluded) is the
numerator wherever a run is timed; setup is reported beside it. Beside each median ratio,
"fastest" is the fastest run over the fastest denominator: on a loaded machine the two together
show how much of a figure is the implementation and how much the neighbours.
"""
