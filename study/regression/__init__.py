"""The regression study: which optimizer, framework and feed mode reaches the target first.

  spec.py     one run; config.py the config sections that expand to runs
  measure.py  one run in its own process (data from the sweep's cache, the run, its trace)
  schema.py   its tables; plugin.py what the sweep engine needs
  regress.py  `study regress`: one configuration from the command line
  summary.py, figures.py, report.py   reading the results (paired comparisons)
"""
