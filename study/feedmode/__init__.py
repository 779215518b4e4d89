"""The CNN feed-mode study: is `tf.placeholder` really 4-5x faster than a constant? And how do
the other frameworks' ways of feeding the same network compare?

  model.py    the network, its input, the modes (declared with their framework in
              study/frameworks/<name>/__init__.py), the NumPy references
  spec.py     one run; config.py its config and command-line flags
  measure.py  one run measured in its own process (imports no framework); its framework's
              modes are built by the module its registry entry names (<name>/feedmode.py)
  schema.py   its tables; plugin.py what the sweep engine needs; command.py `study feedmode`
  summary.py, figures.py, report.py   reading the results
"""
