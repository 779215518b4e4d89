"""The sweep engine every study plugs into.

A study (`study/regression`, `study/feedmode`) provides a plugin (`study.sweep.plugin.StudyPlugin`):
its spec type, the config sections it adds, `measure(spec, ctx) -> Measurement`, its declared
row schema and side tables, which code measured a spec, which framework's warm process runs it,
where its figures and report section are, and its answers (conclusions, what `compare` pairs,
what adaptive replication refines). The engine owns the rest:

  grid.py         TOML config -> specs: common keys, list axes, [[exclude]], --only
  schema.py       declared, typed columns; rows and tables are made and read through them
  folder.py       the results folder: atomic per-run files, the lock, damaged files, assembly
  fingerprint.py  which code and which environment measured a row (stale rows are re-measured)
  forkserver.py   warm processes that fork one fresh child per run (NumPy stack or TensorFlow
                  imported once); child.py is what the child does
  isolate.py      one run in a forked child: watchdog (time, memory), parent-death, accepting
                  the row only from the child this runner started
  noise.py        calibration and CPU contention measured around each run; noisy flags
  cache.py        data sets and their reference optimum made once per sweep folder
  executors.py    where runs execute: here, one at a time (dask.py: on a Dask cluster)
  runner.py       pending/stale/noisy selection, interleaved order, progress, exit status
  environment.py  the machine and software, as env_* columns

A new study is a new folder whose plugin.py defines `PLUGIN` (found by the folder's name; see
plugin.py); a new column is a line in that study's schema (or in `schema.ENGINE_COLUMNS` for one
every study has).
"""
