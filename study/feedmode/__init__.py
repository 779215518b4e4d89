"""The CNN feed-mode study: is `tf.placeholder` really 4-5x faster than a constant?

  model.py    the network, its input, the modes and the NumPy/SciPy references
  spec.py     one run; config.py its config and command-line flags
  measure.py  one run measured in its own process (imports TensorFlow)
  schema.py   its tables; plugin.py what the sweep engine needs; command.py `study feedmode`
  summary.py, figures.py, report.py   reading the results
"""
