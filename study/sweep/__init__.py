"""The sweep engine every study plugs into through its plugin (`study.sweep.plugin.StudyPlugin`:
its spec type, config sections, `measure`, schema, figures, report section and answers). The
engine owns the rest:

  grid.py         TOML config -> specs: common keys, list axes, [[exclude]], --only
  schema.py       declared, typed columns; rows and tables are made and read through them
  folder.py       the results folder: atomic per-run files, the lock, damaged files, assembly
  fingerprint.py  which code and which environment measured a row (stale rows are re-measured)
  forkserver.py   warm processes that fork one fresh child per run; child.py is what it does
  head_start.py   the NumPy stack's warm process, started before a sweep command's own imports
  isolate.py      one run in a forked child: watchdog (time, memory), parent-death, accepting
                  the row only from the child this runner started
  noise.py        calibration and CPU contention measured around each run; noisy flags
  executors.py    where runs execute: here, one at a time (dask.py: on a Dask cluster)
  runner.py       pending/stale/noisy selection, interleaved order, progress, exit status
  adaptive.py     more instances until the answers' comparisons are decided
"""
