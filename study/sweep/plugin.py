"""What a study gives the engine, and the registry of studies by kind.

A spec is a frozen dataclass with `run_id` (a stable hash of its content), `repeat`,
`to_json()`, `axes()` (flat values that excludes, --only and the results' columns use) and
`label()` (a short name for progress lines). A plugin module provides:

  KIND, CONFIG_KEYS         its name and the top-level config keys it reads
  MEASURE_MODULE            the module that measures (imported by the warm process)
  TENSORFLOW_MODULES        optional: more modules for the warm process of TensorFlow runs
  SCHEMA, SIDE_TABLES       its row schema (engine columns included) and per-run side tables
  STATUSES                  what its `measure` can end with (besides error/timeout/oom/skipped)
  expand(raw, source, name, repeats) -> specs       its config sections, validated
  spec_from_json(text) -> spec
  needs_tensorflow(spec) -> bool     which warm process forks the run
  needs_gpu(spec) -> bool            only where a GPU is (else recorded skipped)
  code_files(spec) -> [paths]        the source files whose content measured the spec
  measure(spec, ctx) -> Measurement  in the run's own process
  summary(runs) -> str               printed at the end of a sweep

and optionally:

  check_grid(specs) -> str | None    a combination the excludes left that cannot run (the
                                     message of a config error), checked after [[exclude]]

and, for a spec that can only be settled by other runs (a learning rate tuned on a grid), both
or neither of:

  prerequisites(spec) -> [specs]     the runs it waits for ([] for a spec that waits for none)
  resolve(spec, rows) -> spec | None the spec to run, from those runs' rows (dicts by run_id);
                                     None while any of them has no row
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

KINDS = {"regression": "study.regression.plugin", "feedmode": "study.feedmode.plugin"}
ENGINE_STATUSES = ("error", "timeout", "oom", "skipped")


@dataclass
class Measurement:
    """What `measure` returns: the row's study columns and its side tables by name."""

    row: dict
    tables: dict = field(default_factory=dict)  # name -> pandas DataFrame


@dataclass
class Context:
    """What the engine hands a measurement: the data cache, the noise probe to wrap the timed
    part in (`with ctx.probe:`), and `save_partial`, which leaves a record of how far the run
    got (a run killed for time or memory still tells its phase)."""

    cache_dir: Path
    probe: object
    save_partial: object = lambda record: None


def load_kind(kind: str) -> ModuleType:
    return importlib.import_module(KINDS[kind])
