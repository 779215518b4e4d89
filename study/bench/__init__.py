"""`python -m study bench`: how close each implementation comes to what the machine allows.

Every figure is a ratio of two timings taken in this process, the two interleaved, because the
machines are shared and noisy: an absolute millisecond means little, a ratio to a pass over the
same data measured a moment before means a lot. Each section is a table,
`<out>/<section>.parquet`, and a block of `<out>/bench.txt`:

  plan.py       what is measured: SECTIONS, the engines (read from the backend registry),
                goals, the FULL and QUICK plans
  timing.py     timing primitives: medians, ratios, read passes, log-log slopes, raw samples
  runs.py       one run through `optimizers.run`, its backend, and a row that says why not
  sections/     one module per section: iterations (passes over X per iteration), overhead
                (driver vs hand-written loop, trace cost), scaling (against n and d),
                feedmode (CNN feed modes over their memory floor), target (time to 1e-8 over
                the normal equations), harness (every installed framework's every declared
                mode against a hand-written loop making the same host reads, goal 1.3x),
                bandwidth (each mode's fraction of a measured copy bandwidth, GD and L-BFGS,
                and JAX's float32 probes: matmul precision, reduction layout)
  twins.py      the lookup of each backend's hand-written twins (the loops, copy and probes
                the sections divide by), one module per backend in its framework's folder
                (study/frameworks/<name>/twin.py), named by its registry entry's `twin`
  render.py     bench.txt and the parquet files
  command.py    the CLI: arguments, the sections run in order, the outputs written;
                `--device gpu` runs harness and bandwidth on the GPU (refused without one)

A new section is a module in `sections/` with a `bench_<name>(plan, ...)` returning its table,
its name in `plan.SECTIONS` (and any sizes in `Plan`), a line in `command.run_bench`, and its
block in `render.render`. Imports go one way: plan and timing import nothing of the bench,
runs imports plan, the twins' package imports runs, the sections import those four and reach
a backend's twin module by the name its registry entry gives (a twin's `probes` import the
section they add rows to), render imports plan, and command imports the sections and render
only when the bench runs (building the parser needs just plan).

The driver's `seconds` (from the first evaluation to the stopping iteration, setup excluded) is
the numerator wherever a run is timed; setup (conversion, the Gram pass, tracing, compilation) is
reported beside it, and the `target` section also divides the totals (setup + loop).
No figure printed here is an absolute time on its own. Beside each median ratio, "fastest" is
the fastest run over the fastest denominator: on a loaded machine, the two together show how much
of a figure is the implementation and how much the neighbours.
"""
